#include "tests/integration/harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "common/result_stream.h"
#include "gtest/gtest.h"

namespace medprof::itest {
namespace fs = std::filesystem;

std::string BinPath(const std::string& name) {
  const char* dir = std::getenv("MEDPROF_BIN_DIR");
  return std::string(dir ? dir : ".") + "/" + name;
}

std::string MakeTempDir(const std::string& prefix) {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = prefix;
  if (info != nullptr) name = absl::StrCat(info->test_suite_name(), ".", info->name(), ".", prefix);
  fs::path p = fs::path(::testing::TempDir()) /
               absl::StrCat("medprof-it-", ::getpid(), "-", counter++, "-", name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

namespace {

// fork + exec with stdout/stderr on pipes; child gets its own process group and dies with us.
pid_t Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            int out_fd, int err_fd) {
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execv(cargv[0], cargv.data());
    std::fprintf(stderr, "exec %s failed: %s\n", cargv[0], std::strerror(errno));
    ::_exit(127);
  }
  return pid;
}

int DecodeWait(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1;
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                         std::chrono::seconds timeout) {
  CommandResult r;
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    r.err = "pipe failed";
    return r;
  }
  pid_t pid = Spawn(argv, env, out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(-pid, SIGKILL);
      r.err += "\n[harness] command timed out\n";
      break;
    }
    int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
      if (got <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(got));
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = DecodeWait(status);
  return r;
}

absl::StatusOr<std::unique_ptr<Process>> Process::Start(const std::vector<std::string>& argv,
                                                        const std::map<std::string, std::string>& env,
                                                        const std::string& log_path) {
  if (::access(argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("not executable: ", argv[0]));
  }
  std::unique_ptr<Process> p(new Process());
  p->log_fd_ = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return absl::InternalError("pipe");
  p->pid_ = Spawn(argv, env, out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);
  Process* raw = p.get();
  p->readers_.emplace_back([raw, fd = out[0]] { raw->ReaderLoop(fd); });
  p->readers_.emplace_back([raw, fd = err[0]] { raw->ReaderLoop(fd); });
  return p;
}

void Process::ReaderLoop(int fd) {
  std::string partial;
  char buf[8192];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (log_fd_ >= 0) (void)!::write(log_fd_, buf, static_cast<size_t>(n));
    partial.append(buf, static_cast<size_t>(n));
    size_t pos;
    std::lock_guard<std::mutex> lock(mu_);
    while ((pos = partial.find('\n')) != std::string::npos) {
      lines_.push_back(partial.substr(0, pos));
      partial.erase(0, pos + 1);
    }
    cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!partial.empty()) lines_.push_back(partial);
  ::close(fd);
  cv_.notify_all();
}

std::optional<std::string> Process::WaitForLine(const std::string& needle, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<std::string> found;
  cv_.wait_for(lock, timeout, [&] {
    for (const auto& l : lines_) {
      if (l.find(needle) != std::string::npos) {
        found = l;
        return true;
      }
    }
    return false;
  });
  return found;
}

int Process::CountLines(const std::string& needle) {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& l : lines_) n += l.find(needle) != std::string::npos;
  return n;
}

std::string Process::AllOutput() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string all;
  for (const auto& l : lines_) all += l + "\n";
  return all;
}

void Process::Signal(int sig) {
  if (pid_ > 0 && !exit_code_) ::kill(pid_, sig);
}

std::optional<int> Process::Wait(std::chrono::milliseconds timeout) {
  if (exit_code_) return exit_code_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = DecodeWait(status);
      return exit_code_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool Process::Running() { return !Wait(std::chrono::milliseconds(0)).has_value(); }

Process::~Process() {
  if (pid_ > 0 && !exit_code_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(10));
  }
  for (auto& t : readers_) {
    if (t.joinable()) t.join();
  }
  if (log_fd_ >= 0) ::close(log_fd_);
}

absl::StatusOr<std::unique_ptr<ServerFixture>> ServerFixture::Start(const std::string& db_path,
                                                                    const std::vector<std::string>& extra_args,
                                                                    int port) {
  auto f = std::unique_ptr<ServerFixture>(new ServerFixture());
  f->db_path_ = db_path;
  std::vector<std::string> argv = {BinPath("medprof-server"), "--db", db_path, "--listen",
                                   absl::StrCat("127.0.0.1:", port)};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  auto p = Process::Start(argv, {}, db_path + ".server.log");
  if (!p.ok()) return p.status();
  f->process_ = std::move(*p);
  auto line = f->process_->WaitForLine("listening on 127.0.0.1:", std::chrono::seconds(20));
  if (!line) {
    return absl::DeadlineExceededError(
        absl::StrCat("medprof-server did not report its port; output:\n", f->process_->AllOutput()));
  }
  std::smatch m;
  static const std::regex re("listening on 127\\.0\\.0\\.1:([0-9]+)");
  if (!std::regex_search(*line, m, re)) return absl::InternalError("unparsable line: " + *line);
  f->port_ = std::stoi(m[1]);
  f->address_ = absl::StrCat("127.0.0.1:", f->port_);
  return f;
}

