#include "workloads/meddpm/fused_group_norm.h"

#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

#ifdef MEDPROF_FUSED_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "workloads/meddpm/cuda/group_norm_kernels.h"
#endif

#include "workloads/meddpm/fused_info.h"

namespace medprof::meddpm::fused {
namespace {

// (N, C, 1, ...) view shape for a per-(n, c) value broadcast over x's spatial dims.
std::vector<int64_t> BroadcastShape(const at::Tensor& x) {
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[0] = x.size(0);
  shape[1] = x.size(1);
  return shape;
}

// x.permute(0, 2, ..., dim-1, 1): channels innermost.
std::vector<int64_t> ChannelsLastOrder(int64_t dim) {
  std::vector<int64_t> order = {0};
  for (int64_t d = 2; d < dim; ++d) order.push_back(d);
  order.push_back(1);
  return order;
}

#ifdef MEDPROF_FUSED_KERNELS

gn::Shape ShapeOf(const at::Tensor& x, int64_t groups) {
  gn::Shape s;
  s.n = x.size(0);
  s.c = x.size(1);
  s.s = s.n * s.c > 0 ? x.numel() / (s.n * s.c) : 0;
  s.groups = groups;
  s.layout = x.is_contiguous() ? gn::Layout::kNCS : gn::Layout::kNSC;
  s.dtype = x.scalar_type() == at::kBFloat16 ? gn::DType::kBF16 : gn::DType::kF32;
  return s;
}

const float* F32(const at::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

struct Saved {
  at::Tensor mean, rstd, scale, shift, chan_mean;
};

// emb_f, gamma_f, beta_f: FP32 contiguous (emb_f may be undefined). y: like x.
Saved RunForward(const at::Tensor& x, const at::Tensor& emb_f, const at::Tensor& gamma_f, const at::Tensor& beta_f,
                 int64_t groups, double eps, bool silu, at::Tensor& y) {
  const c10::cuda::CUDAGuard guard(x.device());
  const gn::Shape shape = ShapeOf(x, groups);
  const auto f32 = x.options().dtype(at::kFloat).memory_format(at::MemoryFormat::Contiguous);
  Saved s;
  s.mean = at::empty({shape.n, groups}, f32);
  s.rstd = at::empty({shape.n, groups}, f32);
  s.scale = at::empty({shape.n, shape.c}, f32);
  s.shift = at::empty({shape.n, shape.c}, f32);
  s.chan_mean = at::empty({shape.n, shape.c}, f32);
  cudaError_t err = cudaSuccess;
  const int sm = gn::CurrentDeviceSmCount(&err);
  TORCH_CHECK(err == cudaSuccess, "medprof fused GroupNorm: cannot read the SM count: ", cudaGetErrorString(err));
  at::Tensor workspace = at::empty({gn::WorkspaceFloats(shape, sm)}, f32);
  gn::ForwardArgs a;
  a.x = x.data_ptr();
  a.gamma = F32(gamma_f);
  a.beta = F32(beta_f);
  a.emb = F32(emb_f);
  a.silu = silu;
  a.eps = static_cast<float>(eps);
  a.y = y.data_ptr();
  a.mean = s.mean.data_ptr<float>();
  a.rstd = s.rstd.data_ptr<float>();
  a.scale = s.scale.data_ptr<float>();
  a.shift = s.shift.data_ptr<float>();
  a.chan_mean = s.chan_mean.data_ptr<float>();
  a.workspace = workspace.data_ptr<float>();
  err = gn::Forward(shape, a, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "medprof fused GroupNorm forward on ", x.sizes(), " ", x.scalar_type(), ": ",
              cudaGetErrorString(err));
  return s;
}

// dy: like x. dx: like x (may be dy). dgamma, dbeta: FP32 (C). demb: FP32 (N, C) or undefined.
void RunBackward(const at::Tensor& x, const at::Tensor& emb_f, const at::Tensor& gamma_f, const Saved& s,
                 int64_t groups, bool silu, const at::Tensor& dy, at::Tensor& dx, at::Tensor& dgamma,
                 at::Tensor& dbeta, at::Tensor& demb) {
  const c10::cuda::CUDAGuard guard(x.device());
  const gn::Shape shape = ShapeOf(x, groups);
  const auto f32 = x.options().dtype(at::kFloat).memory_format(at::MemoryFormat::Contiguous);
  cudaError_t err = cudaSuccess;
  const int sm = gn::CurrentDeviceSmCount(&err);
  TORCH_CHECK(err == cudaSuccess, "medprof fused GroupNorm: cannot read the SM count: ", cudaGetErrorString(err));
  at::Tensor workspace = at::empty({gn::WorkspaceFloats(shape, sm) + gn::BackwardExtraFloats(shape)}, f32);
  gn::BackwardArgs a;
  a.dy = dy.data_ptr();
  a.x = x.data_ptr();
  a.gamma = F32(gamma_f);
  a.emb = F32(emb_f);
  a.silu = silu;
  a.mean = s.mean.data_ptr<float>();
  a.rstd = s.rstd.data_ptr<float>();
  a.scale = s.scale.data_ptr<float>();
  a.shift = s.shift.data_ptr<float>();
  a.chan_mean = s.chan_mean.data_ptr<float>();
  a.dx = dx.data_ptr();
  a.dgamma = dgamma.data_ptr<float>();
  a.dbeta = dbeta.data_ptr<float>();
  a.demb = demb.defined() ? demb.data_ptr<float>() : nullptr;
  a.workspace = workspace.data_ptr<float>();
  err = gn::Backward(shape, a, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "medprof fused GroupNorm backward on ", x.sizes(), " ", x.scalar_type(), ": ",
              cudaGetErrorString(err));
}

// An empty tensor stands for "no embedding" inside the autograd function: LibTorch 2.x's
// Function::apply records every input's device and throws on an undefined tensor.
at::Tensor Float32(const at::Tensor& t) {
  return t.defined() && t.numel() > 0 ? t.to(at::kFloat).contiguous() : at::Tensor();
}

class GroupNormActFunction : public torch::autograd::Function<GroupNormActFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& emb,
                            const at::Tensor& gamma, const at::Tensor& beta, int64_t groups, double eps, bool silu) {
    const at::Tensor emb_f = Float32(emb), gamma_f = Float32(gamma), beta_f = Float32(beta);
    at::Tensor y = at::empty_like(x);
    Saved s = RunForward(x, emb_f, gamma_f, beta_f, groups, eps, silu, y);
    ctx->save_for_backward({x, emb_f, gamma_f, s.mean, s.rstd, s.scale, s.shift, s.chan_mean});
    ctx->saved_data["groups"] = groups;
    ctx->saved_data["silu"] = silu;
    ctx->saved_data["emb_dtype"] = static_cast<int64_t>(emb.scalar_type());
    ctx->saved_data["gamma_dtype"] = static_cast<int64_t>(gamma.scalar_type());
    ctx->saved_data["beta_dtype"] = static_cast<int64_t>(beta.scalar_type());
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& emb_f = saved[1];
    const at::Tensor& gamma_f = saved[2];
    const int64_t groups = ctx->saved_data["groups"].toInt();
    const bool silu = ctx->saved_data["silu"].toBool();
    const auto dtype = [&](const char* key) { return static_cast<at::ScalarType>(ctx->saved_data[key].toInt()); };
    at::Tensor dy = grads[0];
    if (!dy.defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    // The kernels read dy in x's dtype and layout.
    if (dy.scalar_type() != x.scalar_type() || dy.strides() != x.strides()) dy = at::empty_like(x).copy_(dy);

    const gn::Shape shape = ShapeOf(x, groups);
    const auto f32 = x.options().dtype(at::kFloat).memory_format(at::MemoryFormat::Contiguous);
    at::Tensor dx = at::empty_like(x);
    at::Tensor dgamma = at::empty({shape.c}, f32), dbeta = at::empty({shape.c}, f32);
    at::Tensor demb = emb_f.defined() ? at::empty({shape.n, shape.c}, f32) : at::Tensor();
    RunBackward(x, emb_f, gamma_f, Saved{saved[3], saved[4], saved[5], saved[6], saved[7]}, groups, silu, dy, dx,
                dgamma, dbeta, demb);
    return {dx,
            demb.defined() ? demb.to(dtype("emb_dtype")) : at::Tensor(),
            dgamma.to(dtype("gamma_dtype")),
            dbeta.to(dtype("beta_dtype")),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

#endif  // MEDPROF_FUSED_KERNELS

}  // namespace

std::string KernelInputProblem(const at::Tensor& x) {
  if (!Compiled()) return NotCompiledReason();
  if (!x.defined()) return "undefined input";
  if (!x.is_cuda()) return "input on " + x.device().str() + ", the fused kernels run on CUDA devices";
  if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kBFloat16) {
    return std::string("input dtype ") + c10::toString(x.scalar_type()) + ", the fused kernels take Float and BFloat16";
  }
  return "";
}

std::string FusedUnavailable(const at::Tensor& x, int64_t groups) {
  if (std::string why = KernelInputProblem(x); !why.empty()) return why;
  if (x.dim() < 3) return "input has " + std::to_string(x.dim()) + " dimensions, at least 3 (N, C, spatial...)";
  if (x.numel() == 0) return "empty input";
  if (groups < 1 || x.size(1) % groups != 0) {
    return "channels " + std::to_string(x.size(1)) + " not divisible by groups " + std::to_string(groups);
  }
  if (!x.is_contiguous() && !x.permute(ChannelsLastOrder(x.dim())).is_contiguous()) {
    return "input is neither channels-first contiguous nor channels-last dense";
  }
#ifdef MEDPROF_FUSED_KERNELS
  if (std::string why = gn::Unsupported(ShapeOf(x, groups)); !why.empty()) return why;
#endif
  return "";
}

std::string ParamsUnavailable(const at::Tensor& x, const at::Tensor& emb, const at::Tensor& gamma,
                              const at::Tensor& beta) {
  if (!x.defined() || x.dim() < 2) return "input must be defined with at least 2 dimensions";
  const auto check = [&](const char* name, const at::Tensor& t, int64_t want) -> std::string {
    if (!t.defined()) return std::string(name) + " is undefined, the fused kernels need it";
    if (t.numel() != want) {
      return std::string(name) + " has " + std::to_string(t.numel()) + " elements, expected " + std::to_string(want);
    }
    if (t.device() != x.device()) return std::string(name) + " on " + t.device().str() + ", input on " + x.device().str();
    if (!at::isFloatingType(t.scalar_type())) {
      return std::string(name) + " dtype " + c10::toString(t.scalar_type()) + ", expected a floating type";
    }
    return "";
  };
  if (std::string why = check("gamma", gamma, x.size(1)); !why.empty()) return why;
  if (std::string why = check("beta", beta, x.size(1)); !why.empty()) return why;
  if (emb.defined()) return check("emb", emb, x.size(0) * x.size(1));
  return "";
}

namespace {
// Both refusal checks, input first.
std::string WhyNotFused(const at::Tensor& x, const at::Tensor& emb, int64_t groups, const at::Tensor& gamma,
                        const at::Tensor& beta) {
  std::string why = FusedUnavailable(x, groups);
  return why.empty() ? ParamsUnavailable(x, emb, gamma, beta) : why;
}
}  // namespace

at::Tensor ReferenceGroupNormAct(const at::Tensor& x, const at::Tensor& emb, int64_t groups, const at::Tensor& gamma,
                                 const at::Tensor& beta, double eps, bool silu) {
  // The model's unfused order: the add in x's dtype, then GroupNorm in FP32.
  at::Tensor h = emb.defined() ? x + emb.view(BroadcastShape(x)) : x;
  if (h.scalar_type() != at::kFloat) h = h.to(at::kFloat);
  at::Tensor y = at::group_norm(h, groups, gamma, beta, eps);
  return silu ? at::silu(y) : y;
}

at::Tensor GroupNormAct(const at::Tensor& x, const at::Tensor& emb, int64_t groups, const at::Tensor& gamma,
                        const at::Tensor& beta, double eps, bool silu, bool fused) {
  RECORD_FUNCTION(silu ? "medprof::group_norm_silu" : "medprof::group_norm", std::vector<c10::IValue>({x}));
  if (fused) {
    std::string why = WhyNotFused(x, emb, groups, gamma, beta);
    if (why.empty()) {
#ifdef MEDPROF_FUSED_KERNELS
      CountCall(Op::kGroupNorm, "");
      return GroupNormActFunction::apply(x, emb.defined() ? emb : at::empty({0}, x.options().dtype(at::kFloat)), gamma,
                                         beta, groups, eps, silu);
#endif
    }
    CountCall(Op::kGroupNorm, why.empty() ? NotCompiledReason() : why);
  }
  return ReferenceGroupNormAct(x, emb, groups, gamma, beta, eps, silu);
}

void FusedForwardInto(const at::Tensor& x, const at::Tensor& emb, int64_t groups, const at::Tensor& gamma,
                      const at::Tensor& beta, double eps, bool silu, at::Tensor& y) {
  const std::string why = WhyNotFused(x, emb, groups, gamma, beta);
  TORCH_CHECK(why.empty(), "medprof fused GroupNorm cannot take this input: ", why);
  TORCH_CHECK(y.sizes() == x.sizes() && y.strides() == x.strides() && y.scalar_type() == x.scalar_type() &&
                  y.device() == x.device(),
              "FusedForwardInto: y must have x's shape, strides, dtype and device");
#ifdef MEDPROF_FUSED_KERNELS
  const c10::NoGradGuard no_grad;
  RunForward(x, Float32(emb), Float32(gamma), Float32(beta), groups, eps, silu, y);
#else
  (void)emb, (void)gamma, (void)beta, (void)eps, (void)silu;
#endif
}

void FusedForwardBackwardInto(const at::Tensor& x, const at::Tensor& emb, int64_t groups, const at::Tensor& gamma,
                              const at::Tensor& beta, double eps, bool silu, const at::Tensor& dy, at::Tensor& y,
                              at::Tensor& dx, at::Tensor& dgamma, at::Tensor& dbeta, at::Tensor& demb) {
  const std::string why = WhyNotFused(x, emb, groups, gamma, beta);
  TORCH_CHECK(why.empty(), "medprof fused GroupNorm cannot take this input: ", why);
  for (const at::Tensor* t : {static_cast<const at::Tensor*>(&y), static_cast<const at::Tensor*>(&dx), &dy}) {
    TORCH_CHECK(t->sizes() == x.sizes() && t->strides() == x.strides() && t->scalar_type() == x.scalar_type() &&
                    t->device() == x.device(),
                "FusedForwardBackwardInto: y, dy and dx must have x's shape, strides, dtype and device");
  }
  TORCH_CHECK(dgamma.numel() == x.size(1) && dbeta.numel() == x.size(1) && dgamma.scalar_type() == at::kFloat &&
                  dbeta.scalar_type() == at::kFloat && dgamma.is_contiguous() && dbeta.is_contiguous(),
              "FusedForwardBackwardInto: dgamma and dbeta must be contiguous Float (C)");
  TORCH_CHECK(emb.defined() == demb.defined() &&
                  (!demb.defined() || (demb.numel() == x.size(0) * x.size(1) && demb.scalar_type() == at::kFloat &&
                                       demb.is_contiguous())),
              "FusedForwardBackwardInto: demb must be contiguous Float (N, C) exactly when emb is given");
#ifdef MEDPROF_FUSED_KERNELS
  const c10::NoGradGuard no_grad;
  const at::Tensor emb_f = Float32(emb), gamma_f = Float32(gamma);
  const Saved s = RunForward(x, emb_f, gamma_f, Float32(beta), groups, eps, silu, y);
  RunBackward(x, emb_f, gamma_f, s, groups, silu, dy, dx, dgamma, dbeta, demb);
#else
  (void)eps, (void)silu;
#endif
}


}  // namespace medprof::meddpm::fused
