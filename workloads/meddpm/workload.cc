#include "workloads/meddpm/workload.h"

#include <sys/resource.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/status.h"
#include "workloads/meddpm/adam.h"
#include "workloads/meddpm/architecture.h"
#include "workloads/meddpm/fused_info.h"
#include "workloads/meddpm/schedule.h"
#include "workloads/meddpm/synthetic.h"
#include "workloads/meddpm/torch_compat.h"
#include "workloads/meddpm/unet.h"

#ifdef MEDPROF_TORCH_HAS_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace medprof::meddpm {
namespace {

constexpr double kAdamBeta1 = 0.9, kAdamBeta2 = 0.999, kAdamEps = 1e-8;
constexpr double kEmaDecay = 0.995;
constexpr int kEmaEvery = 10;        // optimizer steps between EMA updates
constexpr int kEmaStartStep = 2000;  // before it the EMA copy is overwritten

// Runs `f` (returning absl::Status), turning every LibTorch / C++ exception into a Status.
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

// Host float vector -> tensor of `shape` on `device`.
torch::Tensor Upload(const std::vector<float>& values, const std::vector<int64_t>& shape,
                     const torch::Device& device) {
  return torch::from_blob(const_cast<float*>(values.data()), shape, torch::kFloat)
      .to(torch::TensorOptions().device(device).dtype(torch::kFloat), /*non_blocking=*/false,
          /*copy=*/true);
}

torch::Tensor ToDeviceFp32(const std::vector<double>& values, const torch::Device& device) {
  std::vector<float> f(values.begin(), values.end());
  return Upload(f, {static_cast<int64_t>(f.size())}, device);
}

std::vector<float> ToHost(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kCPU, torch::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

absl::Status WriteFile(const std::filesystem::path& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat("export_peer: cannot write ", path.string(), ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string JsonInts(const std::vector<int64_t>& v) { return "[" + absl::StrJoin(v, ", ") + "]"; }

// One timing mark: host clock, plus a CUDA event on GPU.
class StepTimer {
 public:
  explicit StepTimer(bool cuda) : cuda_(cuda) {}

  // Returns the mark's index.
  int Mark() {
    host_ns_.push_back(MonotonicNs());
#ifdef MEDPROF_TORCH_HAS_CUDA
    if (cuda_) {
      events_.emplace_back(cudaEventDefault);
      events_.back().record();
    }
#endif
    return static_cast<int>(host_ns_.size()) - 1;
  }
  int64_t HostNs(int a, int b) const { return host_ns_[b] - host_ns_[a]; }
  // Device time between two marks (after a synchronize); host time on CPU.
  int64_t DeviceNs(int a, int b) const {
#ifdef MEDPROF_TORCH_HAS_CUDA
    if (cuda_) {
      return static_cast<int64_t>(
          std::llround(static_cast<double>(events_[a].elapsed_time(events_[b])) * 1e6));
    }
#endif
    return HostNs(a, b);
  }

 private:
  bool cuda_;
  std::vector<int64_t> host_ns_;
#ifdef MEDPROF_TORCH_HAS_CUDA
  std::vector<at::cuda::CUDAEvent> events_;
#endif
};

class NullObserver : public PhaseObserver {};

class MeddpmWorkload final : public Workload {
 public:
  explicit MeddpmWorkload(const WorkloadOptions& o) : o_(o), device_(torch::kCPU) {}

  absl::Status Init();

  int64_t ParameterCount() const override { return parameter_count_; }
  const EffectiveFlags& flags() const override { return flags_; }
  absl::Status Run(PhaseObserver* observer) override {
    return Guarded(absl::StrCat(PhaseLabel(), " step"), [&] { return RunSteps(observer); });
  }
  absl::Status RunExtraSteps(int count, PhaseObserver* observer) override {
    if (count < 1 || count > 100000) {
      return absl::InvalidArgumentError(absl::StrCat("extra steps: count ", count, " is out of range (allowed 1..100000)"));
    }
    return Guarded(absl::StrCat(PhaseLabel(), " step"), [&] {
      NullObserver null_observer;
      PhaseObserver* obs = observer != nullptr ? observer : &null_observer;
      for (int i = 0; i < count; ++i) RunOneStep(obs, extra_steps_++, /*measured=*/false);
      return absl::OkStatus();
    });
  }
  uint64_t PeakMemoryBytes() const override;
  absl::StatusOr<std::vector<float>> CurrentSample() override;
  absl::Status ExportForPeer(const std::string& dir) override {
    return Guarded("export_peer", [&] { return Export(dir); });
  }

 private:
  const char* PhaseLabel() const {
    switch (o_.phase) {
      case Phase::kForward:
        return "forward";
      case Phase::kTrain:
        return "train";
      case Phase::kSample:
        return "sample";
    }
    return "?";
  }
  bool cuda() const { return device_.is_cuda(); }
  void Synchronize() const {
    if (cuda()) torch::cuda::synchronize();
  }
  std::vector<int64_t> VolumeShape(int channels) const {
    return {o_.batch, channels, o_.depth, o_.height, o_.width};
  }
  int64_t ImageNumel() const {
    return static_cast<int64_t>(o_.batch) * o_.model.out_channels * o_.depth * o_.height * o_.width;
  }
  absl::Status ResolveDevice();
  void ApplyFlags();
  void BuildInputs();
  // x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps, written into the image channels of the
  // network input (no aten::cat on the way in).
  void WriteNoisyInput(const torch::Tensor& eps, const torch::Tensor& t);
  torch::Tensor TimestepTensor(const std::vector<int64_t>& t) const {
    return torch::tensor(t, torch::kLong).to(device_);
  }
  absl::Status RunSteps(PhaseObserver* observer);
  void RunOneStep(PhaseObserver* obs, int index, bool measured);
  void PrepareStep();
  double ForwardStep(PhaseObserver* obs, StepTimer* timer, StepReport* report);
  double TrainStep(PhaseObserver* obs, StepTimer* timer, StepReport* report);
  double SampleStep(PhaseObserver* obs, StepTimer* timer, StepReport* report);
  void UpdateEma();
  absl::Status Export(const std::string& dir);

  const WorkloadOptions o_;
  EffectiveFlags flags_;
  torch::Device device_;
  int64_t parameter_count_ = 0;
  int extra_steps_ = 0;  // RunExtraSteps' step index
  UNet net_{nullptr};
  Schedule schedule_;
  // fp32 device buffers of the schedule (the reference registers them as fp32 buffers)
  torch::Tensor sqrt_abar_, sqrt_one_minus_abar_;

  torch::Tensor x0_;          // (B, out, D, H, W) clean synthetic image
  torch::Tensor net_input_;   // (B, in, D, H, W): [x_t | masks]
  torch::Tensor image_slot_;  // net_input_.narrow(1, 0, out)
  torch::Tensor eps_, t_;     // the current step's noise and timesteps

  // train
  std::vector<torch::Tensor> params_, ema_;
  std::unique_ptr<ForeachAdam> optimizer_;
  int64_t micro_steps_ = 0, optimizer_steps_ = 0;

  // sample
  int64_t sample_step_ = 0;  // steps taken over all chains
  torch::Tensor sample_x_, sample_z_;
  bool sample_ready_ = false;

  int64_t steps_run_ = 0;  // warm-up + measured steps over all Run calls
};

absl::Status MeddpmWorkload::ResolveDevice() {
  const bool has_cuda = torch::cuda::is_available();
  switch (o_.device) {
    case Device::kAuto:
      device_ = has_cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
      break;
    case Device::kCpu:
      device_ = torch::Device(torch::kCPU);
      break;
    case Device::kCuda:
      if (!has_cuda) {
        return absl::FailedPreconditionError(
            absl::StrCat("device: cuda was requested but LibTorch ", compat::TorchVersion(),
                         " sees no CUDA device (torch::cuda::is_available() is false: no GPU or driver, or a "
                         "CPU-only LibTorch)"));
      }
      device_ = torch::Device(torch::kCUDA, 0);
      break;
  }
#ifndef MEDPROF_TORCH_HAS_CUDA
  if (device_.is_cuda()) {
    return absl::FailedPreconditionError(
        "device: cuda is visible but medprof was built against a LibTorch without CUDA "
        "(MEDPROF_TORCH_HAS_CUDA off): rebuild with a CUDA LibTorch");
  }
#endif
  return absl::OkStatus();
}

void MeddpmWorkload::ApplyFlags() {
  std::vector<std::string> notes;
  bool bf16 = o_.bf16;
#ifdef MEDPROF_TORCH_HAS_CUDA
  if (bf16 && cuda() && at::cuda::getCurrentDeviceProperties()->major < 8) {
    bf16 = false;
    notes.push_back("bf16 unavailable on this GPU (compute capability < 8.0), running FP32");
  }
#endif
  compat::SetTf32(o_.tf32);
  compat::SetCudnnBenchmark(false);
  if (o_.cpu_threads > 0) at::set_num_threads(o_.cpu_threads);
  bool fused = false;
  if (o_.fused) {
    if (!fused::Compiled()) {
      notes.push_back("fused GroupNorm unavailable: " + fused::NotCompiledReason());
    } else if (!cuda()) {
      notes.push_back("fused GroupNorm kernels run on CUDA devices only; LibTorch's ops run on the CPU");
    } else {
      fused = true;
    }
  }
  if (!cuda() && o_.tf32) notes.push_back("tf32 has no effect on CPU");

  flags_.tf32_cudnn = compat::Tf32CuDNN();
  flags_.tf32_matmul = compat::Tf32CuBLAS();
  flags_.cudnn_benchmark = compat::CudnnBenchmark();
  flags_.bf16 = bf16;
  flags_.fused = fused;
  flags_.device = device_.str();
  flags_.torch_version = compat::TorchVersion();
  flags_.cudnn_version = cuda() ? compat::CudnnVersion() : "";
  flags_.note = absl::StrJoin(notes, "; ");
}

void MeddpmWorkload::BuildInputs() {
  const int out = o_.model.out_channels, masks = o_.model.in_channels - out;
  const int64_t voxels = static_cast<int64_t>(o_.depth) * o_.height * o_.width;
  std::vector<float> image(static_cast<size_t>(o_.batch) * out * voxels);
  std::vector<float> input(static_cast<size_t>(o_.batch) * o_.model.in_channels * voxels, 0.0f);
  for (int b = 0; b < o_.batch; ++b) {
    const Subject s = MakeSubject(o_.seed, b, o_.depth, o_.height, o_.width, out, masks);
    std::copy(s.image.begin(), s.image.end(), image.begin() + b * out * voxels);
    std::copy(s.mask.begin(), s.mask.end(),
              input.begin() + (static_cast<int64_t>(b) * o_.model.in_channels + out) * voxels);
  }
  x0_ = Upload(image, VolumeShape(out), device_);
  net_input_ = Upload(input, VolumeShape(o_.model.in_channels), device_);
  if (o_.channels_last) net_input_ = net_input_.contiguous(at::MemoryFormat::ChannelsLast3d);
  image_slot_ = net_input_.narrow(1, 0, out);
}

void MeddpmWorkload::WriteNoisyInput(const torch::Tensor& eps, const torch::Tensor& t) {
  torch::NoGradGuard no_grad;
  const int64_t b = t.size(0);
  const torch::Tensor a = sqrt_abar_.index_select(0, t).view({b, 1, 1, 1, 1});
  const torch::Tensor s = sqrt_one_minus_abar_.index_select(0, t).view({b, 1, 1, 1, 1});
  image_slot_.copy_(a * x0_ + s * eps);
}

absl::Status MeddpmWorkload::Init() {
  MEDPROF_RETURN_IF_ERROR(ResolveDevice());
  ApplyFlags();
  parameter_count_ = CountParameters(o_.model);
  schedule_ = CosineSchedule(kNumTimesteps);
  sqrt_abar_ = ToDeviceFp32(schedule_.sqrt_alphas_cumprod, device_);
  sqrt_one_minus_abar_ = ToDeviceFp32(schedule_.sqrt_one_minus_alphas_cumprod, device_);

  net_ = UNet(o_.model);
  net_->InitWeights(o_.seed, InitMode::kReference);
  net_->to(device_);
  if (o_.channels_last) net_->SetChannelsLast(true);
  net_->SetFused(flags_.fused);
  if (flags_.fused && flags_.bf16 && o_.phase != Phase::kTrain) {
    // Forwards only: weights cast once instead of by autocast at every call (UNet::HoldWeightsIn).
    const int cast = net_->HoldWeightsIn(at::kBFloat16);
    const std::string line = absl::StrCat(cast, " conv/linear weights and biases held in BFloat16 (forward only)");
    flags_.note = flags_.note.empty() ? line : absl::StrCat(flags_.note, "; ", line);
  }
  flags_.channels_last = false;
  for (const torch::Tensor& p : net_->parameters()) {
    if (p.dim() == 5) {  // read back from the first conv weight
      flags_.channels_last =
          p.is_contiguous(at::MemoryFormat::ChannelsLast3d) && !p.is_contiguous(at::MemoryFormat::Contiguous);
      break;
    }
  }
  int64_t counted = 0;
  for (const torch::Tensor& p : net_->parameters()) counted += p.numel();
  if (counted != parameter_count_) {
    return absl::InternalError(
        absl::StrCat("model has ", counted, " parameters but the plan counts ", parameter_count_));
  }

  BuildInputs();
  switch (o_.phase) {
    case Phase::kForward: {
      net_->eval();
      eps_ = Upload(NormalVolume(o_.seed, Stream::kNoise, 0, ImageNumel()),
                    VolumeShape(o_.model.out_channels), device_);
      t_ = TimestepTensor(Timesteps(o_.seed, 0, o_.batch, kNumTimesteps));
      WriteNoisyInput(eps_, t_);
      break;
    }
    case Phase::kTrain: {
      net_->train();
      params_ = net_->parameters();
      torch::NoGradGuard no_grad;
      for (const torch::Tensor& p : params_) ema_.push_back(p.detach().clone());
      optimizer_ = std::make_unique<ForeachAdam>(params_, o_.learning_rate, kAdamBeta1, kAdamBeta2, kAdamEps);
      break;
    }
    case Phase::kSample:
      net_->eval();
      break;
  }
  Synchronize();
  return absl::OkStatus();
}

// Host-side preparation of the next step's random inputs, outside the step's time bracket.
void MeddpmWorkload::PrepareStep() {
  switch (o_.phase) {
    case Phase::kForward:
      break;
    case Phase::kTrain: {
      const uint64_t index = o_.fixed_noise ? 0 : static_cast<uint64_t>(micro_steps_);
      if (!o_.fixed_noise || !eps_.defined()) {
        eps_ = Upload(NormalVolume(o_.seed, Stream::kNoise, index, ImageNumel()),
                      VolumeShape(o_.model.out_channels), device_);
        t_ = TimestepTensor(Timesteps(o_.seed, index, o_.batch, kNumTimesteps));
      }
      break;
    }
    case Phase::kSample: {
      const int64_t n = o_.sample_steps;
      const int64_t chain = sample_step_ / n, k = sample_step_ % n;
      const int64_t i = n - 1 - k;  // the timestep this step denoises
      // Stream index: 256 per chain (n <= 250): 0 for x_T, k + 1 for the z of step k.
      const uint64_t base = static_cast<uint64_t>(chain) * 256;
      if (k == 0) {
        sample_x_ = Upload(NormalVolume(o_.seed, Stream::kSampleNoise, base, ImageNumel()),
                           VolumeShape(o_.model.out_channels), device_);
      }
      sample_z_ = i > 0 ? Upload(NormalVolume(o_.seed, Stream::kSampleNoise,
                                              base + static_cast<uint64_t>(k) + 1, ImageNumel()),
                                 VolumeShape(o_.model.out_channels), device_)
                        : torch::Tensor();
      t_ = TimestepTensor(std::vector<int64_t>(o_.batch, i));
      break;
    }
  }
}

double MeddpmWorkload::ForwardStep(PhaseObserver* obs, StepTimer* timer, StepReport* report) {
  obs->OnPhaseBegin("fwd");
  const int begin = timer->Mark();
  {
    torch::NoGradGuard no_grad;
    compat::AutocastGuard autocast(device_.type(), flags_.bf16, at::kBFloat16);
    net_->forward(net_input_, t_);
  }
  const int end = timer->Mark();
  obs->OnPhaseEnd("fwd");
  Synchronize();
  report->phase_ns["fwd"] = timer->DeviceNs(begin, end);
  return 0.0;
}

double MeddpmWorkload::TrainStep(PhaseObserver* obs, StepTimer* timer, StepReport* report) {
  obs->OnPhaseBegin("fwd");
  const int fwd_begin = timer->Mark();
  torch::Tensor l1, loss;
  {
    compat::AutocastGuard autocast(device_.type(), flags_.bf16, at::kBFloat16);
    WriteNoisyInput(eps_, t_);
    const torch::Tensor pred = net_->forward(net_input_, t_);
    l1 = (pred - eps_).abs().mean();  // L1 on the noise (loss_type 'l1')
    // The reference divides by the batch size (loss.sum() / batch) and by the accumulation.
    loss = l1 / (static_cast<double>(o_.batch) * o_.grad_accum);
  }
  const int fwd_end = timer->Mark();
  obs->OnPhaseEnd("fwd");

  obs->OnPhaseBegin("bwd");
  const int bwd_begin = timer->Mark();
  loss.backward();
  const int bwd_end = timer->Mark();
  obs->OnPhaseEnd("bwd");
  ++micro_steps_;

  std::optional<std::pair<int, int>> optim;
  if (micro_steps_ % o_.grad_accum == 0) {
    obs->OnPhaseBegin("optim");
    const int begin = timer->Mark();
    optimizer_->Step();
    compat::ResetGrads(params_);
    UpdateEma();
    ++optimizer_steps_;
    optim = {begin, timer->Mark()};
    obs->OnPhaseEnd("optim");
  }
  const double value = l1.item<double>();
  Synchronize();
  report->phase_ns["fwd"] = timer->DeviceNs(fwd_begin, fwd_end);
  report->phase_ns["bwd"] = timer->DeviceNs(bwd_begin, bwd_end);
  if (optim) report->phase_ns["optim"] = timer->DeviceNs(optim->first, optim->second);
  return value;
}

// Reference trainer: after optimizer step s (0-based), if s % 10 == 0 the EMA copy is reset to
// the live weights while s < 2000, else ema = 0.995 ema + 0.005 w. Parameters only.
void MeddpmWorkload::UpdateEma() {
  if (optimizer_steps_ % kEmaEvery != 0) return;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (optimizer_steps_ < kEmaStartStep) {
      ema_[i].copy_(params_[i]);
    } else {
      ema_[i].mul_(kEmaDecay).add_(params_[i], 1.0 - kEmaDecay);
    }
  }
}

// One DDPM ancestral step at timestep i (spec §2.5).
double MeddpmWorkload::SampleStep(PhaseObserver* obs, StepTimer* timer, StepReport* report) {
  const int64_t i = o_.sample_steps - 1 - sample_step_ % o_.sample_steps;
  obs->OnPhaseBegin("sample_step");
  const int begin = timer->Mark();
  {
    torch::NoGradGuard no_grad;
    torch::Tensor eps;
    {
      compat::AutocastGuard autocast(device_.type(), flags_.bf16, at::kBFloat16);
      image_slot_.copy_(sample_x_);
      eps = net_->forward(net_input_, t_).to(torch::kFloat);
    }
    // fp32 coefficients, as the reference's fp32 buffers
    const auto f = [](double v) { return static_cast<float>(v); };
    const torch::Tensor x0_hat = (f(schedule_.sqrt_recip_alphas_cumprod[i]) * sample_x_ -
                                  f(schedule_.sqrt_recipm1_alphas_cumprod[i]) * eps)
                                     .clamp_(-1.0, 1.0);
    torch::Tensor mean =
        f(schedule_.posterior_mean_coef1[i]) * x0_hat + f(schedule_.posterior_mean_coef2[i]) * sample_x_;
    if (i > 0) {
      const float sigma = std::exp(0.5f * f(schedule_.posterior_log_variance_clipped[i]));
      mean.add_(sample_z_, sigma);
    }
    sample_x_ = mean;
  }
  const int end = timer->Mark();
  obs->OnPhaseEnd("sample_step");
  Synchronize();
  report->phase_ns["sample_step"] = timer->DeviceNs(begin, end);
  ++sample_step_;
  sample_ready_ = true;
  return 0.0;
}

absl::Status MeddpmWorkload::RunSteps(PhaseObserver* observer) {
  NullObserver null_observer;
  PhaseObserver* obs = observer != nullptr ? observer : &null_observer;
  const int total = o_.warmup + o_.steps;
  for (int s = 0; s < total; ++s) {
    const bool measured = s >= o_.warmup;
    RunOneStep(obs, measured ? s - o_.warmup : s, measured);
  }
  return absl::OkStatus();
}

void MeddpmWorkload::RunOneStep(PhaseObserver* obs, int index, bool measured) {
  PrepareStep();
  Synchronize();
  StepReport report;
  report.index = index;
  report.measured = measured;
  obs->OnStepBegin(report.index, measured);
  StepTimer timer(cuda());
  const int begin = timer.Mark();
  switch (o_.phase) {
    case Phase::kForward:
      report.loss = ForwardStep(obs, &timer, &report);
      break;
    case Phase::kTrain:
      report.loss = TrainStep(obs, &timer, &report);
      break;
    case Phase::kSample:
      report.loss = SampleStep(obs, &timer, &report);
      break;
  }
  const int end = timer.Mark();
  Synchronize();
  report.wall_ns = timer.HostNs(begin, end);
  report.device_ns = cuda() ? timer.DeviceNs(begin, end) : 0;
  ++steps_run_;
  obs->OnStepEnd(report);
}

uint64_t MeddpmWorkload::PeakMemoryBytes() const {
#ifdef MEDPROF_TORCH_HAS_CUDA
  if (cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index());
    return static_cast<uint64_t>(stats.allocated_bytes[0].peak);  // [0] = aggregate
  }
#endif
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux: kilobytes
}

absl::StatusOr<std::vector<float>> MeddpmWorkload::CurrentSample() {
  if (o_.phase != Phase::kSample) {
    return absl::FailedPreconditionError(
        absl::StrCat("current sample: the workload runs phase ", PhaseLabel(), ", not sample"));
  }
  if (!sample_ready_) {
    return absl::FailedPreconditionError("current sample: Run has not taken a sampling step yet");
  }
  std::vector<float> values;
  MEDPROF_RETURN_IF_ERROR(Guarded("current sample", [&] {
    values = ToHost(sample_x_);
    return absl::OkStatus();
  }));
  return values;
}

absl::Status MeddpmWorkload::Export(const std::string& dir) {
  if (o_.tf32 || flags_.bf16 || flags_.tf32_cudnn || flags_.tf32_matmul) {
    return absl::FailedPreconditionError(
        "export_peer: the same-function check runs in strict FP32; turn tf32 and bf16 off "
        "(preset baseline)");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat("export_peer: cannot create ", dir, ": ", ec.message()));
  }
  const std::filesystem::path root(dir);

  // The forward phase's fixed input, whatever phase this workload runs.
  const torch::Tensor eps = Upload(NormalVolume(o_.seed, Stream::kNoise, 0, ImageNumel()),
                                   VolumeShape(o_.model.out_channels), device_);
  const std::vector<int64_t> t_host = Timesteps(o_.seed, 0, o_.batch, kNumTimesteps);
  const torch::Tensor t = TimestepTensor(t_host);
  WriteNoisyInput(eps, t);

  // Dense weights for the check; the model's own are restored below.
  std::vector<torch::Tensor> saved;
  {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& p : net_->parameters()) saved.push_back(p.detach().clone());
  }
  net_->InitWeights(o_.seed, InitMode::kDense);
  torch::Tensor output;
  {
    torch::NoGradGuard no_grad;
    output = net_->forward(net_input_, t);
  }

