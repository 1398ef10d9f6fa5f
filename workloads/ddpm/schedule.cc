#include "workloads/ddpm/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace medprof::ddpm {

Schedule CosineSchedule(int num_timesteps, double s) {
  const int n = num_timesteps;
  Schedule sc;
  sc.num_timesteps = n;
  // abar(i) = cos(((i / T) + s) / (1 + s) * pi / 2)^2, normalised by abar(0), i = 0..T;
  // beta_i = 1 - abar(i + 1) / abar(i), clipped (reference: cosine_beta_schedule).
  std::vector<double> f(n + 1);
  for (int i = 0; i <= n; ++i) {
    const double c = std::cos(((static_cast<double>(i) / n) + s) / (1.0 + s) * std::numbers::pi / 2);
    f[i] = c * c;
  }
  sc.betas.resize(n);
  for (int i = 0; i < n; ++i) {
    const double beta = 1.0 - (f[i + 1] / f[0]) / (f[i] / f[0]);
    sc.betas[i] = std::clamp(beta, 0.0, kMaxBeta);
  }
  auto fill = [n](std::vector<double>* v) { v->assign(n, 0.0); };
  fill(&sc.alphas_cumprod);
  fill(&sc.alphas_cumprod_prev);
  fill(&sc.sqrt_alphas_cumprod);
  fill(&sc.sqrt_one_minus_alphas_cumprod);
  fill(&sc.log_one_minus_alphas_cumprod);
  fill(&sc.sqrt_recip_alphas_cumprod);
  fill(&sc.sqrt_recipm1_alphas_cumprod);
  fill(&sc.posterior_variance);
  fill(&sc.posterior_log_variance_clipped);
  fill(&sc.posterior_mean_coef1);
  fill(&sc.posterior_mean_coef2);
  double cumprod = 1.0;
  for (int i = 0; i < n; ++i) {
    const double alpha = 1.0 - sc.betas[i];
    const double prev = cumprod;
    cumprod *= alpha;
    sc.alphas_cumprod[i] = cumprod;
    sc.alphas_cumprod_prev[i] = prev;
    sc.sqrt_alphas_cumprod[i] = std::sqrt(cumprod);
    sc.sqrt_one_minus_alphas_cumprod[i] = std::sqrt(1.0 - cumprod);
    sc.log_one_minus_alphas_cumprod[i] = std::log(1.0 - cumprod);
    sc.sqrt_recip_alphas_cumprod[i] = std::sqrt(1.0 / cumprod);
    sc.sqrt_recipm1_alphas_cumprod[i] = std::sqrt(1.0 / cumprod - 1.0);
    const double variance = sc.betas[i] * (1.0 - prev) / (1.0 - cumprod);
    sc.posterior_variance[i] = variance;
    sc.posterior_log_variance_clipped[i] = std::log(std::max(variance, 1e-20));
    sc.posterior_mean_coef1[i] = sc.betas[i] * std::sqrt(prev) / (1.0 - cumprod);
    sc.posterior_mean_coef2[i] = (1.0 - prev) * std::sqrt(alpha) / (1.0 - cumprod);
  }
  return sc;
}

}  // namespace medprof::ddpm
