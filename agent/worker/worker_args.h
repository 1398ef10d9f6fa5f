// medprof-worker's command line: flags -> WorkerArgs (a WorkloadConfig plus where results go).
//
//   medprof-worker --preset opt1 --volume 128 --steps 20 --out run.pb
//   medprof-worker --job job.pb --result-fd 3          (as the agent starts it)
//   medprof-worker --preset baseline --describe        (JSON on stdout, nothing runs)
//
// --job FILE reads a binary medprof.v1.WorkloadConfig; flags given alongside override its
// fields. The config is returned as given (no defaults applied): the caller applies
// config::ApplyDefaults + config::Validate, which name the offending field. Parse errors
// (unknown flag, a value that is not a number, a bad enum, a missing or doubled result
// channel, an unreadable job file) are INVALID_ARGUMENT naming the flag.
//
// Pure apart from reading the job file; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/logging.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::worker {

struct WorkerArgs {
  enum class Action { kRun, kDescribe, kVersion, kHelp, kDecode };
  Action action = Action::kRun;
  v1::WorkloadConfig config;      // from --job, then flag overrides; defaults NOT applied
  std::string job_path;           // --job ("" = none)
  std::string out_path;           // --out ("" = none)
  std::string decode_path;        // --decode FILE (Action::kDecode)
  int result_fd = -1;             // --result-fd (-1 = none)
  LogLevel log_level = LogLevel::kInfo;  // --log-level debug|info|warn|error|off
  std::string help;               // the help text (Action::kHelp)
};

// `args` excludes the program name.
absl::StatusOr<WorkerArgs> ParseArgs(const std::vector<std::string>& args);

// Reads a binary medprof.v1.WorkloadConfig (as the agent writes job.pb).
absl::StatusOr<v1::WorkloadConfig> ReadJobFile(const std::string& path);

}  // namespace medprof::worker
