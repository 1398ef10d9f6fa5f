// medprof-worker's exit codes (the agent classifies runs by them and by the last record).
#pragma once

namespace medprof::worker {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalidConfig = 2;   // bad flags, job file or configuration
inline constexpr int kExitWorkloadFailed = 3;  // oom, cuda, crash, internal
inline constexpr int kExitInterrupted = 143;   // SIGTERM/SIGINT (128 + 15)

}  // namespace medprof::worker
