#include "workloads/meddpm/workload.h"

#include <torch/torch.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "workloads/ddpm/loop.h"
#include "workloads/ddpm/synthetic.h"
#include "workloads/meddpm/architecture.h"
#include "workloads/meddpm/fused_info.h"
#include "workloads/meddpm/unet.h"

namespace medprof::meddpm {
namespace {

using ddpm::Guarded;
using ddpm::ToHost;

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

// The U-Net as the DDPM loop's denoiser. The network input is one (B, in, D, H, W) buffer
// [x_t | masks], in the network's memory format; x_t is written into its image channels (no
// aten::cat on the way in).
class UNetDenoiser final : public ddpm::Denoiser {
 public:
  UNetDenoiser(UNet net, const ddpm::Inputs& inputs, bool channels_last) : net_(std::move(net)) {
    torch::NoGradGuard no_grad;
    const int64_t out = inputs.x0.size(1);
    const int64_t masks = inputs.cond.defined() ? inputs.cond.size(1) : 0;
    std::vector<int64_t> shape = inputs.x0.sizes().vec();
    shape[1] = out + masks;
    net_input_ = torch::zeros(shape, inputs.x0.options());
    if (masks > 0) net_input_.narrow(1, out, masks).copy_(inputs.cond);
    if (channels_last) net_input_ = net_input_.contiguous(at::MemoryFormat::ChannelsLast3d);
    image_slot_ = net_input_.narrow(1, 0, out);
  }

  void SetNoisyInput(const torch::Tensor& x_t) override {
    torch::NoGradGuard no_grad;
    image_slot_.copy_(x_t);
  }
  torch::Tensor Forward(const torch::Tensor& t) override { return net_->forward(net_input_, t); }
  std::vector<torch::Tensor> Parameters() override { return net_->parameters(); }
  void SetTraining(bool on) override { net_->train(on); }

  UNet& net() { return net_; }
  const torch::Tensor& net_input() const { return net_input_; }

 private:
  UNet net_;
  torch::Tensor net_input_;
  torch::Tensor image_slot_;  // net_input_.narrow(1, 0, out)
};

class MeddpmWorkload final : public Workload {
 public:
  explicit MeddpmWorkload(const WorkloadOptions& o) : o_(o), device_(torch::kCPU) {}

  absl::Status Init();

  int64_t ParameterCount() const override { return parameter_count_; }
  const EffectiveFlags& flags() const override { return flags_; }
  absl::Status Run(PhaseObserver* observer) override { return loop_->Run(observer); }
  absl::Status RunExtraSteps(int count, PhaseObserver* observer) override {
    return loop_->RunExtraSteps(count, observer);
  }
  uint64_t PeakMemoryBytes() const override { return ddpm::PeakMemoryBytes(device_); }
  absl::StatusOr<std::vector<float>> CurrentSample() override { return loop_->CurrentSample(); }
  absl::Status ExportForPeer(const std::string& dir) override {
    return Guarded("export_peer", [&] { return Export(dir); });
  }

 private:
  std::vector<int64_t> VolumeShape(int channels) const {
    return {o_.batch, channels, o_.depth, o_.height, o_.width};
  }
  void ApplyFlags();
  absl::Status Export(const std::string& dir);

  const WorkloadOptions o_;
  EffectiveFlags flags_;
  torch::Device device_;
  int64_t parameter_count_ = 0;
  std::unique_ptr<UNetDenoiser> denoiser_;
  std::unique_ptr<ddpm::Loop> loop_;  // drives denoiser_, declared after it (destroyed first)
};

// The math flags every denoiser shares (ddpm::ApplyMathFlags), then the fused kernels.
void MeddpmWorkload::ApplyFlags() {
  std::vector<std::string> notes;
  flags_ = ddpm::ApplyMathFlags({.tf32 = o_.tf32, .bf16 = o_.bf16, .cpu_threads = o_.cpu_threads}, device_, &notes);
  if (o_.fused) {
    if (!fused::Compiled()) {
      notes.push_back("fused GroupNorm unavailable: " + fused::NotCompiledReason());
    } else if (!device_.is_cuda()) {
      notes.push_back("fused GroupNorm kernels run on CUDA devices only; LibTorch's ops run on the CPU");
    } else {
      flags_.fused = true;
    }
  }
  flags_.note = absl::StrJoin(notes, "; ");
}

absl::Status MeddpmWorkload::Init() {
  MEDPROF_ASSIGN_OR_RETURN(device_, ddpm::ResolveDevice(o_.device));
  ApplyFlags();
  parameter_count_ = CountParameters(o_.model);
  ddpm::LoopOptions loop_options = LoopOptionsOf(o_);
  loop_options.bf16 = flags_.bf16;
  const ddpm::Inputs inputs = ddpm::MakeInputs(loop_options, device_);

  UNet net(o_.model);
  net->InitWeights(o_.seed, InitMode::kReference);
  net->to(device_);
  if (o_.channels_last) net->SetChannelsLast(true);
  net->SetFused(flags_.fused);
  if (flags_.fused && flags_.bf16 && o_.phase != Phase::kTrain) {
    // Forwards only: weights cast once instead of by autocast at every call (UNet::HoldWeightsIn).
    const int cast = net->HoldWeightsIn(at::kBFloat16);
    const std::string line = absl::StrCat(cast, " conv/linear weights and biases held in BFloat16 (forward only)");
    flags_.note = flags_.note.empty() ? line : absl::StrCat(flags_.note, "; ", line);
  }
  flags_.channels_last = false;
  for (const torch::Tensor& p : net->parameters()) {
    if (p.dim() == 5) {  // read back from the first conv weight
      flags_.channels_last =
          p.is_contiguous(at::MemoryFormat::ChannelsLast3d) && !p.is_contiguous(at::MemoryFormat::Contiguous);
      break;
    }
  }
  int64_t counted = 0;
  for (const torch::Tensor& p : net->parameters()) counted += p.numel();
  if (counted != parameter_count_) {
    return absl::InternalError(
        absl::StrCat("model has ", counted, " parameters but the plan counts ", parameter_count_));
  }
  denoiser_ = std::make_unique<UNetDenoiser>(std::move(net), inputs, o_.channels_last);
  MEDPROF_ASSIGN_OR_RETURN(loop_, ddpm::Loop::Create(loop_options, device_, inputs.x0, denoiser_.get()));
  return absl::OkStatus();
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
  const ddpm::Loop::NoisyInput fixed = loop_->FixedForwardInput();
  const std::vector<int64_t>& t_host = fixed.t_host;
  denoiser_->SetNoisyInput(fixed.x_t);
  UNet& net = denoiser_->net();

  // Dense weights for the check; the model's own are restored below.
  std::vector<torch::Tensor> saved;
  {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& p : net->parameters()) saved.push_back(p.detach().clone());
  }
  net->InitWeights(o_.seed, InitMode::kDense);
  torch::Tensor output;
  {
    torch::NoGradGuard no_grad;
    output = net->forward(denoiser_->net_input(), fixed.t);
  }

  std::vector<float> weights;
  std::ostringstream params_json;
  int64_t offset = 0;
  bool first = true;
  for (const auto& item : net->named_parameters()) {
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
    const std::vector<torch::Tensor> params = net->parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(saved[i]);
  }
  const std::vector<float> input = ToHost(denoiser_->net_input());
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
       << "  \"output_fnv1a64\": \"" << absl::StrFormat("%016x", ddpm::Fnv1a64(out)) << "\",\n"
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
