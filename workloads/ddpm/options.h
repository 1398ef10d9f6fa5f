// The DDPM loop's configuration as plain data (no LibTorch), so that headers naming a workload's
// options (the worker's config mapping, the workload factory) stay free of LibTorch includes.
// workloads/ddpm/loop.h runs it. Pure; thread-safe.
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace medprof::ddpm {

inline constexpr int kNumTimesteps = 250;  // T (Med-DDPM's train.sh / sample.py --timesteps 250)

enum class Phase { kForward, kTrain, kSample };
enum class Device { kAuto, kCpu, kCuda };

// "forward" | "train" | "sample".
const char* PhaseLabel(Phase phase);

// The DDPM's configuration, whatever the network.
struct LoopOptions {
  Phase phase = Phase::kTrain;
  int depth = 0, height = 0, width = 0;  // volume (D, H, W), 8..512 each
  int batch = 1;                         // 1..64
  int image_channels = 1;                // channels of x0, eps and the prediction
  int cond_channels = 0;                 // conditioning channels (the synthetic masks); 0 = none
  int steps = 10;                        // measured steps (1..100000)
  int warmup = 2;                        // unmeasured steps before them (0..1000)
  int grad_accum = 2;                    // micro-steps per optimizer step
  double learning_rate = 1e-5;           // Adam, betas (0.9, 0.999), eps 1e-8
  uint64_t seed = 0;                     // inputs and noise
  // Length N of the sampling chain (1..250): the LAST N steps of the 250-step chain
  // (t = N-1 .. 0, from pure noise at t = N-1); after t = 0 a new chain starts.
  int sample_steps = kNumTimesteps;
  bool fixed_noise = false;  // train: draw t and eps once and reuse them every step
  bool bf16 = false;         // autocast (bfloat16) around the network: the EFFECTIVE choice
};

// INVALID_ARGUMENT naming the field and its allowed range for options the loop cannot run.
// Model-specific rules (e.g. Med-DDPM's volume multiple) are the workload's own.
absl::Status ValidateLoopOptions(const LoopOptions& options);

}  // namespace medprof::ddpm
