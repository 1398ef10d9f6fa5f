// A user's TorchScript denoiser as a runnable, observable workload: the second implementation of
// workloads/workload.h beside Med-DDPM (steps, sub-phases, the observer contract, ownership,
// threads and error codes are stated there).
//
// The model contract (issue 21): a module saved with torch.jit.save (scripted or traced) whose
//   forward(x: Tensor, t: Tensor) -> Tensor            unconditional, or
//   forward(x: Tensor, t: Tensor, cond: Tensor) -> Tensor
// takes the noisy volume x (N, C, D, H, W) float32, the timesteps t (N,) int64 in [0, 250) and,
// when it has a third argument, the conditioning volume cond (N, K, D, H, W), and returns the
// predicted noise, shaped like x. C is the config's out_channels; K is in_channels - out_channels
// (the synthetic brain and tumour masks, as Med-DDPM's). medprof supplies the DDPM around it
// (workloads/ddpm/loop.h: schedule, q_sample, L1 loss, Adam, EMA, sampling), so forward, train
// and sample phases run the same loop, with the same sub-phases, as Med-DDPM.
//
// Presets as far as TorchScript allows, each read back and stated in EffectiveFlags.note:
//   tf32           cuDNN/cuBLAS flags (process-global): apply to every conv and matmul the module runs
//   channels_last  every 5-D parameter and the inputs x and cond in ChannelsLast3d; whether the
//                  module keeps the layout is read back from the dry run's output
//   bf16           autocast around forward (the interpreter's ops dispatch through it); whether it
//                  reached the module is read back from the dry run's output dtype
//   fused          Med-DDPM's own kernels: never applies to a user model
//
// Bad models are refused before the loop runs, each with INVALID_ARGUMENT naming the cause
// ("model: ..."): a file that is not a TorchScript archive, a forward of another signature, a
// dry-run error inside forward, an output of another shape, NaN/Inf output, an output independent
// of t; out of memory in the dry run is RESOURCE_EXHAUSTED. The dry run is one batch-1 forward at
// the configured volume and flags on the run's device, at two timesteps; a model whose output is
// exactly zero at both (a zero-initialised output layer, as guided-diffusion's untrained U-Net)
// passes with a note instead, since t-dependence cannot be seen.
//
// Not thread-safe; one Workload per process (TF32, autocast are process-global). LibTorch
// exceptions never escape.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "workloads/ddpm/options.h"
#include "workloads/workload.h"

namespace medprof::torchscript {

struct Options {
  std::string path;        // the model file (a torch.jit.save archive); required
  ddpm::LoopOptions loop;  // phase, volume, batch, steps, training knobs; image_channels = out_channels,
                           // cond_channels = in_channels - out_channels (used when forward takes cond)
  // Math and layout flags as the preset asks (a preset is a named set of these).
  bool tf32 = false;
  bool channels_last = false;
  bool bf16 = false;
  bool fused = false;  // not applicable to a user model: stated in the note
  ddpm::Device device = ddpm::Device::kAuto;
  int cpu_threads = 0;  // 0 = LibTorch default
};

// What the dry run found: `medprof-worker --model FILE --describe` prints it.
struct Description {
  std::string signature;  // forward's schema as TorchScript prints it
  bool conditional = false;
  int64_t parameters = 0;
  std::vector<int64_t> x_shape, t_shape, cond_shape, output_shape;  // dry run, batch 1; cond empty if none
  std::string output_dtype;                                         // e.g. "Float", "BFloat16"
  bool output_channels_last = false;
  bool t_dependence_checked = true;  // false when the output was all zeros at both timesteps
  std::string device;                // where the dry run ran
  // Memory estimate for the configured batch and phase: state = parameters x 4 bytes x (1, or 5
  // in train: weights, gradients, Adam m and v, EMA); activations = measured in the dry run at
  // batch 1 (CUDA: caching-allocator peak growth; CPU: peak-RSS growth, a lower bound) x batch.
  uint64_t state_bytes = 0;
  uint64_t activation_bytes = 0;
  uint64_t estimated_peak_bytes = 0;
  std::string memory_method;  // how activation_bytes was measured
  workload::EffectiveFlags flags;  // read back; note says per preset what applied
};

// Loads and checks the model and runs the dry run, without building the loop.
absl::StatusOr<Description> Describe(const Options& options);

class Workload : public workload::Workload {
 public:
  // Describe's checks, then the DDPM loop. Errors: as Describe, INVALID_ARGUMENT for options out
  // of range (ddpm::ValidateLoopOptions), FAILED_PRECONDITION for CUDA requested but absent.
  static absl::StatusOr<std::unique_ptr<Workload>> Create(const Options& options);

  virtual const Description& description() const = 0;
};

}  // namespace medprof::torchscript
