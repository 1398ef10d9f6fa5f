#include "agent/worker/config_mapping.h"

#include "common/workload_config.h"

namespace medprof::worker {

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
  switch (c.phase()) {
    case v1::PHASE_FORWARD: o.phase = meddpm::Phase::kForward; break;
    case v1::PHASE_SAMPLE: o.phase = meddpm::Phase::kSample; break;
    default: o.phase = meddpm::Phase::kTrain; break;
  }
  const config::Dims dims = config::VolumeDims(c);
  o.depth = dims.d;
  o.height = dims.h;
  o.width = dims.w;
  o.batch = c.batch();
  o.steps = c.steps();
  o.warmup = c.warmup();
  o.grad_accum = c.grad_accum();
  o.learning_rate = c.learning_rate();
  o.seed = c.seed();
  o.sample_steps = c.sample_steps();
  const config::PresetFlags flags = config::EffectiveFlags(c);
  o.tf32 = flags.tf32;
  o.channels_last = flags.channels_last;
  o.bf16 = flags.bf16;
  o.fused = flags.fused;
  switch (device) {
    case v1::DEVICE_KIND_CPU: o.device = meddpm::Device::kCpu; break;
    case v1::DEVICE_KIND_CUDA: o.device = meddpm::Device::kCuda; break;
    default: o.device = meddpm::Device::kAuto; break;
  }
  o.cpu_threads = c.cpu_threads();
  return o;
}

}  // namespace medprof::worker
