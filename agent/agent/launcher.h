// Starting medprof-worker processes: the WorkerLauncher seam.
//
// ProcessLauncher (MakeProcessLauncher) forks and execs a real worker: its own process group,
// PR_SET_PDEATHSIG(SIGKILL) so a SIGKILLed agent never leaves a worker behind, stdin from
// /dev/null, stdout and stderr appended to files, the result channel a pipe on fd 3, the
// signal mask and dispositions reset. Tests substitute a fake launcher.
//
// PR_SET_PDEATHSIG fires when the *thread* that forked exits, so Launch must be called from
// a thread that lives until the worker has been reaped (the job runner's own thread does).
// A WorkerProcess is used by one thread at a time; it owns the channel's read end.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/agent/inventory.h"
#include "agent/agent/outcome.h"

namespace medprof::agent {

// The worker's end of the result channel.
inline constexpr int kWorkerResultFd = 3;

struct LaunchSpec {
  std::string executable;                  // path to exec
  std::vector<std::string> argv;           // argv[0] included
  std::map<std::string, std::string> env;  // set on top of the agent's environment
  std::string working_dir;                 // "" = the agent's
  std::string stdout_path;                 // appended to; "" = /dev/null
  std::string stderr_path;                 // appended to; "" = /dev/null
};

// The invocation for one run:
//   argv: <worker_path> --job <run_dir>/job.pb --result-fd 3
//   env:  MEDPROF_RUN_ID=<run_id>, MEDPROF_DEVICE_INDEX=<device index>, and for a GPU
//         CUDA_VISIBLE_DEVICES=<the device's token>, CUDA_DEVICE_ORDER=PCI_BUS_ID and
//         MEDPROF_CACHE_DIR=<cache_dir> (the work directory's per-node cache, when not empty); for
//         the CPU device CUDA_VISIBLE_DEVICES="" (the worker must not pick up a GPU the agent does
//         not offer)
//   cwd:  the run directory; stdout -> worker.stdout, stderr -> worker.stderr there.
LaunchSpec MakeWorkerLaunchSpec(const std::string& worker_path, const std::string& run_dir,
                                const std::string& run_id, const OfferedDevice& device,
                                const std::string& cache_dir);

class WorkerProcess {
 public:
  virtual ~WorkerProcess() = default;
  virtual int pid() const = 0;
  // Read end of the result channel (owned by this object).
  virtual int result_fd() const = 0;
  // Sends `sig` to the worker's process group (OK when it is already gone).
  virtual absl::Status Signal(int sig) = 0;
  // Reaps the worker without blocking: nullopt while it runs.
  virtual std::optional<WorkerExit> TryWait() = 0;
};

class WorkerLauncher {
 public:
  virtual ~WorkerLauncher() = default;
  // Starts a worker; an error says why it could not start (e.g. exec failed: No such file).
  virtual absl::StatusOr<std::unique_ptr<WorkerProcess>> Launch(const LaunchSpec& spec) = 0;
};

std::unique_ptr<WorkerLauncher> MakeProcessLauncher();

}  // namespace medprof::agent
