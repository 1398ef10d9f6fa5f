#include "common/workload_config.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/proto_json.h"
#include "common/sha256.h"

namespace medprof::config {
namespace {

absl::Status OutOfRange(absl::string_view field, double value, absl::string_view allowed) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", value, " is out of range (allowed ", allowed, ")"));
}

absl::Status CheckRange(absl::string_view field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) return OutOfRange(field, static_cast<double>(v), absl::StrCat(lo, "..", hi));
  return absl::OkStatus();
}

absl::Status CheckEdge(absl::string_view field, int v, int multiple) {
  if (v < limits::kMinVolume || v > limits::kMaxVolume || v % multiple != 0) {
    return OutOfRange(field, v,
                      absl::StrCat(limits::kMinVolume, "..", limits::kMaxVolume, ", a multiple of ", multiple,
                                   " for a model with this many levels"));
  }
  return absl::OkStatus();
}

// A user model is named by its content: the hash and the file's name are required, the size
// positive; local_path is the worker's business (set by the agent or --model).
absl::Status ValidateModelRef(const v1::WorkloadConfig& c) {
  if (!c.has_model()) return absl::OkStatus();
  const v1::ModelRef& m = c.model();
  if (!IsSha256Hex(m.sha256())) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.sha256: '", m.sha256(), "' is not a SHA-256 (allowed: 64 lowercase hex digits)"));
  }
  if (m.file_name().empty() || m.file_name().find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.file_name: '", m.file_name(), "' is not a file name (allowed: a non-empty base name, no '/')"));
  }
  if (m.size_bytes() == 0) {
    return absl::InvalidArgumentError("model.size_bytes: 0 is out of range (allowed: the file's size, at least 1)");
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& PresetNames() {
  static const std::vector<std::string> names = {"baseline", "opt1", "opt2", "opt12", "bf16", "opt3"};
  return names;
}

std::string PresetList() { return absl::StrJoin(PresetNames(), "|"); }

absl::StatusOr<PresetFlags> PresetFor(std::string_view name) {
  PresetFlags f;
  if (name == "baseline") return f;
  if (name == "opt1") { f.tf32 = true; return f; }
  if (name == "opt2") { f.channels_last = true; return f; }
  if (name == "opt12") { f.tf32 = true; f.channels_last = true; return f; }
  if (name == "bf16") { f.bf16 = true; return f; }
  if (name == "opt3") {
    // NDHWC + fused kernels + bf16 where the GPU has bf16 Tensor Cores; the worker falls back
    // to TF32 (and records the choice) elsewhere.
    f.tf32 = true; f.channels_last = true; f.bf16 = true; f.fused = true;
    return f;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("preset: unknown preset '", absl::string_view(name.data(), name.size()), "' (allowed: ", PresetList(), ")"));
}

void ApplyDefaults(v1::WorkloadConfig* c) {
  if (c->phase() == v1::PHASE_UNSPECIFIED) c->set_phase(v1::PHASE_TRAIN);
  if (!c->has_volume()) c->set_volume(limits::kDefaultVolume);
  if (!c->has_steps()) c->set_steps(limits::kDefaultSteps);
  if (!c->has_warmup()) c->set_warmup(limits::kDefaultWarmup);
  if (!c->has_batch()) c->set_batch(1);
  if (!c->has_base_channels()) c->set_base_channels(limits::kDefaultBaseChannels);
  if (c->channel_mult_size() == 0) {
    for (int m : {1, 1, 2, 3, 4}) c->add_channel_mult(m);
  }
  if (!c->has_res_blocks()) c->set_res_blocks(1);
  if (c->attention_ds_size() == 0) {
    // Med-DDPM's attention_resolutions "16": attention where the feature map is 16 voxels wide,
    // i.e. at downsampling factor input_size / 16 (input_size = the volume's height). When that
    // factor is no level of the model (BraTS: 192 / 16 = 12), only the middle block attends,
    // written as [0].
    // The level count is not validated yet (Validate refuses more than limits::kMaxLevels); clamp it so
    // the shift stays defined for any request.
    const int levels = std::clamp(c->channel_mult_size(), 1, limits::kMaxLevels);
    const int deepest = 1 << (levels - 1);
    const int image = VolumeDims(*c).h;
    const int ds = image / 16;
    const bool is_level = image % 16 == 0 && ds >= 1 && ds <= deepest && (ds & (ds - 1)) == 0;
    c->add_attention_ds(is_level ? ds : 0);
  }
  if (!c->has_in_channels()) c->set_in_channels(3);
  if (!c->has_out_channels()) c->set_out_channels(1);
  if (!c->has_groups()) c->set_groups(std::min(limits::kDefaultGroups, std::max(1, c->base_channels())));
  if (!c->has_grad_accum()) c->set_grad_accum(limits::kDefaultGradAccum);
  if (!c->has_learning_rate()) c->set_learning_rate(limits::kDefaultLearningRate);
  if (!c->has_seed()) c->set_seed(0);
  if (!c->has_sample_steps()) c->set_sample_steps(limits::kDiffusionSteps);
  if (!c->has_cpu_threads()) c->set_cpu_threads(0);
  if (!c->has_metrics_top_k()) c->set_metrics_top_k(limits::kDefaultMetricsTopK);
  if (!c->has_metrics_launches()) c->set_metrics_launches(limits::kDefaultMetricsLaunches);
  if (!c->has_metrics_coverage_pct()) c->set_metrics_coverage_pct(limits::kDefaultMetricsCoveragePct);
  if (!c->has_metrics_max_signatures()) c->set_metrics_max_signatures(limits::kDefaultMetricsMaxSignatures);
  if (!c->has_overhead_pairs()) c->set_overhead_pairs(limits::kDefaultOverheadPairs);
  if (!c->has_sampling()) c->set_sampling(true);
  if (!c->has_trace()) c->set_trace(true);
  if (!c->has_counter_api()) c->set_counter_api("auto");
}

absl::Status Validate(const v1::WorkloadConfig& c) {
  if (c.preset().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("preset: required (allowed: ", PresetList(), ")"));
  }
  if (auto p = PresetFor(c.preset()); !p.ok()) return p.status();
  if (!v1::Phase_IsValid(c.phase()) || c.phase() == v1::PHASE_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("phase: ", static_cast<int>(c.phase()), " is not a phase (allowed: forward|train|sample)"));
  }
  if (c.channel_mult_size() < 1 || c.channel_mult_size() > limits::kMaxLevels) {
    return OutOfRange("channel_mult (number of levels)", c.channel_mult_size(), absl::StrCat("1..", limits::kMaxLevels));
  }
  for (int m : c.channel_mult()) {
    if (m < 1 || m > limits::kMaxMult) return OutOfRange("channel_mult", m, absl::StrCat("1..", limits::kMaxMult, " per level"));
  }
  if (auto s = ValidateModelRef(c); !s.ok()) return s;
  const int levels = c.channel_mult_size();
  const int multiple = 1 << (levels - 1);
  // A user model's volume rule is its own (the worker's dry run finds a volume it cannot take);
  // the multiple of 2^(levels-1) is Med-DDPM's U-Net's.
  const int edge_multiple = c.has_model() ? 1 : multiple;
  if (auto s = CheckEdge("volume", c.volume(), edge_multiple); !s.ok()) return s;
  if (c.has_depth() && c.depth() != 0) { if (auto s = CheckEdge("depth", c.depth(), edge_multiple); !s.ok()) return s; }
  if (c.has_height() && c.height() != 0) { if (auto s = CheckEdge("height", c.height(), edge_multiple); !s.ok()) return s; }
  if (c.has_width() && c.width() != 0) { if (auto s = CheckEdge("width", c.width(), edge_multiple); !s.ok()) return s; }
  if (auto s = CheckRange("steps", c.steps(), 1, limits::kMaxSteps); !s.ok()) return s;
  if (auto s = CheckRange("warmup", c.warmup(), 0, limits::kMaxWarmup); !s.ok()) return s;
  if (auto s = CheckRange("batch", c.batch(), 1, limits::kMaxBatch); !s.ok()) return s;
  if (auto s = CheckRange("base_channels", c.base_channels(), limits::kMinBaseChannels, limits::kMaxBaseChannels); !s.ok()) return s;
  if (auto s = CheckRange("res_blocks", c.res_blocks(), 1, limits::kMaxResBlocks); !s.ok()) return s;
  if (auto s = CheckRange("in_channels", c.in_channels(), 1, limits::kMaxInOutChannels); !s.ok()) return s;
  if (auto s = CheckRange("out_channels", c.out_channels(), 1, limits::kMaxInOutChannels); !s.ok()) return s;
  if (auto s = CheckRange("groups", c.groups(), 1, limits::kMaxGroups); !s.ok()) return s;
  for (int m : c.channel_mult()) {
    const int ch = c.base_channels() * m;
    if (ch % c.groups() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "groups: ", c.groups(), " does not divide the level width ", ch,
          " (base_channels x channel_mult); choose groups dividing every level width"));
    }
  }
  if (c.base_channels() % c.groups() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("groups: ", c.groups(), " does not divide base_channels ",
                                                   c.base_channels()));
  }
  for (int ds : c.attention_ds()) {
    if (ds == 0 && c.attention_ds_size() == 1) continue;  // [0]: middle block only
    if (ds < 1 || ds > multiple || (ds & (ds - 1)) != 0) {
      return OutOfRange("attention_ds", ds,
                        absl::StrCat("a power of two, 1..", multiple, "; or a single 0 for middle-block attention only"));
    }
  }
  if (auto s = CheckRange("grad_accum", c.grad_accum(), 1, limits::kMaxGradAccum); !s.ok()) return s;
  if (!(c.learning_rate() > 0.0 && c.learning_rate() <= 1.0)) {
    return OutOfRange("learning_rate", c.learning_rate(), "greater than 0, at most 1");
  }
  if (auto s = CheckRange("sample_steps", c.sample_steps(), 1, limits::kDiffusionSteps); !s.ok()) return s;
  if (!v1::DeviceKind_IsValid(c.device())) {
    return absl::InvalidArgumentError(absl::StrCat("device: ", static_cast<int>(c.device()),
                                                   " is not a device kind (allowed: auto|cpu|cuda)"));
  }
  if (auto s = CheckRange("cpu_threads", c.cpu_threads(), 0, limits::kMaxCpuThreads); !s.ok()) return s;
  if (auto s = CheckRange("metrics_top_k", c.metrics_top_k(), 0, limits::kMaxMetricsTopK); !s.ok()) return s;
  if (auto s = CheckRange("metrics_launches", c.metrics_launches(), 1, limits::kMaxMetricsLaunches); !s.ok()) return s;
  if (auto s = CheckRange("metrics_coverage_pct", c.metrics_coverage_pct(), limits::kMinMetricsCoveragePct, 100); !s.ok())
    return s;
  if (auto s = CheckRange("metrics_max_signatures", c.metrics_max_signatures(), 1, limits::kMaxMetricsMaxSignatures);
      !s.ok())
    return s;
  if (auto s = CheckRange("overhead_pairs", c.overhead_pairs(), 0, limits::kMaxOverheadPairs); !s.ok()) return s;
  if (c.counter_api() != "auto" && c.counter_api() != "range" && c.counter_api() != "legacy") {
    return absl::InvalidArgumentError(
        absl::StrCat("counter_api: '", c.counter_api(), "' is not a counter API (allowed: auto|range|legacy)"));
  }
  return absl::OkStatus();
}

