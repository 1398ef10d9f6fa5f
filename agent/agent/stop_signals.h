// What medprof-agent does with SIGTERM and SIGINT (main.cc's signal thread asks this).
//
// The first of either begins the graceful drain. Under Slurm more SIGTERMs follow while the
// agent drains: `scancel` and the time limit signal every process of the job, and the batch
// script forwards the one it gets too, so a SIGTERM during the drain is ignored — exiting then
// would drop the INTERRUPTED reports the drain is there to send. A SIGINT during the drain (a
// person pressing Ctrl-C again) exits at once with 130. Pure function; thread-safe.
#pragma once

namespace medprof::agent {

enum class StopSignalAction {
  kDrain,    // begin the drain
  kIgnore,   // already draining: keep going
  kExitNow,  // _exit(128 + signal) without finishing the drain
};

// `draining`: whether a drain has begun (by an earlier signal or otherwise).
StopSignalAction OnStopSignal(int sig, bool draining);

}  // namespace medprof::agent
