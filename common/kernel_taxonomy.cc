// Kernel taxonomy: rules in kernel_taxonomy.h. Everything works on lower-case text; mangled
// names are demangled with the C++ ABI's demangler first (libstdc++, no extra dependency).
#include "common/kernel_taxonomy.h"

#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

namespace medprof::taxonomy {
namespace {

constexpr std::array<std::string_view, 12> kNames = {
    "conv", "gemm", "norm", "elementwise", "layout", "copy", "reduction", "softmax",
    "optimizer", "upsample", "memset", "other"};

using Needles = std::initializer_list<std::string_view>;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view s, std::string_view chars = " \t\r\n") {
  const size_t b = s.find_first_not_of(chars);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(chars);
  return s.substr(b, e - b + 1);
}

bool Has(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }
bool HasAny(std::string_view hay, Needles needles) {
  return std::any_of(needles.begin(), needles.end(), [&](std::string_view n) { return Has(hay, n); });
}
bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool OneOf(std::string_view s, Needles set) {
  return std::any_of(set.begin(), set.end(), [&](std::string_view n) { return s == n; });
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// ---------------------------------------------------------------------------------------------
// Kernel names.

// The demangled, lower-case kernel name. Names that are not mangled, or that the demangler
// refuses (truncated records), are used as they are.
std::string NormalizeKernelName(std::string_view name) {
  name = Trim(name);
  if (StartsWith(name, "_Z")) {
    const std::string mangled(name);
    int status = 0;
    char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
    if (status == 0 && demangled != nullptr) {
      std::string out = Lower(demangled);
      std::free(demangled);
      return out;
    }
    std::free(demangled);
  }
  return Lower(name);
}

// The kernel's function identifier with its namespaces, without return type, template
// arguments and parameters: "void at::native::reduce_kernel<512, ...>(...)" ->
// "at::native::reduce_kernel". Input is lower case.
std::string FunctionName(const std::string& k) {
  std::string s = k;
  constexpr std::string_view kAnon = "(anonymous namespace)";
  for (size_t p = s.find(kAnon); p != std::string::npos; p = s.find(kAnon, p)) s.replace(p, kAnon.size(), "anon");
  std::string out;
  int depth = 0;
  for (char c : s) {
    if (c == '<') {
      ++depth;
    } else if (c == '>') {
      depth = std::max(0, depth - 1);
    } else if (depth == 0) {
      if (c == '(') break;
      out.push_back(c);
    }
  }
  const std::string_view t = Trim(out);
  const size_t space = t.rfind(' ');
  return std::string(space == std::string_view::npos ? t : t.substr(space + 1));
}

// Memory formats that appear on either side of a cuDNN transform's "To".
constexpr std::array<std::string_view, 8> kFormats = {"ncdhw", "ndhwc", "nchw", "nhwc", "chwn",
                                                      "ncw", "nwc", "nchwc"};

// True when `fn` holds "<format>to[folded]<format>" (nchwtonhwc, nhwctofoldednhwc, ...).
bool HasFormatToFormat(std::string_view fn) {
  for (size_t p = fn.find("to"); p != std::string_view::npos; p = fn.find("to", p + 1)) {
    const std::string_view before = fn.substr(0, p);
    std::string_view after = fn.substr(p + 2);
    if (StartsWith(after, "folded")) after.remove_prefix(6);
    const bool left = std::any_of(kFormats.begin(), kFormats.end(),
                                  [&](std::string_view f) { return EndsWith(before, f); });
    const bool right = std::any_of(kFormats.begin(), kFormats.end(),
                                   [&](std::string_view f) { return StartsWith(after, f); });
    if (left && right) return true;
  }
  return false;
}

bool IsLayoutKernel(std::string_view fn) {
  return HasFormatToFormat(fn) ||
         HasAny(fn, {"tensortransform", "converttensor", "addpadding", "removepadding"});
}

// "conv" not followed by 'e' (convert, converge): conv2d, convolve, convolution, convfwd,
// conv_depthwise3d, ...
bool HasConvToken(std::string_view s) {
  for (size_t p = s.find("conv"); p != std::string_view::npos; p = s.find("conv", p + 1)) {
    if (p + 4 >= s.size() || s[p + 4] != 'e') return true;
  }
  return false;
}

// cuDNN's legacy convolution kernels: <arch>_scudnn_*, <arch>_fp16_s884cudnn_*,
// <arch>_h1688cudnn_*, <arch>_i8816cudnn_*: "cudnn" right after [s|h|i]<digits> at a '_'.
bool HasLegacyCudnnConv(std::string_view s) {
  for (size_t p = s.find("cudnn"); p != std::string_view::npos; p = s.find("cudnn", p + 1)) {
    size_t j = p;
    while (j > 0 && IsDigit(s[j - 1])) --j;
    if (j == 0) continue;
    const char letter = s[j - 1];
    if (letter != 's' && letter != 'h' && letter != 'i') continue;
    if (j - 1 == 0 || s[j - 2] == '_') return true;
  }
  return false;
}

bool IsConvKernel(std::string_view k, std::string_view fn) {
  return HasAny(k, {"fprop", "dgrad", "wgrad", "implicit_gemm", "convolve", "winograd", "cudnn::cnn::",
                    "cask_cudnn", "im2col", "col2im", "vol2col", "col2vol"}) ||
         StartsWith(fn, "fft2d_") || StartsWith(fn, "fft3d_") || HasLegacyCudnnConv(k) ||
         HasConvToken(k);
}

bool IsNormKernel(std::string_view k) {
  return HasAny(k, {"group_norm", "groupnorm", "layer_norm", "layernorm", "batch_norm", "batchnorm",
                    "instance_norm", "instancenorm", "rms_norm", "rmsnorm", "rowwisemoments",
                    "fusedparams", "computeinternalgradients", "gammabeta", "bn_fw", "bn_bw"});
}

// Functors that make a gather/scatter kernel accumulate instead of copy.
bool Accumulates(std::string_view k) {
  return HasAny(k, {"reduceadd", "reducemultiply", "reducemean", "reducemaximum", "reduceminimum", "atomicadd"});
}

Category ClassifyTriton(std::string_view fn) {
  if (StartsWith(fn, "triton_poi")) return Category::kElementwise;
  if (StartsWith(fn, "triton_red") || StartsWith(fn, "triton_per")) return Category::kReduction;
  if (StartsWith(fn, "triton_for")) return Category::kOptimizer;
  if (StartsWith(fn, "triton_tem")) {
    if (HasConvToken(fn)) return Category::kConv;
    if (HasAny(fn, {"_mm", "addmm", "bmm", "attention"})) return Category::kGemm;
  }
  return Category::kOther;
}

// Rule 3: the kernel name's family. `k` is the normalized name, `fn` its function name.
Category ClassifyKernelFamily(std::string_view k, std::string_view fn) {
  if (Has(k, "nccl")) return Category::kOther;
  if (StartsWith(fn, "triton_")) return ClassifyTriton(fn);
  if (Has(fn, "medprof") && HasAny(k, {"group_norm", "groupnorm"})) return Category::kNorm;
  if (HasAny(k, {"flash_fwd", "flash_bwd", "flash_fprop", "flash_bprop", "fmha", "sdpa", "attention"})) {
    return Category::kGemm;
  }
  if (IsConvKernel(k, fn)) return Category::kConv;
  if (IsNormKernel(k)) return Category::kNorm;
  if (Has(k, "softmax")) return Category::kSoftmax;
  if (HasAny(k, {"upsample", "interpolat", "grid_sampler"})) return Category::kUpsample;
  if (HasAny(k, {"multi_tensor_apply", "fusedadam", "fused_adam", "adamfunctor", "adamw", "fusedsgd",
                 "fused_sgd", "sgdfunctor", "lpnorm_cleanup"})) {
    return Category::kOptimizer;
  }
  if (HasAny(k, {"gemm", "gemv", "nvjet", "cutlass", "cublas", "splitkreduce", "matmul"})) return Category::kGemm;
  if (HasAny(fn, {"reduce", "reduction", "nll_loss"}) && !HasAny(fn, {"backward", "no_reduce"})) {
    return Category::kReduction;
  }
  if (Has(k, "welford")) return Category::kNorm;
  if (HasAny(fn, {"indexselect", "index_select", "index_elementwise", "indexfunc", "scatter_gather", "gather_kernel",
                  "scatter_kernel", "take_kernel"})) {
    return Accumulates(k) ? Category::kOther : Category::kCopy;
  }
  if (HasAny(k, {"direct_copy", "copy_kernel", "catarray", "cat_array", "concat"}) ||
      HasAny(fn, {"reflection_pad", "replication_pad"})) {
    return Category::kCopy;
  }
  if (HasAny(k, {"fillfunctor", "fill_functor", "fill_kernel"})) return Category::kMemset;
  if (HasAny(k, {"elementwise", "vectorized_", "unrolled_", "functor", "pointwise", "dropout",
                 "activation_fw", "activation_bw", "add_tensor", "scalepackedtensor", "op_generic_tensor",
                 "optensor"})) {
    return Category::kElementwise;
  }
  return Category::kOther;
}

// ---------------------------------------------------------------------------------------------
// Op names.

bool IsGemmOp(std::string_view b) {
  return OneOf(b, {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "einsum", "addmv", "mv",
                   "dot", "vdot", "addr", "outer", "tensordot", "addmm_activation", "scaled_mm", "int_mm",
                   "linalg_matmul", "chain_matmul", "bilinear"}) ||
         Has(b, "attention");
}

bool IsMemsetOp(std::string_view b) {
  return OneOf(b, {"zero", "zeros", "zeros_like", "fill", "full", "full_like", "ones", "ones_like",
                   "new_zeros", "new_ones", "new_full"});
}

bool IsCopyOp(std::string_view b) {
  return OneOf(b, {"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "copy", "clone", "to",
                   "index", "index_select", "gather", "take", "embedding", "repeat", "tile", "roll", "flip",
                   "constant_pad_nd", "pad", "lift_fresh", "masked_select"}) ||
         EndsWith(b, "_copy") || StartsWith(b, "copy_") || StartsWith(b, "reflection_pad") ||
         StartsWith(b, "replication_pad");
}

bool IsReductionOp(std::string_view b) {
  return OneOf(b, {"sum", "nansum", "mean", "nanmean", "var", "std", "var_mean", "std_mean", "prod", "amax",
                   "amin", "aminmax", "max", "min", "argmax", "argmin", "norm", "linalg_vector_norm",
                   "frobenius_norm", "logsumexp", "all", "any", "count_nonzero", "nll_loss", "nll_loss_forward",
                   "nll_loss2d_forward", "nll_loss_nd"});
}

bool IsElementwiseOp(std::string_view b) {
  if (EndsWith(b, "_backward")) {
    const std::string_view fwd = b.substr(0, b.size() - 9);
    if (OneOf(fwd, {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy"})) return true;
    b = fwd;
  }
  return OneOf(b, {"add", "sub", "mul", "div", "rsub", "neg", "abs", "exp", "exp2", "expm1", "log", "log1p",
                   "log2", "log10", "sqrt", "rsqrt", "pow", "square", "sin", "cos", "tan", "tanh", "sigmoid",
                   "silu", "relu", "relu6", "gelu", "leaky_relu", "elu", "selu", "celu", "hardswish",
                   "hardsigmoid", "hardtanh", "softplus", "mish", "threshold", "clamp", "clamp_min", "clamp_max",
                   "clip", "where", "lerp", "addcmul", "addcdiv", "reciprocal", "sign", "sgn", "floor", "ceil",
                   "round", "trunc", "frac", "fmod", "remainder", "maximum", "minimum", "eq", "ne", "lt", "le",
                   "gt", "ge", "logical_and", "logical_or", "logical_not", "logical_xor", "bitwise_and",
                   "bitwise_or", "bitwise_not", "bitwise_xor", "masked_fill", "dropout", "native_dropout",
                   "feature_dropout", "bernoulli", "normal", "uniform", "randn", "rand", "randn_like",
                   "rand_like", "randint", "exponential", "arange", "linspace", "nan_to_num", "isnan", "isinf",
                   "erf", "erfinv", "erfc", "mul_scalar", "add_scalar", "div_scalar", "sub_scalar"});
}

// One op name (no " > ").
Category ClassifySingleOp(std::string_view op) {
  std::string o = Lower(Trim(op));
  if (o.empty()) return Category::kOther;
  constexpr std::string_view kAutograd = "autograd::engine::evaluate_function:";
  if (StartsWith(o, kAutograd)) o = std::string(Trim(std::string_view(o).substr(kAutograd.size())));

  // Optimizer record functions and ops.
  if (StartsWith(o, "optimizer.") || HasAny(o, {"adam", "sgd", "adagrad", "rmsprop"})) return Category::kOptimizer;

  std::string_view b = o;
  if (StartsWith(b, "aten::")) b.remove_prefix(6);
  b = Trim(b, "_");
  if (StartsWith(b, "foreach_")) return Category::kOptimizer;

  // An autograd node ("MmBackward0", "torch::autograd::AccumulateGrad") maps like its forward op.
  bool autograd_node = false;
  if (const size_t p = b.rfind("backward"); p != std::string_view::npos && p > 0 && b[p - 1] != '_') {
    std::string_view rest = b.substr(p + 8);
    if (std::all_of(rest.begin(), rest.end(), IsDigit)) {
      autograd_node = true;
      b = b.substr(0, p);
    }
  }

  if (b == "contiguous" || HasAny(o, {"channels_last", "memory_format"})) return Category::kLayout;
  if (HasConvToken(b)) return Category::kConv;
  if (IsNormKernel(b)) return Category::kNorm;
  if (Has(b, "softmax")) return Category::kSoftmax;
  if (HasAny(b, {"upsample", "interpolate", "grid_sampler"})) return Category::kUpsample;
  if (IsGemmOp(b)) return Category::kGemm;
  if (IsMemsetOp(b)) return Category::kMemset;
  if (IsCopyOp(b)) return Category::kCopy;
  if (IsReductionOp(b)) return autograd_node ? Category::kElementwise : Category::kReduction;
  if (IsElementwiseOp(b)) return Category::kElementwise;
  return Category::kOther;
}

std::vector<std::string_view> SplitOpStack(std::string_view op_name) {
  std::vector<std::string_view> ops;
  constexpr std::string_view kSep = " > ";
  while (true) {
    const size_t p = op_name.find(kSep);
    const std::string_view part = Trim(op_name.substr(0, p));
    if (!part.empty()) ops.push_back(part);
    if (p == std::string_view::npos) break;
    op_name.remove_prefix(p + kSep.size());
  }
  return ops;
}

}  // namespace

std::string_view CategoryName(Category c) { return kNames[static_cast<size_t>(c)]; }

bool ParseCategory(std::string_view name, Category* out) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) {
      *out = static_cast<Category>(i);
      return true;
    }
  }
  return false;
}

const std::vector<Category>& AllCategories() {
  static const std::vector<Category> all = [] {
    std::vector<Category> v;
    for (size_t i = 0; i < kNames.size(); ++i) v.push_back(static_cast<Category>(i));
    return v;
  }();
  return all;
}

Category ClassifyOp(std::string_view op_name) {
  const std::vector<std::string_view> ops = SplitOpStack(op_name);
  std::vector<Category> cats;
  cats.reserve(ops.size());
  for (std::string_view op : ops) cats.push_back(ClassifySingleOp(op));
  if (std::find(cats.begin(), cats.end(), Category::kOptimizer) != cats.end()) return Category::kOptimizer;
  Category decided = Category::kOther;
  for (auto it = cats.rbegin(); it != cats.rend(); ++it) {
    if (*it != Category::kOther) {
      decided = *it;
      break;
    }
  }
  const bool format_conversion = std::find(cats.begin(), cats.end(), Category::kLayout) != cats.end();
  if (format_conversion && (decided == Category::kCopy || decided == Category::kOther)) return Category::kLayout;
  return decided;
}

Category ClassifyKernel(std::string_view kernel_name, std::string_view op_name) {
  const std::string k = NormalizeKernelName(kernel_name);
  const std::string fn = FunctionName(k);
  // Rule 1: the name says layout conversion, memcpy or memset.
  if (IsLayoutKernel(fn)) return Category::kLayout;
  if (Has(k, "memcpy")) return Category::kCopy;
  if (Has(k, "memset")) return Category::kMemset;
  // Rule 2: the op decides.
  const Category by_op = ClassifyOp(op_name);
  if (by_op != Category::kOther) return by_op;
  // Rule 3: the kernel family.
  return ClassifyKernelFamily(k, fn);
}

}  // namespace medprof::taxonomy
