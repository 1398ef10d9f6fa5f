// Adam over whole parameter lists with LibTorch's _foreach_ ops: the algorithm of
// torch::optim::Adam (no weight decay, no amsgrad) in the launch pattern of PyTorch's default
// CUDA Adam (foreach=True, what the peer runs), a handful of multi-tensor kernels per step
// instead of about eight kernels per parameter tensor (246 tensors in Med-DDPM: ~2,000 launches
// that left the GPU idle while the CPU queued them).
//
//   exp_avg    = beta1 * exp_avg + (1 - beta1) * g
//   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g
//   p         -= lr / (1 - beta1^t) * exp_avg / (sqrt(exp_avg_sq) / sqrt(1 - beta2^t) + eps)
//
// Parameters without a gradient are skipped (their state does not move), as in both originals.
// Header-only; not thread-safe.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace medprof::ddpm {

class ForeachAdam {
 public:
  ForeachAdam(std::vector<at::Tensor> params, double lr, double beta1, double beta2, double eps)
      : params_(std::move(params)), lr_(lr), beta1_(beta1), beta2_(beta2), eps_(eps) {
    exp_avg_.reserve(params_.size());
    exp_avg_sq_.reserve(params_.size());
    steps_.assign(params_.size(), 0);
    for (const at::Tensor& p : params_) {
      exp_avg_.push_back(at::zeros_like(p, at::MemoryFormat::Preserve));
      exp_avg_sq_.push_back(at::zeros_like(p, at::MemoryFormat::Preserve));
    }
  }

  void Step() {
    const c10::NoGradGuard no_grad;
    std::vector<at::Tensor> p, g, m, v;
    std::vector<at::Scalar> bc2_sqrt, step_size;  // per tensor: each counts its own steps
    for (size_t i = 0; i < params_.size(); ++i) {
      const at::Tensor& grad = params_[i].grad();
      if (!grad.defined()) continue;
      p.push_back(params_[i]);
      g.push_back(grad);
      m.push_back(exp_avg_[i]);
      v.push_back(exp_avg_sq_[i]);
      const double t = static_cast<double>(++steps_[i]);
      bc2_sqrt.emplace_back(std::sqrt(1.0 - std::pow(beta2_, t)));
      step_size.emplace_back(-lr_ / (1.0 - std::pow(beta1_, t)));
    }
    if (p.empty()) return;
    ++step_;
    at::_foreach_mul_(m, beta1_);
    at::_foreach_add_(m, g, 1.0 - beta1_);
    at::_foreach_mul_(v, beta2_);
    at::_foreach_addcmul_(v, g, g, 1.0 - beta2_);
    std::vector<at::Tensor> denom = at::_foreach_sqrt(v);
    at::_foreach_div_(denom, bc2_sqrt);
    at::_foreach_add_(denom, eps_);
    at::_foreach_addcdiv_(p, m, denom, step_size);
  }

  // Calls of Step() that moved at least one tensor.
  int64_t steps() const { return step_; }

 private:
  std::vector<at::Tensor> params_, exp_avg_, exp_avg_sq_;
  std::vector<int64_t> steps_;
  double lr_, beta1_, beta2_, eps_;
  int64_t step_ = 0;
};

}  // namespace medprof::ddpm
