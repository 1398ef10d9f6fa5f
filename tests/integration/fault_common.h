// Shared pieces of the fault-injection suites (fault_kill_test.cc, fault_io_test.cc): study
// submission with the tiny model, SQL probes, the invariants every trial ends with, worker
// lookup by /proc, and a small TCP proxy that can cut or stall the agent's connection.
//
// The invariants (CheckInvariants), after a study has ended:
//   - PRAGMA integrity_check is "ok";
//   - every stored result is there exactly once: per run, the stored chunk seqs are 1..max
//     without a gap or a duplicate, and no measured step is stored twice;
//   - a succeeded run holds exactly the steps the study asked for;
//   - no job and no run is still `running` (nothing outlives its lease).
// Header-only; used by one test binary at a time.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace medprof::itest::fault {

inline constexpr auto kLong = std::chrono::minutes(3);

// Server flags that make lease expiry quick enough for a test.
inline std::vector<std::string> FastLeases() { return {"--lease-ttl-ms", "2500", "--heartbeat-interval-ms", "400"}; }

// Submits one baseline job of the tiny model; returns the study id ("" on failure).
inline std::string Submit(const std::string& address, int steps, int max_attempts = 3) {
  std::vector<std::string> args = {"submit", "--presets", "baseline", "--steps", std::to_string(steps),
                                   "--warmup", "0", "--grad-accum", "1", "--max-attempts",
                                   std::to_string(max_attempts), "--format", "json"};
  for (const auto& f : TinyModelFlags()) args.push_back(f);
  CommandResult r = Cli(address, args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return "";
  return nlohmann::json::parse(r.out).at("study_id").get<std::string>();
}

inline int64_t Count(const std::string& db_path, const std::string& sql) {
  auto db = DbProbe::Open(db_path);
  if (!db.ok()) return -1;
  return (*db)->Int(sql).value_or(-1);
}

inline std::vector<std::vector<std::string>> Rows(const std::string& db_path, const std::string& sql) {
  auto db = DbProbe::Open(db_path);
  if (!db.ok()) return {};
  return (*db)->Rows(sql).value_or(std::vector<std::vector<std::string>>{});
}

inline bool StudyDone(const std::string& db, const std::string& study) {
  return Count(db, absl::StrCat("SELECT COUNT(*) FROM jobs WHERE study_id = '", study,
                                "' AND state IN ('queued', 'running')")) == 0;
}

inline bool HasRunningRun(const std::string& db, const std::string& study) {
  return Count(db, absl::StrCat("SELECT COUNT(*) FROM runs WHERE study_id = '", study, "' AND state = 'running'")) > 0;
}

// The invariants listed in the header comment. Returns the job's final state.
inline std::string CheckInvariants(const std::string& db, const std::string& study, int steps) {
  const auto integrity = Rows(db, "PRAGMA integrity_check");
  EXPECT_FALSE(integrity.empty());
  if (!integrity.empty()) EXPECT_EQ(integrity[0][0], "ok");
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) FROM jobs WHERE study_id = '", study,
                                   "' AND state IN ('queued', 'running')")),
            0);
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) FROM runs WHERE study_id = '", study, "' AND state = 'running'")),
            0);
  for (const auto& row : Rows(db, absl::StrCat("SELECT run_id, state FROM runs WHERE study_id = '", study, "'"))) {
    const std::string& run = row[0];
    SCOPED_TRACE("run " + run + " (" + row[1] + ")");
    const int64_t chunks = Count(db, absl::StrCat("SELECT COUNT(*) FROM run_chunks WHERE run_id = '", run, "'"));
    const int64_t distinct =
        Count(db, absl::StrCat("SELECT COUNT(DISTINCT seq) FROM run_chunks WHERE run_id = '", run, "'"));
    const int64_t max_seq =
        Count(db, absl::StrCat("SELECT COALESCE(MAX(seq), 0) FROM run_chunks WHERE run_id = '", run, "'"));
    EXPECT_EQ(chunks, distinct) << "a chunk stored twice";
    EXPECT_EQ(chunks, max_seq) << "a gap in the stored sequence";
    const int64_t step_rows = Count(db, absl::StrCat("SELECT COUNT(*) FROM run_steps WHERE run_id = '", run, "'"));
    EXPECT_EQ(step_rows,
              Count(db, absl::StrCat("SELECT COUNT(DISTINCT step) FROM run_steps WHERE run_id = '", run, "'")))
        << "a step stored twice";
    if (row[1] == "succeeded") EXPECT_EQ(step_rows, steps);
  }
  const auto state = Rows(db, absl::StrCat("SELECT state FROM jobs WHERE study_id = '", study, "'"));
  return state.empty() ? "" : state[0][0];
}

