#include "agent/worker/worker_args.h"

#include <fcntl.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/workload_config.h"

namespace medprof::worker {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

}  // namespace

absl::StatusOr<v1::WorkloadConfig> ReadJobFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Invalid(absl::StrCat("--job: cannot open ", path, ": ", std::strerror(errno)));
  std::stringstream bytes;
  bytes << in.rdbuf();
  v1::WorkloadConfig config;
  if (!config.ParseFromString(bytes.str())) {
    return Invalid(absl::StrCat("--job: ", path, " is not a binary medprof.v1.WorkloadConfig"));
  }
  return config;
}

absl::StatusOr<WorkerArgs> ParseArgs(const std::vector<std::string>& args) {
  CLI::App app{"medprof-worker: runs one Med-DDPM profiling job and writes its results "
               "(length-delimited medprof.v1.WorkerMessage records) to --out or --result-fd",
               "medprof-worker"};
  app.set_help_flag("-h,--help", "Print this help and exit");

  std::string preset, phase, device = "auto", job, out, log_level = "info";
  int volume = 0, depth = 0, height = 0, width = 0, steps = 0, warmup = 0, batch = 0;
  int base_channels = 0, res_blocks = 0, in_channels = 0, out_channels = 0, groups = 0;
  int grad_accum = 0, sample_steps = 0, threads = 0, result_fd = -1, metrics_top_k = 0, metrics_launches = 0,
      metrics_coverage = 0, metrics_signatures = 0;
  double lr = 0;
  uint64_t seed = 0;
  std::vector<int> channel_mult, attention_ds;
  bool tf32 = false, no_tf32 = false, cl = false, no_cl = false, bf16 = false, no_bf16 = false;
  bool fused = false, no_fused = false, describe = false, version = false, metrics = false;

  const std::string presets = config::PresetList();
  auto* o_preset = app.add_option("--preset", preset, "Preset: " + presets + " (required unless --job; --describe defaults to baseline)");
  auto* o_phase = app.add_option("--phase", phase, "Phase: forward|train|sample (default train)");
  auto* o_volume = app.add_option("--volume", volume, "Cubic volume edge in voxels (default 128)");
  auto* o_depth = app.add_option("--depth", depth, "Volume depth (overrides --volume on that axis)");
  auto* o_height = app.add_option("--height", height, "Volume height");
  auto* o_width = app.add_option("--width", width, "Volume width");
  auto* o_steps = app.add_option("--steps", steps, "Measured steps (default 10)");
  auto* o_warmup = app.add_option("--warmup", warmup, "Unmeasured warm-up steps (default 2)");
  auto* o_batch = app.add_option("--batch", batch, "Batch size (default 1)");
  auto* o_base = app.add_option("--base-channels", base_channels, "U-Net base width (default 64)");
  auto* o_mult = app.add_option("--channel-mult", channel_mult, "Width multipliers per level, e.g. 1,1,2,3,4")
                     ->delimiter(',');
  auto* o_res = app.add_option("--res-blocks", res_blocks, "ResBlocks per encoder level (default 1)");
  auto* o_attn = app.add_option("--attention-ds", attention_ds, "Downsampling factors with attention, e.g. 8")
                     ->delimiter(',');
  auto* o_in = app.add_option("--in-channels", in_channels, "Input channels (default 3)");
  auto* o_out_ch = app.add_option("--out-channels", out_channels, "Output channels (default 1)");
  auto* o_groups = app.add_option("--groups", groups, "GroupNorm groups (default 32)");
  auto* o_accum = app.add_option("--grad-accum", grad_accum, "Gradient accumulation micro-steps (default 2)");
  auto* o_lr = app.add_option("--lr", lr, "Adam learning rate (default 1e-5)");
  auto* o_seed = app.add_option("--seed", seed, "Seed of inputs, weights and noise (default 0)");
  auto* o_sample = app.add_option("--sample-steps", sample_steps, "Denoising steps per sample (default 250)");
  auto* f_tf32 = app.add_flag("--tf32", tf32, "TF32 on (overrides the preset)");
  auto* f_no_tf32 = app.add_flag("--no-tf32", no_tf32, "TF32 off (strict FP32)");
  auto* f_cl = app.add_flag("--channels-last", cl, "NDHWC (ChannelsLast3d) on");
  auto* f_no_cl = app.add_flag("--no-channels-last", no_cl, "NDHWC off (NCDHW)");
  auto* f_bf16 = app.add_flag("--bf16", bf16, "bf16 autocast on");
  auto* f_no_bf16 = app.add_flag("--no-bf16", no_bf16, "bf16 autocast off");
  auto* f_fused = app.add_flag("--fused", fused, "Fused GroupNorm+SiLU kernels on");
  auto* f_no_fused = app.add_flag("--no-fused", no_fused, "Fused kernels off");
  f_tf32->excludes(f_no_tf32);
  f_cl->excludes(f_no_cl);
  f_bf16->excludes(f_no_bf16);
  f_fused->excludes(f_no_fused);
  auto* o_device = app.add_option("--device", device, "auto|cpu|cuda (default auto: the GPU when usable)");
  auto* o_threads = app.add_option("--threads", threads, "CPU threads for LibTorch (default 0 = LibTorch's)");
  auto* f_metrics = app.add_flag("--metrics", metrics, "Request the range-profiler metrics layer");
  auto* o_topk = app.add_option("--metrics-top-k", metrics_top_k, "Kernels the metrics layer profiles (default 20)");
  auto* o_launches = app.add_option("--metrics-launches", metrics_launches,
                                    "Steps in which the metrics layer profiles each kernel's launch; the median "
                                    "per metric is stored (default 3, 1..9)");
  auto* o_coverage = app.add_option("--metrics-coverage-pct", metrics_coverage,
                                    "Share of each kernel's time whose launch signatures are profiled, in order of "
                                    "time (default 98, 50..100)");
  auto* o_signatures = app.add_option("--metrics-max-signatures", metrics_signatures,
                                      "At most this many signatures profiled per kernel (default 32, 1..64)");
  int overhead_pairs = 0;
  bool no_sampling = false, no_trace = false;
  auto* o_pairs = app.add_option("--overhead-pairs", overhead_pairs,
                                 "Trace on/off step pairs measuring the trace overhead (default 3, 0 = skip)");
  auto* f_no_sampling = app.add_flag("--no-sampling", no_sampling, "No PC/PM sampling");
  std::string counter_api;
  auto* o_counter_api = app.add_option("--counter-api", counter_api,
                                       "Metrics layer API: auto (range profiler from CC 7.5, legacy Profiling API "
                                       "on V100) | range | legacy");
  auto* f_no_trace = app.add_flag("--no-trace", no_trace,
                                  "No CUPTI at all (ops only), e.g. to run under Nsight Compute");
  app.add_option("--job", job, "Binary medprof.v1.WorkloadConfig file; flags override its fields");
  auto* o_out = app.add_option("--out", out, "Write results to this file");
  auto* o_fd = app.add_option("--result-fd", result_fd, "Write results to this open file descriptor");
  app.add_flag("--describe", describe, "Print the effective configuration as JSON and exit");
  std::string decode;
  auto* o_decode = app.add_option("--decode", decode,
                                  "Print a results file written with --out as JSON, one record per line, and exit");
  app.add_option("--log-level", log_level, "debug|info|warn|error|off (default info; logs go to stderr)");
  app.add_flag("--version", version, "Print the version and exit");

  std::vector<std::string> argv_storage;
  argv_storage.reserve(args.size() + 1);
  argv_storage.push_back("medprof-worker");
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<const char*> argv;
  for (const auto& a : argv_storage) argv.push_back(a.c_str());

  WorkerArgs out_args;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    out_args.action = WorkerArgs::Action::kHelp;
    out_args.help = app.help();
    return out_args;
  } catch (const CLI::ParseError& e) {
    return Invalid(e.what());
  }
  if (version) {
    out_args.action = WorkerArgs::Action::kVersion;
    return out_args;
  }
  if (!logging::ParseLevel(log_level, &out_args.log_level)) {
    return Invalid(absl::StrCat("--log-level: unknown level '", log_level,
                                "' (allowed: debug|info|warn|error|off)"));
  }

  v1::WorkloadConfig& c = out_args.config;
  if (!job.empty()) {
    auto parsed = ReadJobFile(job);
    if (!parsed.ok()) return parsed.status();
    c = *std::move(parsed);
    out_args.job_path = job;
  } else if (o_preset->count() == 0) {
    if (o_decode->count()) {
      out_args.action = WorkerArgs::Action::kDecode;
      out_args.decode_path = decode;
      return out_args;
    }
    if (!describe) {
      return Invalid(absl::StrCat("--preset is required unless --job is given (allowed: ", presets, ")"));
    }
    c.set_preset("baseline");  // --describe alone describes the published model under the baseline preset
  }
  if (o_preset->count()) c.set_preset(preset);
  if (o_phase->count()) {
    auto p = config::ParsePhase(phase);
    if (!p.ok()) return p.status();
    c.set_phase(*p);
  }
  if (o_volume->count()) c.set_volume(volume);
  if (o_depth->count()) c.set_depth(depth);
  if (o_height->count()) c.set_height(height);
  if (o_width->count()) c.set_width(width);
  if (o_steps->count()) c.set_steps(steps);
  if (o_warmup->count()) c.set_warmup(warmup);
  if (o_batch->count()) c.set_batch(batch);
  if (o_base->count()) c.set_base_channels(base_channels);
  if (o_mult->count()) {
    c.clear_channel_mult();
    for (int m : channel_mult) c.add_channel_mult(m);
  }
  if (o_res->count()) c.set_res_blocks(res_blocks);
  if (o_attn->count()) {
    c.clear_attention_ds();
    for (int ds : attention_ds) c.add_attention_ds(ds);
  }
  if (o_in->count()) c.set_in_channels(in_channels);
  if (o_out_ch->count()) c.set_out_channels(out_channels);
  if (o_groups->count()) c.set_groups(groups);
  if (o_accum->count()) c.set_grad_accum(grad_accum);
  if (o_lr->count()) c.set_learning_rate(lr);
  if (o_seed->count()) c.set_seed(seed);
  if (o_sample->count()) c.set_sample_steps(sample_steps);
  if (f_tf32->count()) c.set_tf32(true);
  if (f_no_tf32->count()) c.set_tf32(false);
  if (f_cl->count()) c.set_channels_last(true);
  if (f_no_cl->count()) c.set_channels_last(false);
  if (f_bf16->count()) c.set_bf16(true);
  if (f_no_bf16->count()) c.set_bf16(false);
  if (f_fused->count()) c.set_fused(true);
  if (f_no_fused->count()) c.set_fused(false);
  if (o_device->count()) {
    if (device == "auto") c.set_device(v1::DEVICE_KIND_UNSPECIFIED);
    else if (device == "cpu") c.set_device(v1::DEVICE_KIND_CPU);
    else if (device == "cuda") c.set_device(v1::DEVICE_KIND_CUDA);
    else return Invalid(absl::StrCat("--device: unknown device '", device, "' (allowed: auto|cpu|cuda)"));
  }
  if (o_threads->count()) c.set_cpu_threads(threads);
  if (f_metrics->count()) c.set_metrics(true);
  if (o_topk->count()) c.set_metrics_top_k(metrics_top_k);
  if (o_launches->count()) c.set_metrics_launches(metrics_launches);
  if (o_coverage->count()) c.set_metrics_coverage_pct(metrics_coverage);
  if (o_signatures->count()) c.set_metrics_max_signatures(metrics_signatures);
  if (o_pairs->count()) c.set_overhead_pairs(overhead_pairs);
  if (f_no_sampling->count()) c.set_sampling(false);
  if (f_no_trace->count()) c.set_trace(false);
  if (o_counter_api->count()) c.set_counter_api(counter_api);

  out_args.action = describe ? WorkerArgs::Action::kDescribe : WorkerArgs::Action::kRun;
  const bool has_out = o_out->count() > 0, has_fd = o_fd->count() > 0;
  if (has_out && has_fd) return Invalid("--out and --result-fd: give exactly one result channel, not both");
  if (out_args.action == WorkerArgs::Action::kRun && !has_out && !has_fd) {
    return Invalid("--out FILE or --result-fd N is required (results never go to stdout)");
  }
  if (has_out) {
    if (out.empty()) return Invalid("--out: empty path");
    out_args.out_path = out;
  }
  if (has_fd) {
    if (result_fd < 0) return Invalid(absl::StrCat("--result-fd: ", result_fd, " is not a file descriptor (allowed: >= 0)"));
    if (result_fd <= 2) {
      return Invalid(absl::StrCat("--result-fd: ", result_fd,
                                  " is stdin/stdout/stderr (allowed: 3 or above; results never share stdout)"));
    }
    out_args.result_fd = result_fd;
  }
  return out_args;
}

}  // namespace medprof::worker
