// Med-DDPM as a runnable, observable workload (spec/meddpm.md is the reference).
//
// A Workload owns one model (the 3D U-Net), its diffusion schedule, optimizer, EMA copy and
// deterministic synthetic inputs, configured by WorkloadOptions. Run() executes warm-up and
// measured steps of one phase (forward | train | sample) and reports every step, and every
// named sub-phase inside it ("fwd", "bwd", "optim", "sample_step"), to a PhaseObserver — the
// hook the profiler implements. The workload never includes profiler headers.
//
// Ownership: the caller owns the observer and must keep it alive during Run(). A Workload is
// not thread-safe; use it from one thread. LibTorch exceptions (c10::Error) never escape:
// every method returns a Status (out of memory -> RESOURCE_EXHAUSTED, bad configuration ->
// INVALID_ARGUMENT, other LibTorch/CUDA errors -> INTERNAL with LibTorch's message).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace medprof::meddpm {

enum class Phase { kForward, kTrain, kSample };
enum class Device { kAuto, kCpu, kCuda };

// The U-Net's shape. Defaults are the published 128^3 model (40,226,433 parameters).
struct ModelOptions {
  int in_channels = 3;                       // noisy image + brain mask + tumour mask
  int out_channels = 1;                      // predicted noise
  int base_channels = 64;                    // model_channels
  std::vector<int> channel_mult = {1, 1, 2, 3, 4};
  int res_blocks = 1;                        // per encoder level; decoder has res_blocks + 1
  std::vector<int> attention_ds = {8};       // downsampling factors with attention (16^3 at 128^3)
  int groups = 32;                           // GroupNorm groups (eps 1e-5, computed in FP32)
};

struct WorkloadOptions {
  ModelOptions model;
  Phase phase = Phase::kTrain;
  int depth = 128, height = 128, width = 128;  // volume (D, H, W)
  int batch = 1;
  int steps = 10;       // measured steps
  int warmup = 2;       // unmeasured steps before them
  int grad_accum = 2;   // micro-steps per optimizer step (benchmarks use 1)
  double learning_rate = 1e-5;
  uint64_t seed = 0;    // synthetic inputs, weights, noise
  int sample_steps = 250;
  // Math and layout flags (a preset is a named set of these).
  bool tf32 = false;
  bool channels_last = false;
  bool bf16 = false;
  bool fused = false;
  Device device = Device::kAuto;
  int cpu_threads = 0;  // 0 = LibTorch default
};

// What LibTorch reports after the flags were applied (read back, not echoed).
struct EffectiveFlags {
  bool tf32_cudnn = false;
  bool tf32_matmul = false;
  bool channels_last = false;
  bool bf16 = false;
  bool fused = false;
  bool cudnn_benchmark = false;
  std::string device;         // "cpu" or "cuda:0"
  std::string torch_version;  // e.g. "1.13.0"
  std::string cudnn_version;  // "" on CPU builds
  std::string note;           // e.g. "opt3: bf16 unavailable on this GPU, using TF32"
};

struct StepReport {
  int index = 0;         // 0-based among warm-up steps (measured=false) or measured steps
  bool measured = false;
  int64_t wall_ns = 0;   // host wall time, after a device synchronize on GPU
  int64_t device_ns = 0; // CUDA-event time (0 on CPU)
  double loss = 0.0;     // L1 loss for train; 0 otherwise
  std::map<std::string, int64_t> phase_ns;  // fwd, bwd, optim, sample_step
};

// The profiler's view of the workload. Calls come from the thread that called Run().
class PhaseObserver {
 public:
  virtual ~PhaseObserver() = default;
  // Bracket every step (warm-up and measured).
  virtual void OnStepBegin(int index, bool measured) {}
  virtual void OnStepEnd(const StepReport& report) {}
  // Bracket named sub-phases inside a step: "fwd", "bwd", "optim", "sample_step".
  virtual void OnPhaseBegin(std::string_view name) {}
  virtual void OnPhaseEnd(std::string_view name) {}
};

class Workload {
 public:
  static absl::StatusOr<std::unique_ptr<Workload>> Create(const WorkloadOptions& options);
  virtual ~Workload() = default;

  virtual int64_t ParameterCount() const = 0;
  virtual const EffectiveFlags& flags() const = 0;
  // Runs options.warmup + options.steps steps of options.phase.
  virtual absl::Status Run(PhaseObserver* observer) = 0;
  // Peak device memory (GPU) or peak RSS (CPU) seen so far, bytes.
  virtual uint64_t PeakMemoryBytes() const = 0;
};

// Parameter count of a model shape, computed without allocating the model.
int64_t CountParameters(const ModelOptions& model);
// Estimated peak memory (bytes) for a configuration, per spec/meddpm.md §3.3.
uint64_t EstimatePeakMemoryBytes(const WorkloadOptions& options);

}  // namespace medprof::meddpm
