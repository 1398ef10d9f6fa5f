// The DDPM around a denoising network, shared by every workload that profiles one: Med-DDPM's
// U-Net (workloads/meddpm) and a user's TorchScript module (workloads/torchscript) run the same
// schedule, q_sample, L1 noise loss, Adam, EMA, ancestral sampling step, step timing and
// observer brackets from here, so their runs differ only in the network.
//
// A Loop drives a Denoiser through warm-up and measured steps of one phase and reports every
// step, and every named sub-phase inside it ("fwd", "bwd", "optim" in train; "fwd" in forward;
// "sample_step" in sample), to a workload::PhaseObserver, exactly as workloads/workload.h states.
// Inputs (the synthetic subject, eps, t, sampling noise) come from synthetic.h's generator, so
// two loops with one seed see identical inputs whatever the network.
//
// Ownership: the Loop does not own its Denoiser; the workload that owns both keeps the Denoiser
// alive as long as the Loop. Not thread-safe: one thread, which is also the observer's.
// Process-global LibTorch state (TF32, cuDNN benchmark, autocast) is set by ApplyMathFlags: one
// loop per process (the worker's model).
//
// Errors: LibTorch exceptions never escape Run/RunExtraSteps/CurrentSample (Guarded maps them to
// the interface's codes: RESOURCE_EXHAUSTED "out of memory", else INTERNAL).
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "workloads/ddpm/adam.h"
#include "workloads/ddpm/options.h"
#include "workloads/ddpm/schedule.h"
#include "workloads/ddpm/torch_compat.h"
#include "workloads/workload.h"

namespace medprof::ddpm {

// Runs `f` (returning absl::Status), turning every LibTorch / C++ exception into a Status:
// out of memory (LibTorch's OOM error, a message saying so, std::bad_alloc) -> RESOURCE_EXHAUSTED
// "<what>: out of memory: ...", other LibTorch errors -> INTERNAL "<what>: LibTorch error: ...".
template <typename F>
absl::Status Guarded(absl::string_view what, F&& f) {
  try {
    return f();
  } catch (const c10::OutOfMemoryError& e) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": out of memory: ", compat::ErrorMessage(e)));
  } catch (const c10::Error& e) {
    const std::string message = compat::ErrorMessage(e);
    if (compat::IsOutOfMemory(message)) {
      return absl::ResourceExhaustedError(absl::StrCat(what, ": out of memory: ", message));
    }
    return absl::InternalError(absl::StrCat(what, ": LibTorch error: ", message));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": out of memory (host allocation failed)"));
  } catch (const std::exception& e) {
    const std::string message = e.what();
    if (compat::IsOutOfMemory(message)) {
      return absl::ResourceExhaustedError(absl::StrCat(what, ": out of memory: ", message));
    }
    return absl::InternalError(absl::StrCat(what, ": ", message));
  }
}

// The device `requested` resolves to: kAuto -> cuda:0 when LibTorch sees a GPU, else cpu.
// FAILED_PRECONDITION ("device: cuda ...") when CUDA is requested but absent, or visible to a
// LibTorch that medprof was built without CUDA for.
absl::StatusOr<c10::Device> ResolveDevice(Device requested);

// The math flags every denoiser shares, applied to LibTorch's process-global state: TF32 for
// cuDNN and cuBLAS set explicitly on or off, cuDNN benchmark off, the CPU thread count (0 =
// LibTorch's), bf16 autocast unless the GPU lacks bf16 (compute capability < 8.0). Returns the
// flags READ BACK (fused false, note empty) and appends a line to *notes for every request that
// does not apply as asked on `device`.
struct MathRequest {
  bool tf32 = false;
  bool bf16 = false;
  int cpu_threads = 0;
};
workload::EffectiveFlags ApplyMathFlags(const MathRequest& request, const c10::Device& device,
                                        std::vector<std::string>* notes);

// Host float values -> a float32 tensor of `shape` on `device` (a copy).
at::Tensor Upload(const std::vector<float>& values, const std::vector<int64_t>& shape, const c10::Device& device);
// A tensor's values as host floats, in NCDHW (contiguous) order.
std::vector<float> ToHost(const at::Tensor& t);

// Peak device memory (CUDA caching allocator, aggregate) or peak RSS (CPU), bytes.
uint64_t PeakMemoryBytes(const c10::Device& device);

