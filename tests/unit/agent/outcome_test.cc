#include "agent/agent/outcome.h"

#include <unistd.h>

#include <csignal>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/agent/test_files.h"

namespace medprof::agent {
namespace {

using ::medprof::agent::testing::FreshDir;
using ::medprof::agent::testing::TempRoot;
using ::medprof::agent::testing::WriteTemp;

using ::testing::HasSubstr;

WorkerExit Exited(int code) { return WorkerExit{.signaled = false, .code = code}; }
WorkerExit Killed(int sig) { return WorkerExit{.signaled = true, .signal = sig}; }

StreamFacts Summary() { return StreamFacts{.saw_summary = true}; }
StreamFacts Error(const std::string& kind, const std::string& message) {
  v1::WorkerError e;
  e.set_kind(kind);
  e.set_message(message);
  return StreamFacts{.error = e};
}

void ExpectVerdict(const Verdict& v, v1::RunState state, const std::string& error) {
  EXPECT_EQ(v1::RunState_Name(v.state), v1::RunState_Name(state));
  EXPECT_EQ(v.error, error);
}

TEST(ClassifyTest, CleanExitWithSummarySucceeds) {
  ExpectVerdict(Classify(Exited(0), Summary(), StopReason::kNone, ""), v1::RUN_SUCCEEDED, "");
  // A stop that came too late does not change a completed run.
  ExpectVerdict(Classify(Exited(0), Summary(), StopReason::kInterrupted, ""), v1::RUN_SUCCEEDED, "");
}

TEST(ClassifyTest, WorkerErrorKinds) {
  ExpectVerdict(Classify(Exited(1), Error("oom", "CUDA out of memory. Tried to allocate 2.00 GiB"),
                         StopReason::kNone, ""),
                v1::RUN_FAILED, "oom: CUDA out of memory. Tried to allocate 2.00 GiB");
  ExpectVerdict(Classify(Exited(1), Error("invalid_config", "volume: 20 is not a multiple of 16"),
                         StopReason::kNone, ""),
                v1::RUN_FAILED, "invalid_config: volume: 20 is not a multiple of 16");
  ExpectVerdict(Classify(Exited(1), Error("cuda", "an illegal memory access"), StopReason::kNone, ""),
                v1::RUN_FAILED, "cuda: an illegal memory access");
  ExpectVerdict(Classify(Exited(143), Error("interrupted", "received SIGTERM"), StopReason::kNone, ""),
                v1::RUN_INTERRUPTED, "interrupted: received SIGTERM");
  // An error record beats exit code 0 and even a summary.
  StreamFacts both = Error("internal", "writer failed");
  both.saw_summary = true;
  ExpectVerdict(Classify(Exited(0), both, StopReason::kNone, ""), v1::RUN_FAILED, "internal: writer failed");
}

TEST(ClassifyTest, SignalsAndExitCodes) {
  ExpectVerdict(Classify(Killed(SIGSEGV), {}, StopReason::kNone, ""), v1::RUN_FAILED,
                "worker crashed: signal 11 (SIGSEGV)");
  ExpectVerdict(Classify(Killed(SIGABRT), {}, StopReason::kNone, ""), v1::RUN_FAILED,
                "worker crashed: signal 6 (SIGABRT)");
  ExpectVerdict(Classify(Killed(SIGKILL), {}, StopReason::kNone, ""), v1::RUN_FAILED,
                "worker crashed: signal 9 (SIGKILL)");
  ExpectVerdict(Classify(Exited(3), {}, StopReason::kNone, ""), v1::RUN_FAILED, "worker exited with code 3");
  ExpectVerdict(Classify(Exited(0), {}, StopReason::kNone, ""), v1::RUN_FAILED,
                "worker exited with code 0 without a RunSummary");
  EXPECT_EQ(Killed(SIGSEGV).ReportedCode(), -11);
  EXPECT_EQ(Exited(3).ReportedCode(), 3);
  EXPECT_EQ(Killed(SIGBUS).Describe(), "signal 7 (SIGBUS)");
  EXPECT_EQ(Exited(2).Describe(), "exit code 2");
}

TEST(ClassifyTest, WhatTheAgentDidDecides) {
  ExpectVerdict(Classify(Killed(SIGKILL), {}, StopReason::kTimeout, "60"), v1::RUN_FAILED,
                "timeout after 60 s");
  ExpectVerdict(Classify(Exited(143), Error("interrupted", "SIGTERM"), StopReason::kTimeout, "5"),
                v1::RUN_FAILED, "timeout after 5 s");
  ExpectVerdict(Classify(Killed(SIGTERM), {}, StopReason::kCancelled, ""), v1::RUN_CANCELLED,
                "cancelled by the server");
  ExpectVerdict(Classify(Exited(1), Error("interrupted", "x"), StopReason::kInterrupted, ""),
                v1::RUN_INTERRUPTED, "agent received SIGTERM");
  ExpectVerdict(Classify(Killed(SIGTERM), {}, StopReason::kAbandoned, ""), v1::RUN_CANCELLED,
                "the server no longer considers the run active");
  // A spool failure fails the run even when the worker completed.
  ExpectVerdict(
      Classify(Exited(0), Summary(), StopReason::kSpoolError, "appending result 7: No space left on device"),
      v1::RUN_FAILED, "spool write failed: appending result 7: No space left on device");
}

TEST(ClassifyTest, ChannelProblemsAreAppendedToFailures) {
  StreamFacts cut;
  cut.problem = "the last result record was cut short (record 5 cut short: 3 of 40 bytes)";
  ExpectVerdict(Classify(Killed(SIGKILL), cut, StopReason::kNone, ""), v1::RUN_FAILED,
                "worker crashed: signal 9 (SIGKILL); the last result record was cut short (record 5 cut "
                "short: 3 of 40 bytes)");
}

TEST(SignalNameTest, KnownAndUnknown) {
  EXPECT_EQ(SignalName(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGXCPU), "SIGXCPU");
  EXPECT_EQ(SignalName(63), "signal 63");
}

TEST(StderrTailTest, KeepsTheLastLines) {
  std::string text;
  for (int i = 1; i <= 120; ++i) text += "line " + std::to_string(i) + "\n";
  const std::string path = WriteTemp("stderr-lines", text);
  const std::string tail = StderrTail(path);
  EXPECT_EQ(tail.substr(0, 8), "line 71\n");
  EXPECT_EQ(tail.substr(tail.size() - 9), "line 120\n");
  EXPECT_EQ(std::count(tail.begin(), tail.end(), '\n'), 50);
  EXPECT_EQ(StderrTail(path, 64 * 1024, 2), "line 119\nline 120\n");
  EXPECT_EQ(StderrTail("/nonexistent/stderr"), "");
  EXPECT_EQ(StderrTail(WriteTemp("stderr-empty", "")), "");
  EXPECT_EQ(StderrTail(WriteTemp("stderr-short", "only\n")), "only\n");
}

TEST(StderrTailTest, KeepsTheLastBytesFromALineStart) {
  const std::string big =
      std::string(100 * 1024, 'a') + "\n" + std::string(70 * 1024, 'b') + "\nlast words\n";
  const std::string tail = StderrTail(WriteTemp("stderr-big", big));
  // 64 KiB from the end falls inside the run of b's: the cut line is dropped.
  EXPECT_EQ(tail, "last words\n");
  const std::string one_long_line = std::string(100 * 1024, 'c');
  EXPECT_EQ(StderrTail(WriteTemp("stderr-long", one_long_line)).size(), 64u * 1024);
}

TEST(StderrTailTest, ResultIsValidUtf8) {
  const std::string tail = StderrTail(WriteTemp("stderr-utf8", "ok \xc3\xa9 \xff\xfe bad \xe2\x82\n"));
  EXPECT_EQ(tail, "ok \xc3\xa9 ?? bad ??\n");
}

TEST(Utf8Test, InvalidSequencesAreReplaced) {
  EXPECT_EQ(ToValidUtf8("plain"), "plain");
  EXPECT_EQ(ToValidUtf8("\xe2\x82\xac euro, \xf0\x9f\x98\x80 smile"),
            "\xe2\x82\xac euro, \xf0\x9f\x98\x80 smile");
  EXPECT_EQ(ToValidUtf8("\xc0\xaf"), "??");          // overlong '/'
  EXPECT_EQ(ToValidUtf8("\xed\xa0\x80"), "???");     // a surrogate
  EXPECT_EQ(ToValidUtf8("cut \xe2\x82"), "cut ??");  // truncated at the end
  EXPECT_EQ(ToValidUtf8(std::string("nul\0ok", 6)), std::string("nul\0ok", 6));
}

}  // namespace
}  // namespace medprof::agent