// Pids of medprof-worker processes (argv[0] ends in medprof-worker) whose command line
// mentions `needle` (an agent's work dir).
inline std::vector<pid_t> WorkersMentioning(const std::string& needle) {
  namespace fs = std::filesystem;
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::string argv0 = cmd.substr(0, cmd.find('\0'));
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    const bool is_worker = argv0.size() >= 14 && argv0.compare(argv0.size() - 14, 14, "medprof-worker") == 0;
    if (is_worker && cmd.find(needle) != std::string::npos) out.push_back(std::stoi(pid));
  }
  return out;
}

// A TCP proxy on 127.0.0.1 in front of a server port, for the agent's connection. Cut():
// every open connection is reset and new ones are closed at once until Restore(). Stall():
// connections stay open but no byte moves in either direction until Restore(). Thread-safe.
class TcpProxy {
 public:
  explicit TcpProxy(int target_port) : target_port_(target_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(listen_fd_, 64);
    socklen_t len = sizeof(a);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~TcpProxy() {
    stop_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    acceptor_.join();
    CloseAll();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : pumps_) t.join();
    for (int fd : fds_) close(fd);
  }
  int port() const { return port_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  void Cut() {
    cut_ = true;
    CloseAll();
  }
  void Stall() { stalled_ = true; }
  void Restore() {
    cut_ = false;
    stalled_ = false;
  }
  int connections() const { return connections_; }

 private:
  void AcceptLoop() {
    while (!stop_) {
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) continue;
      if (cut_) {
        close(client);
        continue;
      }
      const int upstream = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(target_port_));
      if (connect(upstream, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        close(client);
        close(upstream);
        continue;
      }
      ++connections_;
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(client);
      fds_.push_back(upstream);
      pumps_.emplace_back([this, client, upstream] { Pump(client, upstream); });
    }
  }
  // Moves bytes both ways until either side closes or the proxy cuts.
  void Pump(int a, int b) {
    char buf[16384];
    while (!stop_) {
      if (stalled_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
      if (poll(p, 2, 50) <= 0) continue;
      bool closed = false;
      for (int i = 0; i < 2 && !closed; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = read(p[i].fd, buf, sizeof(buf));
        if (n <= 0) {
          closed = true;
          break;
        }
        const int to = i == 0 ? b : a;
        for (ssize_t off = 0; off < n;) {
          const ssize_t w = write(to, buf + off, static_cast<size_t>(n - off));
          if (w <= 0) {
            closed = true;
            break;
          }
          off += w;
        }
      }
      if (closed) break;
    }
    shutdown(a, SHUT_RDWR);
    shutdown(b, SHUT_RDWR);
  }
  void CloseAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : fds_) {
      // An RST, as a dropped NAT entry or a pulled cable ends up looking to gRPC.
      linger l{1, 0};
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
      shutdown(fd, SHUT_RDWR);
    }
  }

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false}, cut_{false}, stalled_{false};
  std::atomic<int> connections_{0};
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> pumps_;
  std::thread acceptor_;
};

}  // namespace medprof::itest::fault
