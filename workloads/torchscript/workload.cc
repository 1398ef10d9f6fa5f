#include "workloads/torchscript/workload.h"

#include <c10/core/GradMode.h>
#include <torch/script.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/request_limits.h"
#include "common/status.h"
#include "workloads/ddpm/loop.h"
#include "workloads/ddpm/synthetic.h"

#ifdef MEDPROF_TORCH_HAS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace medprof::torchscript {
namespace {

// The dry run's two timesteps: far enough apart that any use of t shows in the output.
constexpr int64_t kDryRunT[2] = {62, 187};

absl::Status Bad(absl::string_view cause) { return absl::InvalidArgumentError(absl::StrCat("model: ", cause)); }

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// The TorchScript interpreter puts its traceback first and the error ("RuntimeError: ...") last.
std::string LastLine(const std::string& text) {
  const size_t end = text.find_last_not_of("\n ");
  if (end == std::string::npos) return "";
  const size_t begin = text.rfind('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin == std::string::npos ? 0 : begin + 1));
}

std::string Shape(const at::Tensor& t) { return "[" + absl::StrJoin(t.sizes(), ", ") + "]"; }

absl::StatusOr<torch::jit::Module> LoadModule(const std::string& path) {
  if (path.empty()) return Bad("no model file given (--model FILE)");
  if (std::ifstream probe(path, std::ios::binary); !probe) {
    return Bad(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::string message;
  try {
    return torch::jit::load(path, c10::Device(c10::kCPU));
  } catch (const c10::Error& e) {
    message = FirstLine(ddpm::compat::ErrorMessage(e));
  } catch (const std::exception& e) {
    message = FirstLine(e.what());
  }
  return Bad(absl::StrCat(path, " is not a TorchScript module (save one with torch.jit.save(torch.jit.script(m), "
                                "FILE)): LibTorch says: ", message));
}

struct Signature {
  std::string text;
  bool conditional = false;
};

absl::StatusOr<Signature> CheckSignature(const torch::jit::Module& module) {
  const auto method = module.find_method("forward");  // c10::optional (1.13) or std::optional (2.x)
  if (!method) return Bad("the module has no forward method (expected forward(x, t) or forward(x, t, cond))");
  const c10::FunctionSchema& schema = method->function().getSchema();
  std::ostringstream text;
  text << schema;
  const std::vector<c10::Argument>& args = schema.arguments();  // args[0] is self
  const size_t n = args.empty() ? 0 : args.size() - 1;
  bool ok = n == 2 || n == 3;
  for (size_t i = 1; ok && i < args.size(); ++i) ok = args[i].type()->kind() == c10::TypeKind::TensorType;
  ok = ok && schema.returns().size() == 1 && schema.returns()[0].type()->kind() == c10::TypeKind::TensorType;
  if (!ok) {
    return Bad(absl::StrCat("forward has the wrong signature: found ", text.str(),
                            "; expected forward(x: Tensor, t: Tensor) -> Tensor or "
                            "forward(x: Tensor, t: Tensor, cond: Tensor) -> Tensor"));
  }
  return Signature{text.str(), n == 3};
}

// Puts every 5-D parameter into ChannelsLast3d in place (what nn.Module.to(memory_format=...)
// does in Python; TorchScript modules have no such call). Returns {converted, 5-D parameters}.
std::pair<int, int> ToChannelsLast(torch::jit::Module& module) {
  int converted = 0, volumes = 0;
  c10::NoGradGuard no_grad;
  for (at::Tensor p : module.parameters()) {
    if (p.dim() != 5) continue;
    ++volumes;
    p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast3d));
    if (p.is_contiguous(at::MemoryFormat::ChannelsLast3d)) ++converted;
  }
  return {converted, volumes};
}

bool IsChannelsLast(const at::Tensor& t) {
  return t.dim() == 5 && t.is_contiguous(at::MemoryFormat::ChannelsLast3d) &&
         !t.is_contiguous(at::MemoryFormat::Contiguous);
}

// Peak memory growth over a scope: the CUDA caching allocator's peak, or peak RSS on the CPU.
class MemoryProbe {
 public:
  explicit MemoryProbe(const c10::Device& device) : device_(device) {
#ifdef MEDPROF_TORCH_HAS_CUDA
    if (device_.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
#endif
    before_ = ddpm::PeakMemoryBytes(device_);
  }
  uint64_t Growth() const {
    const uint64_t now = ddpm::PeakMemoryBytes(device_);
    return now > before_ ? now - before_ : 0;
  }
  std::string Method() const {
    return device_.is_cuda() ? "CUDA caching-allocator peak growth during the batch-1 dry run"
                             : "peak-RSS growth during the batch-1 dry run (a lower bound)";
  }

 private:
  c10::Device device_;
  uint64_t before_ = 0;
};

// The module as the DDPM loop's denoiser: forward(x_t, t[, cond]).
class ScriptDenoiser final : public ddpm::Denoiser {
 public:
  ScriptDenoiser(torch::jit::Module module, at::Tensor cond, bool channels_last)
      : module_(std::move(module)), cond_(std::move(cond)), channels_last_(channels_last) {}

  void SetNoisyInput(const at::Tensor& x_t) override {
    x_ = channels_last_ ? x_t.contiguous(at::MemoryFormat::ChannelsLast3d) : x_t;
  }
  at::Tensor Forward(const at::Tensor& t) override { return Call(x_, t, cond_); }
  std::vector<at::Tensor> Parameters() override {
    std::vector<at::Tensor> params;
    for (const at::Tensor& p : module_.parameters()) {
      if (p.requires_grad()) params.push_back(p);
    }
    return params;
  }
  void SetTraining(bool on) override { module_.train(on); }

  // One forward on explicit inputs (the dry run's); `cond` is ignored by forward(x, t) modules.
  at::Tensor Call(const at::Tensor& x, const at::Tensor& t, const at::Tensor& cond) {
    std::vector<c10::IValue> args = {x, t};
    if (cond_.defined()) args.emplace_back(cond);
    return module_.forward(args).toTensor();
  }
  // The conditioning of the first batch element (the dry run's), undefined for forward(x, t).
  at::Tensor FirstCond() const { return cond_.defined() ? cond_.narrow(0, 0, 1) : at::Tensor(); }

 private:
  torch::jit::Module module_;
  at::Tensor cond_;  // (B, K, D, H, W) in the inputs' layout; undefined for forward(x, t)
  bool channels_last_;
  at::Tensor x_;
};

// One dry-run forward: an error inside the module names the inputs; out of memory propagates.
// One dry-run forward. An error inside the module is INVALID_ARGUMENT naming the inputs and the
// interpreter's error line; out of memory is RESOURCE_EXHAUSTED (the configuration may fit elsewhere).
absl::StatusOr<at::Tensor> DryForward(ScriptDenoiser* net, const at::Tensor& x, const at::Tensor& t) {
  const at::Tensor cond = net->FirstCond();
  std::string message;
  try {
    return net->Call(x, t, cond);
  } catch (const c10::Error& e) {  // c10::OutOfMemoryError included
    message = ddpm::compat::ErrorMessage(e);
  } catch (const std::exception& e) {  // the interpreter rethrows an op's error as a runtime_error
    message = e.what();
  }
  const std::string inputs =
      absl::StrCat("x ", Shape(x), ", t ", Shape(t),
                   cond.defined() ? absl::StrCat(", cond ", Shape(cond)) : "");
  if (ddpm::compat::IsOutOfMemory(message)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("model: out of memory in the dry run's forward with ", inputs, ": ", LastLine(message)));
  }
  return Bad(absl::StrCat("forward failed on the dry run with ", inputs, ": ", LastLine(message)));
}

absl::Status CheckOutput(const at::Tensor& out, const at::Tensor& x, int64_t t) {
  if (out.sizes() != x.sizes()) {
    return Bad(absl::StrCat("output shape ", Shape(out), " differs from the target's ", Shape(x),
                            " (forward must return the predicted noise, shaped like x)"));
  }
  const int64_t bad = (~at::isfinite(out)).sum().item<int64_t>();
  if (bad > 0) {
    return Bad(absl::StrCat("the dry run's output has ", bad, " NaN/Inf values of ", out.numel(), " at t=", t));
  }
  return absl::OkStatus();
}

// Everything Describe and Create share: the checked module on its device, the flags applied,
// the inputs, the dry run done.
struct Prepared {
  torch::jit::Module module;
  ddpm::LoopOptions loop;
  ddpm::Inputs inputs;
  c10::Device device{c10::kCPU};
  Description description;
};

// The notes on what each requested preset flag did to this module (read back).
void NotePresets(const Options& o, const Prepared& p, std::pair<int, int> converted, std::vector<std::string>* notes) {
  const Description& d = p.description;
  if (o.tf32 && p.device.is_cuda()) {
    notes->push_back(absl::StrCat("tf32: cuDNN ", d.flags.tf32_cudnn ? "on" : "off", ", cuBLAS ",
                                  d.flags.tf32_matmul ? "on" : "off", " for every conv and matmul the module runs"));
  }
  if (o.channels_last) {
    notes->push_back(absl::StrCat("channels_last: ", converted.first, " of ", converted.second,
                                  " 5-D parameters and the inputs in ChannelsLast3d; the dry run's output came back ",
                                  d.output_channels_last ? "in ChannelsLast3d" : "in NCDHW (the module converts back)"));
  }
  if (o.bf16 && d.flags.bf16) {
    notes->push_back(absl::StrCat("bf16: autocast around forward; the dry run's output is ", d.output_dtype,
                                  d.output_dtype == "BFloat16" ? "" : " (its last op runs in FP32 under autocast, or autocast did not reach it)"));
  }
  if (o.fused) notes->push_back("fused: medprof's fused kernels are Med-DDPM's own; a TorchScript model runs its own ops");
  if (!d.t_dependence_checked) {
    notes->push_back("dry run: output all zeros at both timesteps (a zero-initialised output layer?): t-dependence not checked");
  }
}

// The batch-1 dry run on the module's device under the run's flags (Describe's contract).
absl::Status DryRun(const Options& o, ScriptDenoiser* net, Prepared* p) {
  Description& d = p->description;
  const ddpm::LoopOptions& l = p->loop;
  at::Tensor x = ddpm::Upload(
      ddpm::NormalVolume(l.seed, ddpm::Stream::kNoise, 0, int64_t{l.image_channels} * l.depth * l.height * l.width),
      {1, l.image_channels, l.depth, l.height, l.width}, p->device);
  if (o.channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast3d);
  at::Tensor out[2];
  MemoryProbe memory(p->device);
  for (int i = 0; i < 2; ++i) {
    const at::Tensor t = at::full({1}, kDryRunT[i], at::TensorOptions().dtype(at::kLong).device(p->device));
    // The first forward keeps autograd's saved activations in train, so the probe sees them.
    c10::AutoGradMode grad(i == 0 && l.phase == ddpm::Phase::kTrain);
    ddpm::compat::AutocastGuard autocast(p->device.type(), d.flags.bf16, at::kBFloat16);
    absl::StatusOr<at::Tensor> forward = DryForward(net, x, t);
    if (!forward.ok() && d.flags.bf16) {  // a module may run in FP32 but not under autocast
      return absl::Status(forward.status().code(), absl::StrCat(forward.status().message(), " (under bf16 autocast)"));
    }
    MEDPROF_ASSIGN_OR_RETURN(out[i], std::move(forward));
    if (i == 0) d.activation_bytes = memory.Growth() * static_cast<uint64_t>(l.batch);
    out[i] = out[i].detach();
    MEDPROF_RETURN_IF_ERROR(CheckOutput(out[i], x, kDryRunT[i]));
  }
  const bool zeros = out[0].eq(0).all().item<bool>() && out[1].eq(0).all().item<bool>();
  if (!zeros && at::equal(out[0], out[1])) {
    return Bad(absl::StrCat("the output does not depend on t: identical at t=", kDryRunT[0], " and t=", kDryRunT[1],
                            " on the dry run (the denoiser ignores its timestep argument)"));
  }
  d.t_dependence_checked = !zeros;
  d.x_shape = x.sizes().vec();
  d.t_shape = {1};
  if (const at::Tensor cond = net->FirstCond(); cond.defined()) d.cond_shape = cond.sizes().vec();
  d.output_shape = out[0].sizes().vec();
  d.output_dtype = std::string(c10::toString(out[0].scalar_type()));
  d.output_channels_last = IsChannelsLast(out[0]);
  d.memory_method = memory.Method();
  return absl::OkStatus();
}

// The loop's options once the signature says whether cond is used.
absl::StatusOr<ddpm::LoopOptions> LoopFor(const Options& o, const Signature& sig, bool bf16) {
  ddpm::LoopOptions l = o.loop;
  l.bf16 = bf16;
  if (!sig.conditional) {
    l.cond_channels = 0;  // forward(x, t): in_channels plays no part
  } else if (l.cond_channels < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "in_channels: forward(x, t, cond) needs conditioning channels, in_channels - out_channels = ",
        l.cond_channels, " (allowed 1..", limits::kMaxInOutChannels, "): set in_channels above out_channels"));
  }
  MEDPROF_RETURN_IF_ERROR(ddpm::ValidateLoopOptions(l));
  return l;
}

