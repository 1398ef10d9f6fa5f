// Med-DDPM's diffusion schedule (spec/meddpm.md §2.1): the cosine schedule of Nichol &
// Dhariwal with s = 0.008 over T steps, betas clipped to [0, 0.999], and every buffer the
// reference's GaussianDiffusion registers, computed in double precision (the workload stores
// them as fp32 tensors, as the reference does).
//
// Pure value type; thread-safe once built.
#pragma once

#include <vector>

#include "workloads/ddpm/options.h"  // kNumTimesteps

namespace medprof::ddpm {

inline constexpr double kCosineS = 0.008;
inline constexpr double kMaxBeta = 0.999;

struct Schedule {
  int num_timesteps = 0;
  std::vector<double> betas;
  std::vector<double> alphas_cumprod;       // abar_t
  std::vector<double> alphas_cumprod_prev;  // abar_{t-1}, abar_{-1} = 1
  std::vector<double> sqrt_alphas_cumprod;
  std::vector<double> sqrt_one_minus_alphas_cumprod;
  std::vector<double> log_one_minus_alphas_cumprod;
  std::vector<double> sqrt_recip_alphas_cumprod;       // sqrt(1 / abar)
  std::vector<double> sqrt_recipm1_alphas_cumprod;     // sqrt(1 / abar - 1)
  std::vector<double> posterior_variance;              // beta_t (1 - abar_{t-1}) / (1 - abar_t)
  std::vector<double> posterior_log_variance_clipped;  // log(max(variance, 1e-20))
  std::vector<double> posterior_mean_coef1;            // beta_t sqrt(abar_{t-1}) / (1 - abar_t)
  std::vector<double> posterior_mean_coef2;            // (1 - abar_{t-1}) sqrt(alpha_t) / (1 - abar_t)
};

// The cosine schedule over `num_timesteps` steps (> 0).
Schedule CosineSchedule(int num_timesteps = kNumTimesteps, double s = kCosineS);

}  // namespace medprof::ddpm
