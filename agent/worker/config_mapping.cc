#include "agent/worker/config_mapping.h"

#include "common/workload_config.h"

namespace medprof::worker {
namespace {

ddpm::Device ToDevice(v1::DeviceKind device) {
  switch (device) {
    case v1::DEVICE_KIND_CPU: return ddpm::Device::kCpu;
    case v1::DEVICE_KIND_CUDA: return ddpm::Device::kCuda;
    default: return ddpm::Device::kAuto;
  }
}

// The DDPM knobs every workload shares; bf16 is left to the workload (the effective choice).
ddpm::LoopOptions ToLoopOptions(const v1::WorkloadConfig& c) {
  ddpm::LoopOptions l;
  switch (c.phase()) {
    case v1::PHASE_FORWARD: l.phase = ddpm::Phase::kForward; break;
    case v1::PHASE_SAMPLE: l.phase = ddpm::Phase::kSample; break;
    default: l.phase = ddpm::Phase::kTrain; break;
  }
  const config::Dims dims = config::VolumeDims(c);
  l.depth = dims.d;
  l.height = dims.h;
  l.width = dims.w;
  l.batch = c.batch();
  l.image_channels = c.out_channels();
  l.cond_channels = c.in_channels() - c.out_channels();
  l.steps = c.steps();
  l.warmup = c.warmup();
  l.grad_accum = c.grad_accum();
  l.learning_rate = c.learning_rate();
  l.seed = c.seed();
  l.sample_steps = c.sample_steps();
  return l;
}

// The preset's math and layout flags, the device and the CPU threads: the same fields on both
// workloads' options.
template <typename Options>
void SetPresetAndDevice(const v1::WorkloadConfig& c, v1::DeviceKind device, Options& o) {
  const config::PresetFlags flags = config::EffectiveFlags(c);
  o.tf32 = flags.tf32;
  o.channels_last = flags.channels_last;
  o.bf16 = flags.bf16;
  o.fused = flags.fused;
  o.device = ToDevice(device);
  o.cpu_threads = c.cpu_threads();
}

}  // namespace

absl::StatusOr<v1::WorkloadConfig> Effective(v1::WorkloadConfig config) {
  config::ApplyDefaults(&config);
  if (absl::Status s = config::Validate(config); !s.ok()) return s;
  return config;
}

meddpm::WorkloadOptions ToWorkloadOptions(const v1::WorkloadConfig& c, v1::DeviceKind device) {
  meddpm::WorkloadOptions o;
  o.model.in_channels = c.in_channels();
  o.model.out_channels = c.out_channels();
  o.model.base_channels = c.base_channels();
  o.model.channel_mult.assign(c.channel_mult().begin(), c.channel_mult().end());
  o.model.res_blocks = c.res_blocks();
  o.model.attention_ds.clear();
  for (int ds : c.attention_ds()) {
    if (ds > 0) o.model.attention_ds.push_back(ds);  // [0] = no encoder/decoder attention
  }
  o.model.groups = c.groups();
  const ddpm::LoopOptions loop = ToLoopOptions(c);
  o.phase = loop.phase;
  o.depth = loop.depth;
  o.height = loop.height;
  o.width = loop.width;
  o.batch = loop.batch;
  o.steps = loop.steps;
  o.warmup = loop.warmup;
  o.grad_accum = loop.grad_accum;
  o.learning_rate = loop.learning_rate;
  o.seed = loop.seed;
  o.sample_steps = loop.sample_steps;
  SetPresetAndDevice(c, device, o);
  return o;
}

torchscript::Options ToTorchScriptOptions(const v1::WorkloadConfig& c, v1::DeviceKind device) {
  torchscript::Options o;
  o.path = c.model().local_path();
  o.loop = ToLoopOptions(c);
  SetPresetAndDevice(c, device, o);
  return o;
}

}  // namespace medprof::worker
