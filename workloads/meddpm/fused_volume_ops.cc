#include "workloads/meddpm/fused_volume_ops.h"

#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <vector>

#ifdef MEDPROF_FUSED_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "workloads/meddpm/cuda/group_norm_kernels.h"  // CurrentDeviceSmCount
#include "workloads/meddpm/cuda/volume_kernels.h"
#endif

#include "workloads/meddpm/fused_group_norm.h"  // KernelInputProblem

namespace medprof::meddpm::fused {
namespace {

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast3d;

bool Aligned16(const at::Tensor& t) { return (reinterpret_cast<uintptr_t>(t.data_ptr()) & 15u) == 0; }

// What every kernel here needs of its main input.
std::string InputProblem(const at::Tensor& x) {
  if (std::string why = KernelInputProblem(x); !why.empty()) return why;
  if (x.dim() != 5) return "input has " + std::to_string(x.dim()) + " dimensions, the kernels take 5 (N, C, D, H, W)";
  if (x.numel() == 0) return "empty input";
  if (x.size(1) % 4 != 0) return "channels " + std::to_string(x.size(1)) + " not a multiple of 4";
  if (!x.is_contiguous(kChannelsLast)) return "input is not channels-last (ChannelsLast3d) dense";
  if (!Aligned16(x)) return "input data not 16-byte aligned";
  return "";
}

#ifdef MEDPROF_FUSED_KERNELS

// A tensor the kernels can read as dtype `dtype` in channels-last order, 16-byte aligned.
at::Tensor AsKernelInput(const at::Tensor& t, at::ScalarType dtype) {
  at::Tensor r = t.to(dtype).contiguous(kChannelsLast);
  if (!Aligned16(r)) r = at::empty_like(r, kChannelsLast).copy_(r);
  return r;
}

vk::Volume VolumeOf(const at::Tensor& x) {
  vk::Volume v;
  v.n = x.size(0);
  v.c = x.size(1);
  v.d = x.size(2);
  v.h = x.size(3);
  v.w = x.size(4);
  return v;
}

vk::DType DTypeOf(const at::Tensor& x) { return x.scalar_type() == at::kBFloat16 ? vk::DType::kBF16 : vk::DType::kF32; }

void Check(cudaError_t err, const char* what, const at::Tensor& x) {
  TORCH_CHECK(err == cudaSuccess, "medprof ", what, " on ", x.sizes(), " ", x.scalar_type(), ": ",
              cudaGetErrorString(err));
}

at::Tensor RunUpsampleForward(const at::Tensor& x) {
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty({x.size(0), x.size(1), 2 * x.size(2), 2 * x.size(3), 2 * x.size(4)},
                           x.options().memory_format(kChannelsLast));
  Check(vk::UpsampleX2Forward(VolumeOf(x), DTypeOf(x), x.data_ptr(), y.data_ptr(),
                              c10::cuda::getCurrentCUDAStream().stream()),
        "upsample x2 forward", x);
  return y;
}

// dy: like the forward's output, in the kernels' form (AsKernelInput); x_sizes: the input's.
at::Tensor RunUpsampleBackward(const at::Tensor& dy, at::IntArrayRef x_sizes) {
  const c10::cuda::CUDAGuard guard(dy.device());
  at::Tensor dx = at::empty(x_sizes, dy.options().memory_format(kChannelsLast));
  Check(vk::UpsampleX2Backward(VolumeOf(dx), DTypeOf(dx), dy.data_ptr(), dx.data_ptr(),
                               c10::cuda::getCurrentCUDAStream().stream()),
        "upsample x2 backward", dx);
  return dx;
}

// dx (like x) and dW (FP32, weight's shape) for dy (N, O, D, H, W) in the kernels' form.
std::pair<at::Tensor, at::Tensor> RunSmallConvBackward(const at::Tensor& x, const at::Tensor& weight,
                                                       const at::Tensor& dy) {
  const c10::cuda::CUDAGuard guard(x.device());
  const vk::Volume v = VolumeOf(x);
  const int64_t outs = weight.size(0);
  cudaError_t err = cudaSuccess;
  const int sm = gn::CurrentDeviceSmCount(&err);
  Check(err, "small conv backward (reading the SM count)", x);
  const auto f32 = x.options().dtype(at::kFloat).memory_format(at::MemoryFormat::Contiguous);
  const at::Tensor w = weight.to(at::kFloat).contiguous();  // (O, C, 27)
  at::Tensor dx = at::empty_like(x, kChannelsLast);
  at::Tensor dw = at::empty(weight.sizes(), f32);
  at::Tensor workspace = at::empty({vk::SmallConvWorkspaceFloats(v, outs, sm)}, f32);
  vk::SmallConvBackwardArgs a;
  a.x = x.data_ptr();
  a.dy = dy.data_ptr();
  a.w = w.data_ptr<float>();
  a.dx = dx.data_ptr();
  a.dw = dw.data_ptr<float>();
  a.workspace = workspace.data_ptr<float>();
  a.sm_count = sm;
  Check(vk::SmallConvBackward(v, outs, DTypeOf(x), a, c10::cuda::getCurrentCUDAStream().stream()),
        "small conv backward", x);
  return {dx, dw};
}

class UpsampleX2Function : public torch::autograd::Function<UpsampleX2Function> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    ctx->saved_data["sizes"] = x.sizes().vec();
    ctx->saved_data["dtype"] = static_cast<int64_t>(x.scalar_type());
    return RunUpsampleForward(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor& dy = grads[0];
    if (!dy.defined()) return {at::Tensor()};
    const std::vector<int64_t> sizes = ctx->saved_data["sizes"].toIntVector();
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {RunUpsampleBackward(AsKernelInput(dy, dtype), sizes)};
  }
};

// x, w, b in x's dtype; b empty (numel 0) for no bias (LibTorch 2.x's Function::apply throws on
// an undefined input).
class SmallConvFunction : public torch::autograd::Function<SmallConvFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& b) {
    const bool has_bias = b.numel() > 0;
    ctx->save_for_backward({x, w});
    ctx->saved_data["has_bias"] = has_bias;
    return at::conv3d(x, w, has_bias ? b : at::Tensor(), /*stride=*/{1, 1, 1}, /*padding=*/{1, 1, 1});
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& w = saved[1];
    const at::Tensor dy = AsKernelInput(grads[0], x.scalar_type());
    auto [dx, dw] = RunSmallConvBackward(x, w, dy);
    at::Tensor db;
    if (ctx->saved_data["has_bias"].toBool()) db = dy.sum({0, 2, 3, 4}, /*keepdim=*/false, at::kFloat).to(w.scalar_type());
    return {dx, dw.to(w.scalar_type()), db};
  }
};

