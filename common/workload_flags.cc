#include "common/workload_flags.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <functional>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/sha256.h"
#include "common/workload_config.h"

namespace medprof::config {
namespace {

using Setter = std::function<absl::Status(const std::string& text, v1::WorkloadConfig* c)>;

// One flag: its names (canonical first, then old spellings), the value's shape in --help
// ("" for a switch without a value), the help text, and how its text reaches the config.
struct FlagSpec {
  std::string names;
  std::string type_name;
  std::string help;
  Setter set;
  std::string excludes;  // the flag this switch cannot be combined with ("" = none)
};

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// "(default D; allowed A)" closes every help text, so both commands print the same.
std::string Help(const std::string& what, const std::string& default_text, const std::string& allowed) {
  return absl::StrCat(what, " (default ", default_text, "; allowed ", allowed, ")");
}

std::string OldSpelling(const std::string& old_name) {
  return absl::StrCat("; ", old_name, " is the old spelling, accepted for one release");
}

FlagSpec IntFlag(const std::string& name, void (v1::WorkloadConfig::*set)(int32_t), const std::string& what,
                 const std::string& default_text, const std::string& allowed, const std::string& rule = "") {
  Setter setter = [name, set, allowed](const std::string& text, v1::WorkloadConfig* c) {
    int32_t v = 0;
    if (!absl::SimpleAtoi(text, &v)) {
      return Invalid(absl::StrCat(name, ": '", text, "' is not an integer (allowed ", allowed, ")"));
    }
    (c->*set)(v);
    return absl::OkStatus();
  };
  return {name, "N", Help(what, default_text, allowed + rule), std::move(setter), ""};
}

FlagSpec IntListFlag(const std::string& name, void (v1::WorkloadConfig::*add)(int32_t),
                     void (v1::WorkloadConfig::*clear)(), const std::string& what, const std::string& default_text,
                     const std::string& allowed) {
  Setter setter = [name, add, clear](const std::string& text, v1::WorkloadConfig* c) {
    (c->*clear)();
    for (absl::string_view item : absl::StrSplit(text, ',')) {
      item = absl::StripAsciiWhitespace(item);
      int32_t v = 0;
      if (!absl::SimpleAtoi(item, &v)) {
        return Invalid(absl::StrCat(name, ": '", item,
                                    "' is not an integer (expected a comma-separated list of integers, e.g. 1,2,4)"));
      }
      (c->*add)(v);
    }
    return absl::OkStatus();
  };
  return {name, "N,N..", Help(what, default_text, allowed), std::move(setter), ""};
}

// A switch: `on` and `off` set the optional bool; each excludes the other.
std::vector<FlagSpec> SwitchPair(const std::string& name, void (v1::WorkloadConfig::*set)(bool),
                                 const std::string& on_help, const std::string& off_help) {
  const std::string on = "--" + name, off = "--no-" + name;
  auto setter = [set](bool value) {
    return [set, value](const std::string&, v1::WorkloadConfig* c) {
      (c->*set)(value);
      return absl::OkStatus();
    };
  };
  return {{on, "", on_help + " (default: the preset's)", setter(true), off},
          {off, "", off_help + " (default: the preset's)", setter(false), on}};
}

FlagSpec Switch(const std::string& name, void (v1::WorkloadConfig::*set)(bool), bool value, const std::string& help) {
  return {name, "", help,
          [set, value](const std::string&, v1::WorkloadConfig* c) {
            (c->*set)(value);
            return absl::OkStatus();
          },
          ""};
}

absl::Status SetPhase(const std::string& text, v1::WorkloadConfig* c) {
  absl::StatusOr<v1::Phase> phase = ParsePhase(text);
  if (!phase.ok()) return Invalid(absl::StrCat("--", phase.status().message()));  // "phase: ..." names the field
  c->set_phase(*phase);
  return absl::OkStatus();
}

absl::Status SetDevice(const std::string& text, v1::WorkloadConfig* c) {
  if (text == "auto") c->set_device(v1::DEVICE_KIND_UNSPECIFIED);
  else if (text == "cpu") c->set_device(v1::DEVICE_KIND_CPU);
  else if (text == "cuda") c->set_device(v1::DEVICE_KIND_CUDA);
  else return Invalid(absl::StrCat("--device: '", text, "' is not a device (allowed: auto|cpu|cuda)"));
  return absl::OkStatus();
}

absl::Status SetLearningRate(const std::string& text, v1::WorkloadConfig* c) {
  double lr = 0;
  if (!absl::SimpleAtod(text, &lr)) {
    return Invalid(absl::StrCat("--learning-rate: '", text, "' is not a number (allowed: greater than 0, at most 1)"));
  }
  c->set_learning_rate(lr);
  return absl::OkStatus();
}

absl::Status SetSeed(const std::string& text, v1::WorkloadConfig* c) {
  uint64_t seed = 0;
  if (!absl::SimpleAtoi(text, &seed)) {
    return Invalid(absl::StrCat("--seed: '", text, "' is not a non-negative integer (allowed 0..",
                                std::numeric_limits<uint64_t>::max(), ")"));
  }
  c->set_seed(seed);
  return absl::OkStatus();
}

// --model FILE: the file as the job names it (content hash, base name, size) and where this
// machine reads it. Submit uploads the file by that hash; the worker reads local_path.
absl::Status SetModel(const std::string& path, v1::WorkloadConfig* c) {
  absl::StatusOr<std::string> sha256 = Sha256OfFile(path);
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!sha256.ok() || ec) {
    return Invalid(absl::StrCat("--model: cannot read '", path, "': ",
                                !sha256.ok() ? std::string(sha256.status().message()) : ec.message()));
  }
  v1::ModelRef* m = c->mutable_model();
  m->set_sha256(*sha256);
  m->set_file_name(std::filesystem::path(path).filename().string());
  m->set_size_bytes(static_cast<uint64_t>(size));
  m->set_local_path(std::filesystem::absolute(path, ec).string());
  return absl::OkStatus();
}

void Append(std::vector<FlagSpec>* to, std::vector<FlagSpec> more) {
  for (FlagSpec& f : more) to->push_back(std::move(f));
}

// The run and the model's shape, in the order of the proto.
std::vector<FlagSpec> ShapeFlags() {
  using C = v1::WorkloadConfig;
  const std::string edge = absl::StrCat(limits::kMinVolume, "..", limits::kMaxVolume), axis = "0 or " + edge;
  return {
      {"--phase", "PHASE", "what one step runs: forward|train|sample (default train)", SetPhase, ""},
      IntFlag("--volume", &C::set_volume, "cubic volume edge in voxels", absl::StrCat(limits::kDefaultVolume), edge,
              ", a multiple of 2^(levels-1): 16 at five levels"),
      IntFlag("--depth", &C::set_depth, "volume depth, overriding --volume on that axis", "0 = --volume", axis),
      IntFlag("--height", &C::set_height, "volume height, overriding --volume on that axis", "0 = --volume", axis),
      IntFlag("--width", &C::set_width, "volume width, overriding --volume on that axis", "0 = --volume", axis),
      IntFlag("--steps", &C::set_steps, "measured steps per run; compare's interval of a median needs 5 or more",
              absl::StrCat(limits::kDefaultSteps), absl::StrCat("1..", limits::kMaxSteps)),
      IntFlag("--warmup", &C::set_warmup, "unmeasured warm-up steps before them", absl::StrCat(limits::kDefaultWarmup),
              absl::StrCat("0..", limits::kMaxWarmup)),
      IntFlag("--batch", &C::set_batch, "batch size", "1", absl::StrCat("1..", limits::kMaxBatch)),
      IntFlag("--base-channels", &C::set_base_channels, "U-Net base width", absl::StrCat(limits::kDefaultBaseChannels),
              absl::StrCat(limits::kMinBaseChannels, "..", limits::kMaxBaseChannels)),
      IntListFlag("--channel-mult", &C::add_channel_mult, &C::clear_channel_mult, "width multipliers per level",
                  "1,1,2,3,4", absl::StrCat("1..", limits::kMaxMult, " each, at most ", limits::kMaxLevels, " levels")),
      IntFlag("--res-blocks", &C::set_res_blocks, "ResBlocks per encoder level", "1",
              absl::StrCat("1..", limits::kMaxResBlocks)),
      IntListFlag("--attention-ds", &C::add_attention_ds, &C::clear_attention_ds,
                  "downsampling factors whose level gets attention, e.g. 8", "height/16, 8 at 128^3",
                  "powers of two up to the deepest level's factor, or a single 0: middle block only"),
      IntFlag("--in-channels", &C::set_in_channels, "input channels (image + masks)", "3",
              absl::StrCat("1..", limits::kMaxInOutChannels)),
      IntFlag("--out-channels", &C::set_out_channels, "output channels", "1", absl::StrCat("1..", limits::kMaxInOutChannels)),
      IntFlag("--groups", &C::set_groups, "GroupNorm groups", absl::StrCat(limits::kDefaultGroups, ", or --base-channels when smaller"),
              absl::StrCat("1..", limits::kMaxGroups), ", dividing every level width"),
  };
}

// Training, sampling, the preset's switches, where it runs, and the profiler's layers.
std::vector<FlagSpec> RunFlags() {
  using C = v1::WorkloadConfig;
  std::vector<FlagSpec> flags = {
      IntFlag("--grad-accum", &C::set_grad_accum, "gradient accumulation micro-steps",
              absl::StrCat(limits::kDefaultGradAccum), absl::StrCat("1..", limits::kMaxGradAccum)),
      {"--learning-rate,--lr", "X",
       Help("Adam learning rate", "1e-05", "greater than 0, at most 1" + OldSpelling("--lr")), SetLearningRate, ""},
      {"--seed", "N", Help("seed of the synthetic inputs, weights and noise", "0", "0..2^64-1"), SetSeed, ""},
      IntFlag("--sample-steps", &C::set_sample_steps, "denoising steps per sample (--phase sample)",
              absl::StrCat(limits::kDiffusionSteps), absl::StrCat("1..", limits::kDiffusionSteps)),
  };
  Append(&flags, SwitchPair("tf32", &C::set_tf32, "TF32 Tensor Cores on", "TF32 off: strict FP32"));
  Append(&flags, SwitchPair("channels-last", &C::set_channels_last, "NDHWC (ChannelsLast3d) on", "NDHWC off: NCDHW"));
  Append(&flags, SwitchPair("bf16", &C::set_bf16, "bf16 autocast on", "bf16 autocast off"));
  Append(&flags, SwitchPair("fused", &C::set_fused, "fused GroupNorm+SiLU kernels on", "fused kernels off"));
  Append(&flags, {
      {"--device", "DEVICE", "auto|cpu|cuda (default auto: the GPU when usable)", SetDevice, ""},
      {"--model", "FILE",
       Help("a TorchScript denoiser, forward(x, t[, cond]) -> noise like x, run instead of Med-DDPM "
            "(image channels = --out-channels, cond channels = --in-channels minus them)",
            "none: Med-DDPM", "a torch.jit.save file"),
       SetModel, ""},
      IntFlag("--cpu-threads,--threads", &C::set_cpu_threads, "CPU threads for LibTorch", "0 = LibTorch's",
              absl::StrCat("0..", limits::kMaxCpuThreads), OldSpelling("--threads")),
      Switch("--metrics", &C::set_metrics, true, "run the range-profiler metrics layer (default off)"),
      IntFlag("--metrics-top-k", &C::set_metrics_top_k, "kernels the metrics layer profiles",
              absl::StrCat(limits::kDefaultMetricsTopK), absl::StrCat("0..", limits::kMaxMetricsTopK)),
      IntFlag("--overhead-pairs", &C::set_overhead_pairs, "trace on/off step pairs measuring the trace overhead",
              absl::StrCat(limits::kDefaultOverheadPairs, ", 0 = skip"), absl::StrCat("0..", limits::kMaxOverheadPairs)),
      Switch("--no-sampling", &C::set_sampling, false, "no PC/PM sampling (default: sampling where permitted)"),
      Switch("--no-trace", &C::set_trace, false, "no CUPTI at all (ops only), e.g. under Nsight Compute (default: trace on)"),
      {"--counter-api", "API",
       "metrics layer API: auto (range profiler from CC 7.5, legacy Profiling API on V100) | range | legacy "
       "(default auto)",
       [](const std::string& text, C* c) {
         c->set_counter_api(text);  // config::Validate names the allowed values
         return absl::OkStatus();
       },
       ""},
      IntFlag("--metrics-launches", &C::set_metrics_launches,
              "steps in which each such kernel's launch is profiled; the median per metric is stored",
              absl::StrCat(limits::kDefaultMetricsLaunches), absl::StrCat("1..", limits::kMaxMetricsLaunches)),
      IntFlag("--metrics-coverage-pct", &C::set_metrics_coverage_pct,
              "share of each kernel's time whose launch signatures are profiled, largest first",
              absl::StrCat(limits::kDefaultMetricsCoveragePct), absl::StrCat(limits::kMinMetricsCoveragePct, "..100")),
      IntFlag("--metrics-max-signatures", &C::set_metrics_max_signatures, "signatures profiled per kernel at most",
              absl::StrCat(limits::kDefaultMetricsMaxSignatures), absl::StrCat("1..", limits::kMaxMetricsMaxSignatures)),
  });
  return flags;
}

const std::vector<FlagSpec>& Flags() {
  static const std::vector<FlagSpec> flags = [] {
    std::vector<FlagSpec> all = ShapeFlags();
    Append(&all, RunFlags());
    return all;
  }();
  return flags;
}

}  // namespace

void WorkloadFlags::Register(CLI::App* app) {
  const std::vector<FlagSpec>& flags = Flags();
  text_.assign(flags.size(), std::string());  // sized once: CLI11 keeps pointers to the strings
  options_.clear();
  for (size_t i = 0; i < flags.size(); ++i) {
    const FlagSpec& f = flags[i];
    CLI::Option* o = f.type_name.empty() ? app->add_flag(f.names, f.help)
                                         : app->add_option(f.names, text_[i], f.help)->type_name(f.type_name);
    options_.push_back(o->group(kWorkloadFlagGroup));
  }
  for (size_t i = 0; i < flags.size(); ++i) {
    if (!flags[i].excludes.empty()) options_[i]->excludes(flags[i].excludes);
  }
}

absl::Status WorkloadFlags::Apply(v1::WorkloadConfig* config) const {
  const std::vector<FlagSpec>& flags = Flags();
  for (size_t i = 0; i < options_.size(); ++i) {
    if (options_[i]->count() == 0) continue;
    if (absl::Status s = flags[i].set(text_[i], config); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace medprof::config