  std::vector<float> weights;
  std::ostringstream params_json;
  int64_t offset = 0;
  bool first = true;
  for (const auto& item : net_->named_parameters()) {
    const std::vector<float> values = ToHost(item.value());
    weights.insert(weights.end(), values.begin(), values.end());
    params_json << (first ? "" : ",\n") << "    {\"name\": \"" << item.key()
                << "\", \"shape\": " << JsonInts(item.value().sizes().vec()) << ", \"offset\": " << offset
                << "}";
    offset += static_cast<int64_t>(values.size());
    first = false;
  }
  {
    torch::NoGradGuard no_grad;
    const std::vector<torch::Tensor> params = net_->parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(saved[i]);
  }
  const std::vector<float> input = ToHost(net_input_);
  const std::vector<float> out = ToHost(output);

  MEDPROF_RETURN_IF_ERROR(WriteFile(root / "weights.bin", weights.data(), weights.size() * sizeof(float)));
  MEDPROF_RETURN_IF_ERROR(WriteFile(root / "input.bin", input.data(), input.size() * sizeof(float)));
  MEDPROF_RETURN_IF_ERROR(WriteFile(root / "output.bin", out.data(), out.size() * sizeof(float)));

  const ModelOptions& m = o_.model;
  std::ostringstream json;
  json << "{\n"
       << "  \"format\": \"medprof-meddpm-peer-export/1\",\n"
       << "  \"torch_version\": \"" << flags_.torch_version << "\",\n"
       << "  \"device\": \"" << flags_.device << "\",\n"
       << "  \"model\": {\"in_channels\": " << m.in_channels << ", \"out_channels\": " << m.out_channels
       << ", \"base_channels\": " << m.base_channels
       << ", \"channel_mult\": " << JsonInts({m.channel_mult.begin(), m.channel_mult.end()})
       << ", \"res_blocks\": " << m.res_blocks
       << ", \"attention_ds\": " << JsonInts({m.attention_ds.begin(), m.attention_ds.end()})
       << ", \"groups\": " << m.groups << "},\n"
       << "  \"volume\": " << JsonInts({o_.depth, o_.height, o_.width}) << ",\n"
       << "  \"batch\": " << o_.batch << ",\n"
       << "  \"seed\": " << o_.seed << ",\n"
       << "  \"timesteps\": " << JsonInts(t_host) << ",\n"
       << "  \"parameter_count\": " << offset << ",\n"
       << "  \"weights\": \"weights.bin\",\n"
       << "  \"input\": {\"file\": \"input.bin\", \"shape\": " << JsonInts(VolumeShape(m.in_channels))
       << "},\n"
       << "  \"output\": {\"file\": \"output.bin\", \"shape\": " << JsonInts(VolumeShape(m.out_channels))
       << "},\n"
       << "  \"output_fnv1a64\": \"" << absl::StrFormat("%016x", Fnv1a64(out)) << "\",\n"
       << "  \"parameters\": [\n"
       << params_json.str() << "\n  ]\n}\n";
  const std::string text = json.str();
  return WriteFile(root / "manifest.json", text.data(), text.size());
}

}  // namespace

absl::StatusOr<std::unique_ptr<Workload>> Workload::Create(const WorkloadOptions& options) {
  MEDPROF_RETURN_IF_ERROR(ValidateOptions(options));
  auto workload = std::make_unique<MeddpmWorkload>(options);
  MEDPROF_RETURN_IF_ERROR(Guarded("creating the Med-DDPM workload", [&] { return workload->Init(); }));
  return std::unique_ptr<Workload>(std::move(workload));
}

}  // namespace medprof::meddpm
