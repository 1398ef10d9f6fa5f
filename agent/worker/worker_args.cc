#include "agent/worker/worker_args.h"

#include <CLI/CLI.hpp>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status.h"
#include "common/workload_config.h"
#include "common/workload_flags.h"

namespace medprof::worker {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

}  // namespace

absl::StatusOr<v1::WorkloadConfig> ReadJobFile(const std::string& path) {
  std::string bytes;
  if (const int err = ReadWholeFile(path, &bytes); err != 0) {
    return Invalid(absl::StrCat("--job: cannot open ", path, ": ", std::strerror(err)));
  }
  v1::WorkloadConfig config;
  if (!config.ParseFromString(bytes)) {
    return Invalid(absl::StrCat("--job: ", path, " is not a binary medprof.v1.WorkloadConfig"));
  }
  return config;
}

absl::StatusOr<WorkerArgs> ParseArgs(const std::vector<std::string>& args) {
  CLI::App app{"medprof-worker: runs one Med-DDPM profiling job and writes its results "
               "(length-delimited medprof.v1.WorkerMessage records) to --out or --result-fd",
               "medprof-worker"};
  app.set_help_flag("-h,--help", "Print this help and exit");

  std::string preset, job, out, log_level = "info";
  int result_fd = -1;
  bool describe = false, version = false;
  const std::string presets = config::PresetList();
  auto* o_preset = app.add_option("--preset", preset, "Preset: " + presets + " (required unless --job; --describe defaults to baseline)");
  config::WorkloadFlags workload;
  workload.Register(&app);
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
  MEDPROF_RETURN_IF_ERROR(workload.Apply(&c));

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