PresetFlags EffectiveFlags(const v1::WorkloadConfig& c) {
  PresetFlags f = PresetFor(c.preset()).value_or(PresetFlags{});
  if (c.has_tf32()) f.tf32 = c.tf32();
  if (c.has_channels_last()) f.channels_last = c.channels_last();
  if (c.has_bf16()) f.bf16 = c.bf16();
  if (c.has_fused()) f.fused = c.fused();
  return f;
}

Dims VolumeDims(const v1::WorkloadConfig& c) {
  const int v = c.has_volume() ? c.volume() : limits::kDefaultVolume;
  Dims d{v, v, v};
  if (c.has_depth() && c.depth() > 0) d.d = c.depth();
  if (c.has_height() && c.height() > 0) d.h = c.height();
  if (c.has_width() && c.width() > 0) d.w = c.width();
  return d;
}

std::string PhaseName(v1::Phase phase) {
  const std::string name = EnumSpelling(v1::Phase_descriptor(), phase);
  return name == "unknown" ? "unspecified" : name;
}

absl::StatusOr<v1::Phase> ParsePhase(std::string_view text) {
  if (text == "forward" || text == "fwd") return v1::PHASE_FORWARD;
  if (text == "train") return v1::PHASE_TRAIN;
  if (text == "sample") return v1::PHASE_SAMPLE;
  return absl::InvalidArgumentError(
      absl::StrCat("phase: unknown phase '", absl::string_view(text.data(), text.size()), "' (allowed: forward|train|sample)"));
}

}  // namespace medprof::config
