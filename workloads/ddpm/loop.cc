#include "workloads/ddpm/loop.h"

#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <sys/resource.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "common/clock.h"
#include "common/request_limits.h"
#include "common/status.h"
#include "workloads/ddpm/synthetic.h"

#ifdef MEDPROF_TORCH_HAS_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace medprof::ddpm {
namespace {

constexpr double kAdamBeta1 = 0.9, kAdamBeta2 = 0.999, kAdamEps = 1e-8;
constexpr double kEmaDecay = 0.995;
constexpr int kEmaEvery = 10;        // optimizer steps between EMA updates
constexpr int kEmaStartStep = 2000;  // before it the EMA copy is overwritten

absl::Status OutOfRange(absl::string_view field, double value, absl::string_view allowed) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", value, " is out of range (allowed ", allowed, ")"));
}

absl::Status CheckRange(absl::string_view field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) return OutOfRange(field, static_cast<double>(v), absl::StrCat(lo, "..", hi));
  return absl::OkStatus();
}

at::Tensor ToDeviceFp32(const std::vector<double>& values, const c10::Device& device) {
  std::vector<float> f(values.begin(), values.end());
  return Upload(f, {static_cast<int64_t>(f.size())}, device);
}

class NullObserver : public workload::PhaseObserver {};

}  // namespace