absl::StatusOr<std::unique_ptr<Process>> StartAgent(const std::string& server_address, const std::string& work_dir,
                                                    const std::string& name,
                                                    const std::vector<std::string>& extra_args) {
  std::vector<std::string> argv = {BinPath("medprof-agent"), "--server", server_address, "--work-dir", work_dir,
                                   "--name", name};
  if (std::find(extra_args.begin(), extra_args.end(), "--worker") == extra_args.end()) {
    argv.insert(argv.end(), {"--worker", BinPath("medprof-worker")});
  }
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  fs::create_directories(work_dir);
  return Process::Start(argv, {{"OMP_NUM_THREADS", "1"}}, work_dir + "/agent.log");
}

CommandResult Cli(const std::string& server_address, const std::vector<std::string>& args,
                  std::chrono::seconds timeout) {
  std::vector<std::string> argv = {BinPath("medprof"), "--server", server_address};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, {}, timeout);
}

std::string CreateToken(const std::string& db, const std::vector<std::string>& args, const std::string& file) {
  std::vector<std::string> argv = {BinPath("medprof-server"), "token", "create", "--db", db};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string token = r.out.substr(0, r.out.find('\n'));
  EXPECT_TRUE(std::regex_match(token, std::regex("mpt_[0-9a-f]{12}_[0-9a-f]{64}"))) << token;
  std::ofstream(file) << token << "\n";
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  return "tok-" + token.substr(4, 12);
}

std::vector<std::string> TinyModelFlags() {
  // Attention at the 8^3 level (the default rule would put it at 16^3, 4096 tokens: slow on a CPU).
  return {"--volume", "16", "--base-channels", "8", "--channel-mult", "1,2", "--attention-ds", "2",
          "--device", "cpu", "--threads", "1"};
}

std::string WriteTapWorker(const std::string& dir) {
  const std::string path = dir + "/tap-worker.sh";
  std::ofstream f(path);
  f << "#!/usr/bin/env bash\n"
       "set -o pipefail\n"
       "job=''; prev=''\n"
       "for a in \"$@\"; do [ \"$prev\" = --job ] && job=$a; prev=$a; done\n"
       "run_id=$(basename \"$(dirname \"$job\")\")\n"
       "exec 4>&3\n"
    << "'" << BinPath("medprof-worker") << "' \"$@\" 3>&1 1>/dev/null | tee \"" << dir
    << "/tap/${run_id}.pb\" >&4\n";
  f.close();
  ::chmod(path.c_str(), 0755);
  fs::create_directories(dir + "/tap");
  return path;
}

std::vector<v1::WorkerMessage> ReadTap(const std::string& path) {
  std::vector<v1::WorkerMessage> out;
  auto r = ResultReader::OpenFile(path);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return out;
  v1::WorkerMessage m;
  while (true) {
    auto more = (*r)->Next(&m);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    out.push_back(m);
  }
  return out;
}

bool Eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(poll);
  }
}

struct DbProbe::Impl {
  sqlite3* db = nullptr;
};

absl::StatusOr<std::unique_ptr<DbProbe>> DbProbe::Open(const std::string& path) {
  auto p = std::unique_ptr<DbProbe>(new DbProbe());
  p->impl_ = std::make_unique<Impl>();
  if (sqlite3_open_v2(path.c_str(), &p->impl_->db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    return absl::InternalError(absl::StrCat("open ", path, ": ", sqlite3_errmsg(p->impl_->db)));
  }
  sqlite3_busy_timeout(p->impl_->db, 5000);
  return p;
}

DbProbe::~DbProbe() {
  if (impl_ && impl_->db) sqlite3_close(impl_->db);
}

absl::StatusOr<std::vector<std::vector<std::string>>> DbProbe::Rows(const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(impl_->db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    return absl::InvalidArgumentError(absl::StrCat(sql, ": ", sqlite3_errmsg(impl_->db)));
  }
  std::vector<std::vector<std::string>> rows;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < sqlite3_column_count(st); ++i) {
      const unsigned char* t = sqlite3_column_text(st, i);
      row.emplace_back(t ? reinterpret_cast<const char*>(t) : "");
    }
    rows.push_back(std::move(row));
  }
  std::string err = rc == SQLITE_DONE ? "" : sqlite3_errmsg(impl_->db);
  sqlite3_finalize(st);
  if (!err.empty()) return absl::InternalError(absl::StrCat(sql, ": ", err));
  return rows;
}

absl::StatusOr<int64_t> DbProbe::Int(const std::string& sql) {
  auto rows = Rows(sql);
  if (!rows.ok()) return rows.status();
  if (rows->empty() || rows->front().empty()) return absl::NotFoundError(sql + ": no rows");
  return std::stoll(rows->front().front());
}

}  // namespace medprof::itest
