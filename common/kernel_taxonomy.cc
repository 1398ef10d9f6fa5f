// First version; the profiler issue refines the kernel-name families with held-out names.
#include "common/kernel_taxonomy.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace medprof::taxonomy {
namespace {

constexpr std::array<std::string_view, 12> kNames = {
    "conv", "gemm", "norm", "elementwise", "layout", "copy", "reduction", "softmax",
    "optimizer", "upsample", "memset", "other"};

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool Has(const std::string& hay, std::string_view needle) { return hay.find(needle) != std::string::npos; }

template <typename... N>
bool HasAny(const std::string& hay, N... needles) {
  return (Has(hay, needles) || ...);
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
  const std::string o = Lower(op_name);
  if (o.empty()) return Category::kOther;
  if (HasAny(o, "optimizer.", "adam", "_foreach_", "sgd")) return Category::kOptimizer;
  if (HasAny(o, "conv", "convolution")) return Category::kConv;
  if (HasAny(o, "group_norm", "layer_norm", "batch_norm", "groupnorm", "instance_norm")) return Category::kNorm;
  if (HasAny(o, "softmax")) return Category::kSoftmax;
  if (HasAny(o, "upsample", "interpolate", "grid_sampler")) return Category::kUpsample;
  if (HasAny(o, "::mm", "addmm", "bmm", "matmul", "linear", "einsum", "baddbmm", "::dot", "addmv")) {
    return Category::kGemm;
  }
  if (HasAny(o, "zero_", "::fill_", "::zeros", "::empty")) return Category::kMemset;
  if (HasAny(o, "::contiguous")) return Category::kLayout;
  if (HasAny(o, "::cat", "::copy_", "::clone", "::to", "_to_copy", "::stack", "::index")) return Category::kCopy;
  if (HasAny(o, "::sum", "::mean", "::var", "::std", "::norm", "::max", "::min", "::amax", "::l1_loss",
             "::argmax", "::prod")) {
    return Category::kReduction;
  }
  if (HasAny(o, "aten::")) return Category::kElementwise;
  return Category::kOther;
}

Category ClassifyKernel(std::string_view kernel_name, std::string_view op_name) {
  const std::string k = Lower(kernel_name);
  // Rule 1: the name says layout conversion, memcpy or memset.
  if (HasAny(k, "nchwtonhwc", "nhwctonchw", "nhwcaddpadding", "tensortransform", "converttensor",
             "nchw2nhwc", "nhwc2nchw")) {
    return Category::kLayout;
  }
  if (HasAny(k, "memcpy")) return Category::kCopy;
  if (HasAny(k, "memset")) return Category::kMemset;
  // Rule 2: the op decides.
  const Category by_op = ClassifyOp(op_name);
  if (by_op != Category::kOther) return by_op;
  // Rule 3: kernel families.
  if (HasAny(k, "fprop", "dgrad", "wgrad", "convolve", "conv2d", "conv3d", "cudnn::cnn", "winograd",
             "implicit_convolve", "cask_plugin")) {
    return Category::kConv;
  }
  if (HasAny(k, "gemm", "gemv", "nvjet", "cutlass", "cublas", "sgemm", "hgemm")) return Category::kGemm;
  if (HasAny(k, "groupnorm", "group_norm", "layernorm", "layer_norm", "batchnorm", "batch_norm",
             "rowwisemoments", "computefusedparams", "instancenorm")) {
    return Category::kNorm;
  }
  if (HasAny(k, "softmax")) return Category::kSoftmax;
  if (HasAny(k, "upsample", "interpolat")) return Category::kUpsample;
  if (HasAny(k, "multi_tensor_apply", "adam", "fused_sgd")) return Category::kOptimizer;
  if (HasAny(k, "direct_copy", "copy_kernel", "catarray", "cat_array", "concat")) return Category::kCopy;
  if (HasAny(k, "reduce_kernel", "reduction", "reduce")) return Category::kReduction;
  if (HasAny(k, "fill_kernel", "fillfunctor")) return Category::kMemset;
  if (HasAny(k, "elementwise", "functor", "vectorized", "unrolled")) return Category::kElementwise;
  return Category::kOther;
}

}  // namespace medprof::taxonomy