absl::Status Prepare(const Options& o, Prepared* p, std::unique_ptr<ScriptDenoiser>* denoiser) {
  MEDPROF_ASSIGN_OR_RETURN(p->module, LoadModule(o.path));
  MEDPROF_ASSIGN_OR_RETURN(const Signature sig, CheckSignature(p->module));
  MEDPROF_ASSIGN_OR_RETURN(p->device, ddpm::ResolveDevice(o.device));
  std::vector<std::string> notes;
  Description& d = p->description;
  d.flags = ddpm::ApplyMathFlags({.tf32 = o.tf32, .bf16 = o.bf16, .cpu_threads = o.cpu_threads}, p->device, &notes);
  MEDPROF_ASSIGN_OR_RETURN(p->loop, LoopFor(o, sig, d.flags.bf16));
  d.signature = sig.text;
  d.conditional = sig.conditional;
  d.device = p->device.str();
  return ddpm::Guarded("model dry run", [&]() -> absl::Status {
    p->module.to(p->device);
    const std::pair<int, int> converted = o.channels_last ? ToChannelsLast(p->module) : std::pair<int, int>{0, 0};
    for (const at::Tensor& t : p->module.parameters()) d.parameters += t.numel();
    p->inputs = ddpm::MakeInputs(p->loop, p->device);
    at::Tensor cond = p->inputs.cond;
    if (cond.defined() && o.channels_last) cond = cond.contiguous(at::MemoryFormat::ChannelsLast3d);
    *denoiser = std::make_unique<ScriptDenoiser>(p->module, cond, o.channels_last);
    (*denoiser)->SetTraining(p->loop.phase == ddpm::Phase::kTrain);
    MEDPROF_RETURN_IF_ERROR(DryRun(o, denoiser->get(), p));
    const int copies = p->loop.phase == ddpm::Phase::kTrain ? 5 : 1;  // weights (+ grads, Adam m, v, EMA)
    d.state_bytes = static_cast<uint64_t>(d.parameters) * sizeof(float) * copies;
    d.estimated_peak_bytes = d.state_bytes + d.activation_bytes;
    d.flags.channels_last = o.channels_last && (converted.second > 0 ? converted.first == converted.second : true);
    NotePresets(o, *p, converted, &notes);
    d.flags.note = absl::StrJoin(notes, "; ");
    return absl::OkStatus();
  });
}

