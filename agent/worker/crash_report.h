// InstallCrashReport: on SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT the worker writes the signal
// and a raw backtrace (binary+offset per frame; `addr2line -f -C -e medprof-worker OFFSET` names
// them) to stderr, then dies of the same signal, so the agent still sees the crash as a crash.
//
// Async-signal-safe after installation (backtrace() is primed at install time so the handler
// never loads libgcc). Call once, early in main, on any thread.
#pragma once

namespace medprof::worker {

void InstallCrashReport();

}  // namespace medprof::worker