// The synthetic subjects of `options.seed`, one per batch element, as float32 NCDHW tensors on
// `device`: x0 (batch, image_channels, D, H, W) and cond (batch, cond_channels, D, H, W; undefined
// when cond_channels is 0).
struct Inputs {
  at::Tensor x0;
  at::Tensor cond;
};
Inputs MakeInputs(const LoopOptions& options, const c10::Device& device);

// The network the loop drives. Calls come from the loop's thread.
class Denoiser {
 public:
  virtual ~Denoiser() = default;
  // Makes x_t (batch, image_channels, D, H, W; no grad) the input of the next Forward calls.
  virtual void SetNoisyInput(const at::Tensor& x_t) = 0;
  // The predicted noise for the current input at timesteps t (int64, (batch,)), shaped like x_t.
  // Runs under the loop's autocast and grad mode.
  virtual at::Tensor Forward(const at::Tensor& t) = 0;
  // The trainable parameters (train phase: what Adam steps and EMA copies).
  virtual std::vector<at::Tensor> Parameters() = 0;
  // train() / eval() mode.
  virtual void SetTraining(bool on) = 0;
};

class Loop {
 public:
  // Prepares the phase: uploads the schedule, sets the denoiser's mode; forward writes its fixed
  // input once; train builds the optimizer and EMA copy. `x0` is MakeInputs' x0; `denoiser` (not
  // owned) is already on `device`. Errors: ValidateLoopOptions', and LibTorch's through Guarded.
  static absl::StatusOr<std::unique_ptr<Loop>> Create(const LoopOptions& options, const c10::Device& device,
                                                      at::Tensor x0, Denoiser* denoiser);

  // workload::Workload::Run / RunExtraSteps.
  absl::Status Run(workload::PhaseObserver* observer);
  absl::Status RunExtraSteps(int count, workload::PhaseObserver* observer);

  // Sample phase: the chain's current state x after the last step, float NCDHW values
  // (batch x image_channels x D x H x W). FAILED_PRECONDITION in other phases or before a step.
  absl::StatusOr<std::vector<float>> CurrentSample();

  // The forward phase's fixed input whatever the phase: x_t (no grad) and its timesteps, from
  // noise stream index 0 (the same-function check against the peer uses it).
  struct NoisyInput {
    at::Tensor x_t;
    at::Tensor t;
    std::vector<int64_t> t_host;
  };
  NoisyInput FixedForwardInput() const;

  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

 private:
  class StepTimer;
  Loop(const LoopOptions& options, const c10::Device& device, at::Tensor x0, Denoiser* denoiser);
  absl::Status Init();
  bool cuda() const { return device_.is_cuda(); }
  void Synchronize() const;
  std::vector<int64_t> ImageShape() const;
  int64_t ImageNumel() const;
  at::Tensor TimestepTensor(const std::vector<int64_t>& t) const;
  // x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps (no grad).
  at::Tensor QSample(const at::Tensor& eps, const at::Tensor& t) const;
  void PrepareStep();
  void RunOneStep(workload::PhaseObserver* obs, int index, bool measured);
  double ForwardStep(workload::PhaseObserver* obs, StepTimer* timer, workload::StepReport* report);
  double TrainStep(workload::PhaseObserver* obs, StepTimer* timer, workload::StepReport* report);
  double SampleStep(workload::PhaseObserver* obs, StepTimer* timer, workload::StepReport* report);
  void UpdateEma();

  const LoopOptions o_;
  const c10::Device device_;
  Denoiser* const denoiser_;
  Schedule schedule_;
  at::Tensor sqrt_abar_, sqrt_one_minus_abar_;  // fp32 device buffers, as the reference's
  at::Tensor x0_;                               // (B, image, D, H, W) clean synthetic image
  at::Tensor eps_, t_;                          // the current step's noise and timesteps
  int extra_steps_ = 0;                         // RunExtraSteps' step index

  // train
  std::vector<at::Tensor> params_, ema_;
  std::unique_ptr<ForeachAdam> optimizer_;
  int64_t micro_steps_ = 0, optimizer_steps_ = 0;

  // sample
  int64_t sample_step_ = 0;  // steps taken over all chains
  at::Tensor sample_x_, sample_z_;
  bool sample_ready_ = false;
};

}  // namespace medprof::ddpm