class ScriptWorkload final : public Workload {
 public:
  absl::Status Init(const Options& o) {
    MEDPROF_RETURN_IF_ERROR(Prepare(o, &prepared_, &denoiser_));
    if (prepared_.loop.phase == ddpm::Phase::kTrain && denoiser_->Parameters().empty()) {
      return Bad("no parameter requires grad (a frozen or parameter-free module): the train phase has nothing to train");
    }
    MEDPROF_ASSIGN_OR_RETURN(loop_, ddpm::Loop::Create(prepared_.loop, prepared_.device, prepared_.inputs.x0,
                                                       denoiser_.get()));
    return absl::OkStatus();
  }

  int64_t ParameterCount() const override { return prepared_.description.parameters; }
  const workload::EffectiveFlags& flags() const override { return prepared_.description.flags; }
  absl::Status Run(workload::PhaseObserver* observer) override { return loop_->Run(observer); }
  absl::Status RunExtraSteps(int count, workload::PhaseObserver* observer) override {
    return loop_->RunExtraSteps(count, observer);
  }
  uint64_t PeakMemoryBytes() const override { return ddpm::PeakMemoryBytes(prepared_.device); }
  const Description& description() const override { return prepared_.description; }

 private:
  Prepared prepared_;
  std::unique_ptr<ScriptDenoiser> denoiser_;
  std::unique_ptr<ddpm::Loop> loop_;  // drives denoiser_, declared after it (destroyed first)
};

}  // namespace

absl::StatusOr<Description> Describe(const Options& options) {
  Prepared prepared;
  std::unique_ptr<ScriptDenoiser> denoiser;
  MEDPROF_RETURN_IF_ERROR(Prepare(options, &prepared, &denoiser));
  return prepared.description;
}

absl::StatusOr<std::unique_ptr<Workload>> Workload::Create(const Options& options) {
  auto workload = std::make_unique<ScriptWorkload>();
  MEDPROF_RETURN_IF_ERROR(workload->Init(options));
  return std::unique_ptr<Workload>(std::move(workload));
}

}  // namespace medprof::torchscript
