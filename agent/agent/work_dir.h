// The agent's work directory: <dir>/agent.lock (flock'ed for the agent's lifetime, so two
// agents never share a spool), <dir>/agent-name (the stable default name), <dir>/spool/
// (one directory per run, see spool.h) and <dir>/cache/ (what workers keep per node and GPU
// between runs: the measured roofline ceilings, agent/worker/ceilings_cache.h).
//
// Not copyable; the lock is released when the object is destroyed (or the process dies).
// Thread-safe after Open (its methods only read).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace medprof::agent {

class WorkDir {
 public:
  // Creates the directory tree (0700) and takes the lock; FAILED_PRECONDITION naming the
  // other agent's pid when it is held.
  static absl::StatusOr<std::unique_ptr<WorkDir>> Open(const std::string& path);
  ~WorkDir();
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;

  // Absolute path.
  const std::string& path() const { return path_; }
  std::string spool_root() const { return path_ + "/spool"; }
  std::string cache_dir() const { return path_ + "/cache"; }

  // `requested` when not empty; else the name in agent-name; else a new one,
  // "<short host>-<8 hex digits of a hash of the path>", written to agent-name.
  absl::StatusOr<std::string> AgentName(const std::string& requested, const std::string& host) const;

 private:
  WorkDir(std::string path, int lock_fd) : path_(std::move(path)), lock_fd_(lock_fd) {}
  const std::string path_;
  const int lock_fd_;
};

}  // namespace medprof::agent
