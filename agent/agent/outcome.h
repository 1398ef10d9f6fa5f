// How a run ended, decided from what the agent saw: the worker's exit status, the records on
// its result channel, and whatever the agent itself did to it (timeout, cancel, SIGTERM).
//
// Rules, first match wins:
//   spool write failed                      -> FAILED  "spool write failed: <cause>"
//   exit 0, a RunSummary and no WorkerError -> SUCCEEDED (even if a stop came too late)
//   the agent stopped it: timeout           -> FAILED  "timeout after N s"
//                         cancel            -> CANCELLED "cancelled by the server"
//                         agent SIGTERM     -> INTERRUPTED "agent received SIGTERM"
//                         run abandoned     -> CANCELLED "the server no longer considers the run active"
//   a WorkerError record, kind interrupted  -> INTERRUPTED "<kind>: <message>"
//   a WorkerError record, any other kind    -> FAILED "<kind>: <message>"
//   killed by a signal                      -> FAILED "worker crashed: signal N (SIGNAME)"
//   non-zero exit                           -> FAILED "worker exited with code N"
//   exit 0 without a RunSummary             -> FAILED "worker exited with code 0 without a RunSummary"
// A result channel problem (last record cut short, unreadable bytes) is appended to a FAILED
// cause. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "medprof/v1/results.pb.h"
#include "medprof/v1/service.pb.h"

namespace medprof::agent {

struct WorkerExit {
  bool signaled = false;  // killed by a signal (else exited)
  int code = 0;           // exit status when !signaled
  int signal = 0;         // the signal when signaled
  // The exit code reported to the server: the status, or -signal when killed.
  int32_t ReportedCode() const { return signaled ? -signal : code; }
  // "exit code 3" / "signal 11 (SIGSEGV)"
  std::string Describe() const;
};

// Why the agent stopped the worker itself (kNone when it did not).
enum class StopReason { kNone, kTimeout, kCancelled, kInterrupted, kAbandoned, kSpoolError };

// What the result channel carried.
struct StreamFacts {
  bool saw_summary = false;
  std::optional<v1::WorkerError> error;  // the last WorkerError record, if any
  std::string problem;                   // e.g. "the last result record was cut short: ..." ("" = clean)
};

struct Verdict {
  v1::RunState state = v1::RUN_STATE_UNSPECIFIED;
  std::string error;  // "" for SUCCEEDED
};

// `stop_detail`: for kTimeout the limit in seconds as text ("60"); for kSpoolError the cause.
Verdict Classify(const WorkerExit& exit, const StreamFacts& stream, StopReason stop,
                 const std::string& stop_detail);

// "SIGSEGV", "SIGKILL", ... ("signal N" for ones without a name here).
std::string SignalName(int sig);

// The end of a worker's stderr file: at most the last max_bytes, then at most the last
// max_lines lines, as valid UTF-8. "" when the file is missing or empty.
std::string StderrTail(const std::string& path, size_t max_bytes = 64 * 1024, int max_lines = 50);

// `text` with every byte sequence that is not valid UTF-8 replaced by '?' (proto3 strings
// must be UTF-8).
std::string ToValidUtf8(const std::string& text);

}  // namespace medprof::agent