#endif  // MEDPROF_FUSED_KERNELS

}  // namespace

std::string UpsampleUnavailable(const at::Tensor& x) {
  if (std::string why = InputProblem(x); !why.empty()) return why;
#ifdef MEDPROF_FUSED_KERNELS
  return vk::UnsupportedUpsample(VolumeOf(x));
#else
  return "";
#endif
}

at::Tensor UpsampleTrilinearX2(const at::Tensor& x, bool fused) {
  RECORD_FUNCTION("medprof::upsample_trilinear_x2", std::vector<c10::IValue>({x}));
  if (fused) {
    const std::string why = UpsampleUnavailable(x);
    CountCall(Op::kUpsample, why);
#ifdef MEDPROF_FUSED_KERNELS
    if (why.empty()) return UpsampleX2Function::apply(x);
#endif
  }
  const std::vector<int64_t> size = {2 * x.size(2), 2 * x.size(3), 2 * x.size(4)};
  return at::upsample_trilinear3d(x, size, /*align_corners=*/false);
}

std::string SmallConvUnavailable(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (std::string why = InputProblem(x); !why.empty()) return why;
  if (!weight.defined() || weight.dim() != 5 || weight.size(1) != x.size(1) || weight.size(2) != 3 ||
      weight.size(3) != 3 || weight.size(4) != 3) {
    return "weight is not (O, " + std::to_string(x.size(1)) + ", 3, 3, 3)";
  }
  if (weight.device() != x.device()) return "weight on " + weight.device().str() + ", input on " + x.device().str();
  if (!at::isFloatingType(weight.scalar_type())) return "weight is not floating point";
  if (bias.defined() && (bias.numel() != weight.size(0) || bias.device() != x.device() ||
                         !at::isFloatingType(bias.scalar_type()))) {
    return "bias is not a floating (O) tensor on the input's device";
  }
#ifdef MEDPROF_FUSED_KERNELS
  vk::Volume v = VolumeOf(x);
  return vk::UnsupportedSmallConv(v, weight.size(0));
#else
  return "";
#endif
}

at::Tensor SmallConv3x3(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool fused) {
  RECORD_FUNCTION("medprof::conv3x3_small", std::vector<c10::IValue>({x}));
  if (fused) {
    const std::string why = SmallConvUnavailable(x, weight, bias);
    CountCall(Op::kSmallConv, why);
#ifdef MEDPROF_FUSED_KERNELS
    if (why.empty()) {
      // What autocast would hand cuDNN: weight and bias in the input's dtype.
      const at::Tensor w = weight.to(x.scalar_type()).contiguous(kChannelsLast);
      const at::Tensor b = bias.defined() ? bias.to(x.scalar_type()) : at::empty({0}, x.options());
      return SmallConvFunction::apply(x, w, b);
    }
#endif
  }
  return at::conv3d(x, weight, bias, /*stride=*/{1, 1, 1}, /*padding=*/{1, 1, 1});
}

at::Tensor UpsampleX2BackwardKernel(const at::Tensor& dy, const at::Tensor& x) {
  const std::string why = UpsampleUnavailable(x);
  TORCH_CHECK(why.empty(), "medprof upsample kernels cannot take this input: ", why);
  TORCH_CHECK(dy.dim() == 5 && dy.size(0) == x.size(0) && dy.size(1) == x.size(1) && dy.size(2) == 2 * x.size(2) &&
                  dy.size(3) == 2 * x.size(3) && dy.size(4) == 2 * x.size(4),
              "UpsampleX2BackwardKernel: dy must be (N, C, 2D, 2H, 2W) of x");
#ifdef MEDPROF_FUSED_KERNELS
  const c10::NoGradGuard no_grad;
  return RunUpsampleBackward(AsKernelInput(dy, x.scalar_type()), x.sizes());
#else
  return at::Tensor();
#endif
}

std::pair<at::Tensor, at::Tensor> SmallConvBackwardKernel(const at::Tensor& x, const at::Tensor& weight,
                                                          const at::Tensor& dy) {
  const std::string why = SmallConvUnavailable(x, weight, at::Tensor());
  TORCH_CHECK(why.empty(), "medprof small conv kernels cannot take this input: ", why);
  TORCH_CHECK(dy.dim() == 5 && dy.size(0) == x.size(0) && dy.size(1) == weight.size(0) && dy.size(2) == x.size(2) &&
                  dy.size(3) == x.size(3) && dy.size(4) == x.size(4),
              "SmallConvBackwardKernel: dy must be (N, O, D, H, W)");
#ifdef MEDPROF_FUSED_KERNELS
  const c10::NoGradGuard no_grad;
  return RunSmallConvBackward(x, weight, AsKernelInput(dy, x.scalar_type()));
#else
  return {};
#endif
}

}  // namespace medprof::meddpm::fused
