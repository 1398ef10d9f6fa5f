#include "agent/worker/worker_args.h"

#include <CLI/CLI.hpp>
#include <cstring>
#include <optional>
#include <string>

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

namespace {

// The worker's flags as CLI11 fills them, with the options whose presence matters.
struct WorkerFlags {
  std::string preset, job, out, decode, log_level = "info";
  int result_fd = -1;
  bool describe = false, version = false;
  config::WorkloadFlags workload;
  CLI::Option* preset_opt = nullptr;
  CLI::Option* out_opt = nullptr;
  CLI::Option* fd_opt = nullptr;
  CLI::Option* decode_opt = nullptr;
};

// Registers every flag on `app`, bound to `f`, which must outlive the parse.
void AddFlags(CLI::App* app, WorkerFlags* f) {
  app->set_help_flag("-h,--help", "Print this help and exit");
  f->preset_opt = app->add_option("--preset", f->preset, "Preset: " + config::PresetList() + " (required unless --job; --describe defaults to baseline)");
  f->workload.Register(app);
  app->add_option("--job", f->job, "Binary medprof.v1.WorkloadConfig file; flags override its fields");
  f->out_opt = app->add_option("--out", f->out, "Write results to this file");
  f->fd_opt = app->add_option("--result-fd", f->result_fd, "Write results to this open file descriptor");
  app->add_flag("--describe", f->describe, "Print the effective configuration as JSON and exit");
  f->decode_opt = app->add_option("--decode", f->decode,
                                  "Print a results file written with --out as JSON, one record per line, and exit");
  app->add_option("--log-level", f->log_level, "debug|info|warn|error|off (default info; logs go to stderr)");
  app->add_flag("--version", f->version, "Print the version and exit");
}

// Runs CLI11 over the arguments (without the program name). Returns the help text when they
// asked for it, nullopt when they parsed, and INVALID_ARGUMENT with CLI11's reason otherwise.
absl::StatusOr<std::optional<std::string>> RunParser(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> argv_storage;
  argv_storage.reserve(args.size() + 1);
  argv_storage.push_back("medprof-worker");
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<const char*> argv;
  for (const auto& a : argv_storage) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    return app.help();
  } catch (const CLI::ParseError& e) {
    return Invalid(e.what());
  }
  return std::optional<std::string>();
}

// Fills out->config from --job, --preset and the workload flags. Returns true when the
// arguments ask for --decode instead (out->action and decode_path are then set).
absl::StatusOr<bool> ChooseConfig(const WorkerFlags& f, WorkerArgs* out) {
  v1::WorkloadConfig& c = out->config;
  if (!f.job.empty()) {
    MEDPROF_ASSIGN_OR_RETURN(c, ReadJobFile(f.job));
    out->job_path = f.job;
  } else if (f.preset_opt->count() == 0) {
    if (f.decode_opt->count()) {
      out->action = WorkerArgs::Action::kDecode;
      out->decode_path = f.decode;
      return true;
    }
    if (!f.describe) {
      return Invalid(absl::StrCat("--preset is required unless --job is given (allowed: ", config::PresetList(), ")"));
    }
    c.set_preset("baseline");  // --describe alone describes the published model under the baseline preset
  }
  if (f.preset_opt->count()) c.set_preset(f.preset);
  MEDPROF_RETURN_IF_ERROR(f.workload.Apply(&c));
  return false;
}

// Checks --out / --result-fd: exactly one for a run, at most one otherwise.
absl::Status SetResultChannel(const WorkerFlags& f, WorkerArgs* out) {
  const bool has_out = f.out_opt->count() > 0, has_fd = f.fd_opt->count() > 0;
  if (has_out && has_fd) return Invalid("--out and --result-fd: give exactly one result channel, not both");
  if (out->action == WorkerArgs::Action::kRun && !has_out && !has_fd) {
    return Invalid("--out FILE or --result-fd N is required (results never go to stdout)");
  }
  if (has_out) {
    if (f.out.empty()) return Invalid("--out: empty path");
    out->out_path = f.out;
  }
  if (has_fd) {
    if (f.result_fd < 0) return Invalid(absl::StrCat("--result-fd: ", f.result_fd, " is not a file descriptor (allowed: >= 0)"));
    if (f.result_fd <= 2) {
      return Invalid(absl::StrCat("--result-fd: ", f.result_fd,
                                  " is stdin/stdout/stderr (allowed: 3 or above; results never share stdout)"));
    }
    out->result_fd = f.result_fd;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WorkerArgs> ParseArgs(const std::vector<std::string>& args) {
  CLI::App app{"medprof-worker: runs one Med-DDPM profiling job and writes its results "
               "(length-delimited medprof.v1.WorkerMessage records) to --out or --result-fd",
               "medprof-worker"};
  WorkerFlags flags;
  AddFlags(&app, &flags);
  WorkerArgs out_args;
  MEDPROF_ASSIGN_OR_RETURN(std::optional<std::string> help, RunParser(app, args));
  if (help.has_value()) {
    out_args.action = WorkerArgs::Action::kHelp;
    out_args.help = *std::move(help);
    return out_args;
  }
  if (flags.version) {
    out_args.action = WorkerArgs::Action::kVersion;
    return out_args;
  }
  if (!logging::ParseLevel(flags.log_level, &out_args.log_level)) {
    return Invalid(absl::StrCat("--log-level: unknown level '", flags.log_level,
                                "' (allowed: debug|info|warn|error|off)"));
  }
  MEDPROF_ASSIGN_OR_RETURN(const bool decode, ChooseConfig(flags, &out_args));
  if (decode) return out_args;
  out_args.action = flags.describe ? WorkerArgs::Action::kDescribe : WorkerArgs::Action::kRun;
  MEDPROF_RETURN_IF_ERROR(SetResultChannel(flags, &out_args));
  return out_args;
}

}  // namespace medprof::worker
