#include "agent/agent/stop_signals.h"

#include <csignal>

#include "gtest/gtest.h"

namespace medprof::agent {
namespace {

TEST(StopSignalsTest, FirstSignalDrainsFurtherSigtermIsIgnoredSigintExits) {
  EXPECT_EQ(OnStopSignal(SIGTERM, false), StopSignalAction::kDrain);
  EXPECT_EQ(OnStopSignal(SIGINT, false), StopSignalAction::kDrain);
  // Slurm's scancel / time limit signal the agent and the batch script forwards its own too.
  EXPECT_EQ(OnStopSignal(SIGTERM, true), StopSignalAction::kIgnore);
  EXPECT_EQ(OnStopSignal(SIGINT, true), StopSignalAction::kExitNow);
}

}  // namespace
}  // namespace medprof::agent
