#include "agent/agent/stop_signals.h"

#include <csignal>

namespace medprof::agent {

StopSignalAction OnStopSignal(int sig, bool draining) {
  if (!draining) return StopSignalAction::kDrain;
  return sig == SIGINT ? StopSignalAction::kExitNow : StopSignalAction::kIgnore;
}

}  // namespace medprof::agent
