// Med-DDPM as a runnable, observable workload (spec/meddpm.md is the reference).
//
// The DDPM around the U-Net (schedule, q_sample, loss, Adam, EMA, sampling, step timing and the
// observer brackets) is workloads/ddpm/loop.h, shared with the TorchScript user-model workload;
// this file adds the U-Net, its input buffer, the fused kernels and the peer export.
//
// One implementation of the Workload interface (workloads/workload.h: steps, sub-phases, the
// PhaseObserver contract, ownership, threads and error codes are stated there). A Workload owns
// one model (the 3D U-Net), its diffusion schedule, optimizer, EMA copy and deterministic
// synthetic inputs, configured by WorkloadOptions. Run() executes warm-up and measured steps of
// one phase (forward | train | sample) and reports every step, and every named sub-phase inside
// it ("fwd", "bwd", "optim", "sample_step"), to a PhaseObserver — the hook the profiler
// implements. The workload never includes profiler headers.
//
// Inputs (the synthetic subject, eps, t, sampling noise) and initial weights come from the
// workload's own generator (synthetic.h), so two runs with one seed see identical inputs on
// every LibTorch version and machine; with one device, one thread count and one LibTorch
// build, CPU runs are bit-identical.
//
// Flags (TF32, cuDNN benchmark, autocast) are LibTorch process-global state: one Workload per
// process (the worker's model).
//
// Errors: LibTorch exceptions (c10::Error) never escape; every method returns a Status with the
// interface's codes (other LibTorch/CUDA errors -> INTERNAL with LibTorch's message).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "workloads/ddpm/options.h"
#include "workloads/workload.h"

namespace medprof::meddpm {

// The DDPM loop's (workloads/ddpm/options.h), under the names Med-DDPM code uses.
using Phase = ddpm::Phase;
using Device = ddpm::Device;

// The U-Net's shape. Defaults are the published 128^3 model (40,226,433 parameters).
struct ModelOptions {
  int in_channels = 3;     // noisy image + brain mask + tumour mask
  int out_channels = 1;    // predicted noise
  int base_channels = 64;  // model_channels
  std::vector<int> channel_mult = {1, 1, 2, 3, 4};
  int res_blocks = 1;                   // per encoder level; decoder has res_blocks + 1
  std::vector<int> attention_ds = {8};  // downsampling factors with attention (16^3 at 128^3)
  int groups = 32;                      // GroupNorm groups (eps 1e-5, computed in FP32)
};

struct WorkloadOptions {
  ModelOptions model;
  Phase phase = Phase::kTrain;
  int depth = 128, height = 128, width = 128;  // volume (D, H, W)
  int batch = 1;
  int steps = 10;               // measured steps (1..100000)
  int warmup = 2;               // unmeasured steps before them (0..1000)
  int grad_accum = 2;           // micro-steps per optimizer step (benchmarks use 1)
  double learning_rate = 1e-5;  // Adam, betas (0.9, 0.999), eps 1e-8
  uint64_t seed = 0;            // synthetic inputs, weights, noise
  // Length N of the sampling chain (1..250). N < 250 runs the LAST N steps of the 250-step
  // chain (t = N-1 .. 0, starting from pure noise at t = N-1), so each step costs the same as
  // in the full chain; after t = 0 the next step starts a new chain with fresh noise.
  int sample_steps = 250;
  // Train only: draw t and eps once and reuse them every step (an overfitting check), instead
  // of fresh ones per micro-step.
  bool fixed_noise = false;
  // Math and layout flags (a preset is a named set of these).
  bool tf32 = false;
  bool channels_last = false;
  bool bf16 = false;
  bool fused = false;
  Device device = Device::kAuto;
  int cpu_threads = 0;  // 0 = LibTorch default
};

// The interface types (workloads/workload.h), under the names Med-DDPM code uses.
using EffectiveFlags = workload::EffectiveFlags;
using StepReport = workload::StepReport;
using PhaseObserver = workload::PhaseObserver;

// Med-DDPM as a workload::Workload: Run() runs options.warmup + options.steps steps of
// options.phase; the sub-phases are "fwd", "bwd", "optim" (train) and "sample_step" (sample).
// The two methods below are Med-DDPM's own (the peer check and meddpm-export use them).
class Workload : public workload::Workload {
 public:
  static absl::StatusOr<std::unique_ptr<Workload>> Create(const WorkloadOptions& options);

  // Sample phase: the chain's current state x (after the last Run step), as float values in
  // NCDHW order, batch x out_channels x D x H x W. After the step with t = 0 it is the
  // generated volume, in [-1, 1]. FAILED_PRECONDITION in other phases or before Run.
  virtual absl::StatusOr<std::vector<float>> CurrentSample() = 0;

  // Same-function check against the PyTorch peer (bench/gpu/peer_equivalence.py): re-draws
  // every weight densely (no zero-init, so the output depends on all of them; the model's own
  // weights are restored afterwards), runs one strict-FP32 forward on the forward phase's fixed
  // input, and writes into `dir` (created if missing):
  //   manifest.json  model options, volume, batch, t, parameter names/shapes/offsets
  //   weights.bin    every parameter, float32 NCDHW, in registration order (= the peer's
  //                  state_dict order and names)
  //   input.bin      the network input (x_t + masks), float32 NCDHW
  //   output.bin     the predicted noise, float32 NCDHW
  // FAILED_PRECONDITION unless tf32 and bf16 are off (the check is in strict FP32).
  virtual absl::Status ExportForPeer(const std::string& dir) = 0;
};

// INVALID_ARGUMENT naming the field and its allowed range when `options` cannot run (the same
// rules as config::Validate); Create calls it.
absl::Status ValidateOptions(const WorkloadOptions& options);

// Parameter count of a model shape, computed without allocating the model.
int64_t CountParameters(const ModelOptions& model);
// Estimated peak memory (bytes) for a configuration, per spec/meddpm.md §3.3: training =
// weights + Adam m/v + EMA (+ gradients when grad_accum > 1) + the activations autograd saves
// (per ResBlock (2 Cin + 3 Cout) V + ...; the formula is documented in architecture.cc);
// forward/sample = weights + the largest set of live activations. 18.4 GiB (train) and 4.7 GiB
// (forward) at the defaults; 0 for an invalid model.
uint64_t EstimatePeakMemoryBytes(const WorkloadOptions& options);

}  // namespace medprof::meddpm
