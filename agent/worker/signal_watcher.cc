#include "agent/worker/signal_watcher.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace medprof::worker {
namespace {

// Process-wide state the async-signal handler touches (lock-free atomics and one fd).
std::atomic<int> g_count{0};
std::atomic<int> g_pipe_write{-1};
std::atomic<bool> g_started{false};

constexpr char kQuit = 0;

void OnSignal(int signo) {
  const int saved_errno = errno;
  g_count.fetch_add(1);
  const int fd = g_pipe_write.load();
  if (fd >= 0) {
    const char b = static_cast<char>(signo);
    (void)!::write(fd, &b, 1);
  }
  errno = saved_errno;
}

}  // namespace

const std::atomic<int>& SignalWatcher::count() const { return g_count; }

absl::StatusOr<std::unique_ptr<SignalWatcher>> SignalWatcher::Start(Callback on_signal) {
  if (g_started.exchange(true)) {
    return absl::FailedPreconditionError("signal watcher: one per process");
  }
  ::signal(SIGPIPE, SIG_IGN);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    g_started = false;
    return absl::InternalError(absl::StrCat("signal watcher: pipe2: ", std::strerror(errno)));
  }
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);  // the handler never blocks
  std::unique_ptr<SignalWatcher> w(new SignalWatcher(std::move(on_signal), fds[0], fds[1]));
  g_pipe_write.store(fds[1]);
  struct sigaction sa {};
  sa.sa_handler = &OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int signo : {SIGTERM, SIGINT}) {
    if (::sigaction(signo, &sa, nullptr) != 0) {
      return absl::InternalError(absl::StrCat("signal watcher: sigaction(", signo, "): ", std::strerror(errno)));
    }
  }
  w->thread_ = std::thread([p = w.get()] { p->Loop(); });
  return w;
}

SignalWatcher::~SignalWatcher() {
  g_pipe_write.store(-1);  // the handler keeps counting but writes no more
  if (thread_.joinable()) {
    const char quit = kQuit;
    (void)!::write(write_fd_, &quit, 1);
    thread_.join();
  }
  ::close(read_fd_);
  ::close(write_fd_);
}

void SignalWatcher::Loop() {
  while (true) {
    char b = 0;
    const ssize_t n = ::read(read_fd_, &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || b == kQuit) return;
    if (on_signal_) on_signal_(static_cast<int>(b), g_count.load());
  }
}

}  // namespace medprof::worker
