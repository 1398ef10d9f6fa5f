#include "agent/agent/launcher.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

extern char** environ;

namespace medprof::agent {
namespace {

class ChildProcess final : public WorkerProcess {
 public:
  ChildProcess(pid_t pid, int read_fd) : pid_(pid), read_fd_(read_fd) {}
  ~ChildProcess() override {
    if (!exit_.has_value()) {
      // Never leave a worker (or a zombie) behind.
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    ::close(read_fd_);
  }

  int pid() const override { return pid_; }
  int result_fd() const override { return read_fd_; }

  absl::Status Signal(int sig) override {
    // The whole group (the worker and anything it started), once: a second delivery to
    // the worker could interrupt its own SIGTERM handling. Launch made the group before
    // returning (setpgid in both parent and child), so ESRCH means everyone is gone.
    if (::kill(-pid_, sig) != 0 && errno != ESRCH) {
      return ErrnoStatus(absl::StrCat("kill(-", pid_, ", ", sig, ")"), errno);
    }
    return absl::OkStatus();
  }

  std::optional<WorkerExit> TryWait() override {
    if (exit_.has_value()) return exit_;
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid_, &status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == 0) return std::nullopt;
    WorkerExit e;
    if (r < 0) {
      // ECHILD: someone else reaped it; report it as an unknown failure.
      e.code = 255;
    } else if (WIFSIGNALED(status)) {
      e.signaled = true;
      e.signal = WTERMSIG(status);
    } else {
      e.code = WEXITSTATUS(status);
    }
    exit_ = e;
    return exit_;
  }

 private:
  const pid_t pid_;
  const int read_fd_;
  std::optional<WorkerExit> exit_;
};

// Async-signal-safe write of a whole buffer (child side).
void WriteAllRaw(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

int OpenOutput(const std::string& path) {
  if (path.empty()) return ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
}

class ProcessLauncher final : public WorkerLauncher {
 public:
  absl::StatusOr<std::unique_ptr<WorkerProcess>> Launch(const LaunchSpec& spec) override {
    if (spec.argv.empty()) return absl::InvalidArgumentError("LaunchSpec.argv is empty");
    // Everything the child needs is prepared here: between fork and exec only
    // async-signal-safe calls are allowed.
    std::vector<std::string> env_strings;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string entry = *e;
      const std::string key = entry.substr(0, entry.find('='));
      if (spec.env.count(key) == 0) env_strings.push_back(entry);
    }
    for (const auto& [k, v] : spec.env) env_strings.push_back(absl::StrCat(k, "=", v));
    std::vector<char*> envp;
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_strings = spec.argv;
    std::vector<char*> argv;
    for (std::string& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);

    const int in_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in_fd < 0) return ErrnoStatus("opening /dev/null", errno);
    const int out_fd = OpenOutput(spec.stdout_path);
    if (out_fd < 0) {
      const int err = errno;
      ::close(in_fd);
      return ErrnoStatus(absl::StrCat("opening ", spec.stdout_path), err);
    }
    const int err_fd = OpenOutput(spec.stderr_path);
    if (err_fd < 0) {
      const int err = errno;
      ::close(in_fd);
      ::close(out_fd);
      return ErrnoStatus(absl::StrCat("opening ", spec.stderr_path), err);
    }
    int result_pipe[2];
    int exec_pipe[2];  // reports an exec failure: closed by a successful exec (CLOEXEC)
    if (::pipe2(result_pipe, O_CLOEXEC) != 0) {
      const int err = errno;
      ::close(in_fd);
      ::close(out_fd);
      ::close(err_fd);
      return ErrnoStatus("creating the result pipe", err);
    }
    if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
      const int err = errno;
      for (int fd : {in_fd, out_fd, err_fd, result_pipe[0], result_pipe[1]}) ::close(fd);
      return ErrnoStatus("creating the exec status pipe", err);
    }
    const pid_t parent = ::getpid();
    const char* exe = spec.executable.c_str();
    const char* cwd = spec.working_dir.empty() ? nullptr : spec.working_dir.c_str();

    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      for (int fd : {in_fd, out_fd, err_fd, result_pipe[0], result_pipe[1], exec_pipe[0], exec_pipe[1]})
        ::close(fd);
      return ErrnoStatus("fork", err);
    }
    if (pid == 0) {
      // Child.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the agent died before prctl took effect
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD}) ::signal(sig, SIG_DFL);
      // Move the sources above the targets first, so no dup2 overwrites a source.
      const int src[4] = {in_fd, out_fd, err_fd, result_pipe[1]};
      int high[4];
      for (int i = 0; i < 4; ++i) high[i] = ::fcntl(src[i], F_DUPFD_CLOEXEC, 10);
      int fail = 0;
      for (int i = 0; i < 4; ++i) {
        if (high[i] < 0 || ::dup2(high[i], i) < 0) fail = errno;  // dup2 clears CLOEXEC on 0..3
      }
      if (fail == 0 && cwd != nullptr && ::chdir(cwd) != 0) fail = errno;
      if (fail == 0) {
        ::execve(exe, argv.data(), envp.data());
        fail = errno;
      }
      WriteAllRaw(exec_pipe[1], &fail, sizeof fail);
      ::_exit(127);
    }
    // Parent.
    ::setpgid(pid, pid);  // also here, so Signal() works even before the child ran
    for (int fd : {in_fd, out_fd, err_fd, result_pipe[1], exec_pipe[1]}) ::close(fd);
    int child_errno = 0;
    size_t got = 0;
    while (got < sizeof child_errno) {
      const ssize_t r =
          ::read(exec_pipe[0], reinterpret_cast<char*>(&child_errno) + got, sizeof child_errno - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    ::close(exec_pipe[0]);
    if (got == sizeof child_errno) {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      ::close(result_pipe[0]);
      return ErrnoStatus(absl::StrCat("starting worker ", spec.executable), child_errno);
    }
    return std::make_unique<ChildProcess>(pid, result_pipe[0]);
  }
};

}  // namespace

LaunchSpec MakeWorkerLaunchSpec(const std::string& worker_path, const std::string& run_dir,
                                const std::string& run_id, const OfferedDevice& device,
                                const std::string& cache_dir) {
  LaunchSpec spec;
  spec.executable = worker_path;
  spec.argv = {worker_path, "--job", absl::StrCat(run_dir, "/job.pb"), "--result-fd",
               absl::StrCat(kWorkerResultFd)};
  spec.env["MEDPROF_RUN_ID"] = run_id;
  spec.env["MEDPROF_DEVICE_INDEX"] = absl::StrCat(device.device.index());
  if (device.device.kind() == "cuda") {
    spec.env["CUDA_VISIBLE_DEVICES"] = device.visible_token;
    spec.env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    if (!cache_dir.empty()) spec.env["MEDPROF_CACHE_DIR"] = cache_dir;
  } else {
    spec.env["CUDA_VISIBLE_DEVICES"] = "";
  }
  spec.working_dir = run_dir;
  spec.stdout_path = absl::StrCat(run_dir, "/worker.stdout");
  spec.stderr_path = absl::StrCat(run_dir, "/worker.stderr");
  return spec;
}

std::unique_ptr<WorkerLauncher> MakeProcessLauncher() { return std::make_unique<ProcessLauncher>(); }

}  // namespace medprof::agent