// One timing mark: host clock, plus a CUDA event on GPU.
class Loop::StepTimer {
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
      return static_cast<int64_t>(std::llround(static_cast<double>(events_[a].elapsed_time(events_[b])) * 1e6));
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

const char* PhaseLabel(Phase phase) {
  switch (phase) {
    case Phase::kForward: return "forward";
    case Phase::kTrain: return "train";
    case Phase::kSample: return "sample";
  }
  return "?";
}

at::Tensor Upload(const std::vector<float>& values, const std::vector<int64_t>& shape, const c10::Device& device) {
  return at::from_blob(const_cast<float*>(values.data()), shape, at::kFloat)
      .to(at::TensorOptions().device(device).dtype(at::kFloat), /*non_blocking=*/false, /*copy=*/true);
}

std::vector<float> ToHost(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kCPU, at::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

absl::StatusOr<c10::Device> ResolveDevice(Device requested) {
  const bool has_cuda = torch::cuda::is_available();
  c10::Device device(c10::kCPU);
  switch (requested) {
    case Device::kAuto:
      if (has_cuda) device = c10::Device(c10::kCUDA, 0);
      break;
    case Device::kCpu:
      break;
    case Device::kCuda:
      if (!has_cuda) {
        return absl::FailedPreconditionError(
            absl::StrCat("device: cuda was requested but LibTorch ", compat::TorchVersion(),
                         " sees no CUDA device (torch::cuda::is_available() is false: no GPU or driver, or a "
                         "CPU-only LibTorch)"));
      }
      device = c10::Device(c10::kCUDA, 0);
      break;
  }
#ifndef MEDPROF_TORCH_HAS_CUDA
  if (device.is_cuda()) {
    return absl::FailedPreconditionError(
        "device: cuda is visible but medprof was built against a LibTorch without CUDA "
        "(MEDPROF_TORCH_HAS_CUDA off): rebuild with a CUDA LibTorch");
  }
#endif
  return device;
}

workload::EffectiveFlags ApplyMathFlags(const MathRequest& request, const c10::Device& device,
                                        std::vector<std::string>* notes) {
  bool bf16 = request.bf16;
#ifdef MEDPROF_TORCH_HAS_CUDA
  if (bf16 && device.is_cuda() && at::cuda::getCurrentDeviceProperties()->major < 8) {
    bf16 = false;
    notes->push_back("bf16 unavailable on this GPU (compute capability < 8.0), running FP32");
  }
#endif
  compat::SetTf32(request.tf32);
  compat::SetCudnnBenchmark(false);
  if (request.cpu_threads > 0) at::set_num_threads(request.cpu_threads);
  if (!device.is_cuda() && request.tf32) notes->push_back("tf32 has no effect on CPU");

  workload::EffectiveFlags flags;
  flags.tf32_cudnn = compat::Tf32CuDNN();
  flags.tf32_matmul = compat::Tf32CuBLAS();
  flags.cudnn_benchmark = compat::CudnnBenchmark();
  flags.bf16 = bf16;
  flags.device = device.str();
  flags.torch_version = compat::TorchVersion();
  flags.cudnn_version = device.is_cuda() ? compat::CudnnVersion() : "";
  return flags;
}

uint64_t PeakMemoryBytes(const c10::Device& device) {
#ifdef MEDPROF_TORCH_HAS_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return static_cast<uint64_t>(stats.allocated_bytes[0].peak);  // [0] = aggregate
  }
#endif
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux: kilobytes
}

absl::Status ValidateLoopOptions(const LoopOptions& o) {
  const std::pair<const char*, int> edges[] = {{"depth", o.depth}, {"height", o.height}, {"width", o.width}};
  for (const auto& [field, v] : edges) {
    MEDPROF_RETURN_IF_ERROR(CheckRange(field, v, limits::kMinVolume, limits::kMaxVolume));
  }
  MEDPROF_RETURN_IF_ERROR(CheckRange("batch", o.batch, 1, limits::kMaxBatch));
  MEDPROF_RETURN_IF_ERROR(CheckRange("out_channels", o.image_channels, 1, limits::kMaxInOutChannels));
  MEDPROF_RETURN_IF_ERROR(CheckRange("conditioning channels (in_channels - out_channels)", o.cond_channels, 0,
                                     limits::kMaxInOutChannels));
  MEDPROF_RETURN_IF_ERROR(CheckRange("steps", o.steps, 1, limits::kMaxSteps));
  MEDPROF_RETURN_IF_ERROR(CheckRange("warmup", o.warmup, 0, limits::kMaxWarmup));
  MEDPROF_RETURN_IF_ERROR(CheckRange("grad_accum", o.grad_accum, 1, limits::kMaxGradAccum));
  if (!(o.learning_rate > 0.0 && o.learning_rate <= 1.0)) {
    return OutOfRange("learning_rate", o.learning_rate, "greater than 0, at most 1");
  }
  return CheckRange("sample_steps", o.sample_steps, 1, kNumTimesteps);
}

Inputs MakeInputs(const LoopOptions& o, const c10::Device& device) {
  const int64_t voxels = static_cast<int64_t>(o.depth) * o.height * o.width;
  std::vector<float> image(static_cast<size_t>(o.batch) * o.image_channels * voxels);
  std::vector<float> mask(static_cast<size_t>(o.batch) * o.cond_channels * voxels);
  for (int b = 0; b < o.batch; ++b) {
    const Subject s = MakeSubject(o.seed, b, o.depth, o.height, o.width, o.image_channels, o.cond_channels);
    std::copy(s.image.begin(), s.image.end(), image.begin() + b * o.image_channels * voxels);
    std::copy(s.mask.begin(), s.mask.end(), mask.begin() + b * o.cond_channels * voxels);
  }
  Inputs in;
  in.x0 = Upload(image, {o.batch, o.image_channels, o.depth, o.height, o.width}, device);
  if (o.cond_channels > 0) in.cond = Upload(mask, {o.batch, o.cond_channels, o.depth, o.height, o.width}, device);
  return in;
}

Loop::Loop(const LoopOptions& options, const c10::Device& device, at::Tensor x0, Denoiser* denoiser)
    : o_(options), device_(device), denoiser_(denoiser), x0_(std::move(x0)) {}

Loop::~Loop() = default;

absl::StatusOr<std::unique_ptr<Loop>> Loop::Create(const LoopOptions& options, const c10::Device& device,
                                                   at::Tensor x0, Denoiser* denoiser) {
  MEDPROF_RETURN_IF_ERROR(ValidateLoopOptions(options));
  std::unique_ptr<Loop> loop(new Loop(options, device, std::move(x0), denoiser));
  MEDPROF_RETURN_IF_ERROR(Guarded("preparing the DDPM loop", [&] { return loop->Init(); }));
  return loop;
}

absl::Status Loop::Init() {
  schedule_ = CosineSchedule(kNumTimesteps);
  sqrt_abar_ = ToDeviceFp32(schedule_.sqrt_alphas_cumprod, device_);
  sqrt_one_minus_abar_ = ToDeviceFp32(schedule_.sqrt_one_minus_alphas_cumprod, device_);
  switch (o_.phase) {
    case Phase::kForward: {
      denoiser_->SetTraining(false);
      const NoisyInput in = FixedForwardInput();  // written once: every step evaluates the same input
      t_ = in.t;
      denoiser_->SetNoisyInput(in.x_t);
      break;
    }
    case Phase::kTrain: {
      denoiser_->SetTraining(true);
      params_ = denoiser_->Parameters();
      c10::NoGradGuard no_grad;
      for (const at::Tensor& p : params_) ema_.push_back(p.detach().clone());
      optimizer_ = std::make_unique<ForeachAdam>(params_, o_.learning_rate, kAdamBeta1, kAdamBeta2, kAdamEps);
      break;
    }
    case Phase::kSample:
      denoiser_->SetTraining(false);
      break;
  }
  Synchronize();
  return absl::OkStatus();
}

void Loop::Synchronize() const {
  if (cuda()) torch::cuda::synchronize();
}

std::vector<int64_t> Loop::ImageShape() const { return {o_.batch, o_.image_channels, o_.depth, o_.height, o_.width}; }

int64_t Loop::ImageNumel() const {
  return static_cast<int64_t>(o_.batch) * o_.image_channels * o_.depth * o_.height * o_.width;
}

at::Tensor Loop::TimestepTensor(const std::vector<int64_t>& t) const {
  return at::tensor(t, at::TensorOptions().dtype(at::kLong)).to(device_);
}

at::Tensor Loop::QSample(const at::Tensor& eps, const at::Tensor& t) const {
  c10::NoGradGuard no_grad;
  const int64_t b = t.size(0);
  const at::Tensor a = sqrt_abar_.index_select(0, t).view({b, 1, 1, 1, 1});
  const at::Tensor s = sqrt_one_minus_abar_.index_select(0, t).view({b, 1, 1, 1, 1});
  return a * x0_ + s * eps;
}

Loop::NoisyInput Loop::FixedForwardInput() const {
  NoisyInput in;
  in.t_host = Timesteps(o_.seed, 0, o_.batch, kNumTimesteps);
  in.t = TimestepTensor(in.t_host);
  const at::Tensor eps = Upload(NormalVolume(o_.seed, Stream::kNoise, 0, ImageNumel()), ImageShape(), device_);
  in.x_t = QSample(eps, in.t);
  return in;
}

// Host-side preparation of the next step's random inputs, outside the step's time bracket.
void Loop::PrepareStep() {
  switch (o_.phase) {
    case Phase::kForward:
      break;
    case Phase::kTrain: {
      const uint64_t index = o_.fixed_noise ? 0 : static_cast<uint64_t>(micro_steps_);
      if (!o_.fixed_noise || !eps_.defined()) {
        eps_ = Upload(NormalVolume(o_.seed, Stream::kNoise, index, ImageNumel()), ImageShape(), device_);
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
        sample_x_ = Upload(NormalVolume(o_.seed, Stream::kSampleNoise, base, ImageNumel()), ImageShape(), device_);
      }
      sample_z_ = i > 0 ? Upload(NormalVolume(o_.seed, Stream::kSampleNoise, base + static_cast<uint64_t>(k) + 1,
                                              ImageNumel()),
                                 ImageShape(), device_)
                        : at::Tensor();
      t_ = TimestepTensor(std::vector<int64_t>(o_.batch, i));
      break;
    }
  }
}

double Loop::ForwardStep(workload::PhaseObserver* obs, StepTimer* timer, workload::StepReport* report) {
  obs->OnPhaseBegin("fwd");
  const int begin = timer->Mark();
  {
    c10::NoGradGuard no_grad;
    compat::AutocastGuard autocast(device_.type(), o_.bf16, at::kBFloat16);
    denoiser_->Forward(t_);
  }
  const int end = timer->Mark();
  obs->OnPhaseEnd("fwd");
  Synchronize();
  report->phase_ns["fwd"] = timer->DeviceNs(begin, end);
  return 0.0;
}

double Loop::TrainStep(workload::PhaseObserver* obs, StepTimer* timer, workload::StepReport* report) {
  obs->OnPhaseBegin("fwd");
  const int fwd_begin = timer->Mark();
  at::Tensor l1, loss;
  {
    compat::AutocastGuard autocast(device_.type(), o_.bf16, at::kBFloat16);
    denoiser_->SetNoisyInput(QSample(eps_, t_));
    const at::Tensor pred = denoiser_->Forward(t_);
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
void Loop::UpdateEma() {
  if (optimizer_steps_ % kEmaEvery != 0) return;
  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (optimizer_steps_ < kEmaStartStep) {
      ema_[i].copy_(params_[i]);
    } else {
      ema_[i].mul_(kEmaDecay).add_(params_[i], 1.0 - kEmaDecay);
    }
  }
}

// One DDPM ancestral step at timestep i (spec/meddpm.md §2.5).
double Loop::SampleStep(workload::PhaseObserver* obs, StepTimer* timer, workload::StepReport* report) {
  const int64_t i = o_.sample_steps - 1 - sample_step_ % o_.sample_steps;
  obs->OnPhaseBegin("sample_step");
  const int begin = timer->Mark();
  {
    c10::NoGradGuard no_grad;
    at::Tensor eps;
    {
      compat::AutocastGuard autocast(device_.type(), o_.bf16, at::kBFloat16);
      denoiser_->SetNoisyInput(sample_x_);
      eps = denoiser_->Forward(t_).to(at::kFloat);
    }
    // fp32 coefficients, as the reference's fp32 buffers
    const auto f = [](double v) { return static_cast<float>(v); };
    const at::Tensor x0_hat =
        (f(schedule_.sqrt_recip_alphas_cumprod[i]) * sample_x_ - f(schedule_.sqrt_recipm1_alphas_cumprod[i]) * eps)
            .clamp_(-1.0, 1.0);
    at::Tensor mean =
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

absl::Status Loop::Run(workload::PhaseObserver* observer) {
  return Guarded(absl::StrCat(PhaseLabel(o_.phase), " step"), [&] {
    NullObserver null_observer;
    workload::PhaseObserver* obs = observer != nullptr ? observer : &null_observer;
    const int total = o_.warmup + o_.steps;
    for (int s = 0; s < total; ++s) {
      const bool measured = s >= o_.warmup;
      RunOneStep(obs, measured ? s - o_.warmup : s, measured);
    }
    return absl::OkStatus();
  });
}

absl::Status Loop::RunExtraSteps(int count, workload::PhaseObserver* observer) {
  if (count < 1 || count > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("extra steps: count ", count, " is out of range (allowed 1..100000)"));
  }
  return Guarded(absl::StrCat(PhaseLabel(o_.phase), " step"), [&] {
    NullObserver null_observer;
    workload::PhaseObserver* obs = observer != nullptr ? observer : &null_observer;
    for (int i = 0; i < count; ++i) RunOneStep(obs, extra_steps_++, /*measured=*/false);
    return absl::OkStatus();
  });
}

void Loop::RunOneStep(workload::PhaseObserver* obs, int index, bool measured) {
  PrepareStep();
  Synchronize();
  workload::StepReport report;
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
  obs->OnStepEnd(report);
}

absl::StatusOr<std::vector<float>> Loop::CurrentSample() {
  if (o_.phase != Phase::kSample) {
    return absl::FailedPreconditionError(
        absl::StrCat("current sample: the workload runs phase ", PhaseLabel(o_.phase), ", not sample"));
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

}  // namespace medprof::ddpm
