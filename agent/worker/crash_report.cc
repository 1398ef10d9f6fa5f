#include "agent/worker/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

namespace medprof::worker {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

void Write(const char* text) { (void)!write(STDERR_FILENO, text, strlen(text)); }

void OnCrash(int signo) {
  Write("medprof-worker: fatal signal ");
  Write(sigabbrev_np(signo) != nullptr ? sigabbrev_np(signo) : "?");
  Write("; backtrace (addr2line -f -C -e medprof-worker OFFSET):\n");
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  signal(signo, SIG_DFL);  // the default action, with the original signal
  raise(signo);
}

}  // namespace

void InstallCrashReport() {
  void* prime[1];
  (void)backtrace(prime, 1);
  // Its own stack, so that a stack overflow is reported too.
  static char alt_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof(alt_stack);
  (void)sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_handler = OnCrash;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_ONSTACK;
  for (int s : kSignals) sigaction(s, &sa, nullptr);
}

}  // namespace medprof::worker
