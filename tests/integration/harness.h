// Integration-test harness: the real medprof-server, medprof-agent, medprof-worker and medprof
// CLI as child processes on 127.0.0.1, with a temporary SQLite file.
//
// Each Process is started with fork/exec in its own process group; its stderr is captured
// line by line (kept in memory and mirrored to a log file in the test's temp dir), stdout too.
// Destructors kill what is still running (SIGKILL to the group), so a failing test leaves
// nothing behind. Binaries are found through $MEDPROF_BIN_DIR (set by medprof_add_test).
// Not thread-safe except where noted; one test drives one harness.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "medprof/v1/results.pb.h"

namespace medprof::itest {

// Path of a medprof binary ("medprof-server", ...).
std::string BinPath(const std::string& name);
// A fresh directory under the test temp dir.
std::string MakeTempDir(const std::string& prefix);

struct CommandResult {
  int exit_code = -1;  // -signal when killed
  std::string out;
  std::string err;
};
// Runs a command to completion (with a timeout) and captures its output.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {},
                         std::chrono::seconds timeout = std::chrono::seconds(300));

class Process {
 public:
  // Starts argv[0] (a path) with extra environment variables.
  static absl::StatusOr<std::unique_ptr<Process>> Start(const std::vector<std::string>& argv,
                                                        const std::map<std::string, std::string>& env,
                                                        const std::string& log_path);
  ~Process();

  pid_t pid() const { return pid_; }
  // Waits until a stderr/stdout line contains `needle`; returns that line. Thread-safe.
  std::optional<std::string> WaitForLine(const std::string& needle, std::chrono::milliseconds timeout);
  // Number of captured lines containing `needle`. Thread-safe.
  int CountLines(const std::string& needle);
  std::string AllOutput();
  void Signal(int sig);
  // Waits for exit; returns the exit code (or -signal). nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  bool Running();

 private:
  Process() = default;
  void ReaderLoop(int fd);
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  std::vector<std::thread> readers_;
  int log_fd_ = -1;
};

// A running medprof-server on 127.0.0.1 with its own DB file.
class ServerFixture {
 public:
  // Starts medprof-server --db <db> --listen 127.0.0.1:<port> (port 0 = any free port).
  static absl::StatusOr<std::unique_ptr<ServerFixture>> Start(const std::string& db_path,
                                                              const std::vector<std::string>& extra_args = {},
                                                              int port = 0);
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  Process& process() { return *process_; }
  const std::string& db_path() const { return db_path_; }

 private:
  std::unique_ptr<Process> process_;
  std::string address_;
  std::string db_path_;
  int port_ = 0;
};

// A running medprof-agent connected to `server_address`.
absl::StatusOr<std::unique_ptr<Process>> StartAgent(const std::string& server_address,
                                                    const std::string& work_dir,
                                                    const std::string& name,
                                                    const std::vector<std::string>& extra_args = {});

// Runs the medprof CLI against a server.
CommandResult Cli(const std::string& server_address, const std::vector<std::string>& args,
                  std::chrono::seconds timeout = std::chrono::seconds(300));

// `medprof-server token create --db <db> <args>`: writes the token to `file` (mode 0600) and
// returns its id ("tok-..."). Fails the test when creation fails.
std::string CreateToken(const std::string& db, const std::vector<std::string>& args, const std::string& file);

// The tiny Med-DDPM configuration integration tests use (fast on 2 CPU cores).
std::vector<std::string> TinyModelFlags();

// Writes dir/tap-worker.sh: a wrapper around the real medprof-worker that copies every record
// the worker writes to its result channel into dir/tap/<run id>.pb before passing it to the
// agent (pass it as the agent's --worker). Returns its path.
std::string WriteTapWorker(const std::string& dir);
// Every record a worker wrote for one run, as the tap saw it.
std::vector<v1::WorkerMessage> ReadTap(const std::string& path);

// Polls `pred` every `poll` until true or timeout; returns its last value.
bool Eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds poll = std::chrono::milliseconds(50));

// Read-only SQL probe of a server's DB file (integration assertions only).
class DbProbe {
 public:
  static absl::StatusOr<std::unique_ptr<DbProbe>> Open(const std::string& path);
  ~DbProbe();
  // First column of the first row as int64 (e.g. SELECT COUNT(*) ...).
  absl::StatusOr<int64_t> Int(const std::string& sql);
  // All rows, every column as text.
  absl::StatusOr<std::vector<std::vector<std::string>>> Rows(const std::string& sql);

 private:
  DbProbe() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace medprof::itest
