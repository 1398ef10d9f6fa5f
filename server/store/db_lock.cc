#include "server/store/db_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace medprof::server {
namespace {

// The PID the holder wrote into the lock file, or "unknown" (it may not have written it yet).
std::string HolderPid(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "unknown";
  const std::string pid(absl::StripAsciiWhitespace(std::string(buf, static_cast<size_t>(n))));
  return pid.empty() ? "unknown" : pid;
}

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat("lock file ", path, ": ", what, " failed: ", std::strerror(errno)));
}

}  // namespace

std::string DbLockPath(const std::string& db_path) { return db_path + ".lock"; }

absl::StatusOr<std::unique_ptr<DbLock>> DbLock::Acquire(const std::string& db_path) {
  if (db_path == ":memory:") return std::unique_ptr<DbLock>();
  const std::string path = DbLockPath(db_path);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open", path);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    absl::Status s = err == EWOULDBLOCK
                         ? absl::FailedPreconditionError(absl::StrCat(
                               "--db ", db_path, " is in use by another medprof-server (PID ", HolderPid(fd),
                               ", lock file ", path, "): stop that server or pass another --db"))
                         : (errno = err, Errno("flock", path));
    close(fd);
    return s;
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    absl::Status s = Errno("writing the PID", path);
    close(fd);
    return s;
  }
  return std::unique_ptr<DbLock>(new DbLock(path, fd));
}

DbLock::~DbLock() { close(fd_); }

}  // namespace medprof::server
