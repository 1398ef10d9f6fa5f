// DbLock: the one-server-per-database guard. A medprof-server takes it on `<db>.lock` (beside
// the database file) before it opens the database, and holds it for its lifetime.
//
// The lock is an exclusive flock(2) on the lock file, which also records the holder's PID, so
// a second server on the same file is refused with a message naming that PID. The kernel
// drops the lock when the holder exits, however it exits (SIGKILL included), so a stale lock
// file never blocks a restart; the file itself is left in place (removing it could race with
// the next holder). Token administration (`medprof-server token ...`) does not take it: it may
// run beside a server.
//
// Owns its file descriptor (closed, and so unlocked, by the destructor). Not copyable;
// thread-compatible (nothing to share after Acquire()).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace medprof::server {

class DbLock {
 public:
  // Locks `<db_path>.lock`, creating it when missing. FAILED_PRECONDITION naming the holder's
  // PID when another process holds it; UNAVAILABLE with the errno text when the file cannot be
  // created or locked. `db_path` ":memory:" needs no lock: returns nullptr.
  static absl::StatusOr<std::unique_ptr<DbLock>> Acquire(const std::string& db_path);
  ~DbLock();
  DbLock(const DbLock&) = delete;
  DbLock& operator=(const DbLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  DbLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  const std::string path_;
  const int fd_;
};

// "<db_path>.lock".
std::string DbLockPath(const std::string& db_path);

}  // namespace medprof::server
