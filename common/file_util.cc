#include "common/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace medprof {
namespace {

// Closes an fd on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// ReadWholeFile, also saying which step failed ("opening " or "reading ") in *step.
int ReadWholeFile(const std::string& path, std::string* out, const char** step) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  if (step != nullptr) *step = "reading ";
  FdCloser closer(fd);
  out->clear();
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return 0;
    out->append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

absl::Status ErrnoStatus(absl::string_view what, int err) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

int ReadWholeFile(const std::string& path, std::string* out) { return ReadWholeFile(path, out, nullptr); }

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::string out;
  const char* step = "opening ";
  if (const int err = ReadWholeFile(path, &out, &step); err != 0) return ErrnoStatus(absl::StrCat(step, path), err);
  return out;
}

int WriteAll(int fd, absl::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  return 0;
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(absl::StrCat("opening directory ", dir), errno);
  FdCloser closer(fd);
  if (::fsync(fd) != 0) return ErrnoStatus(absl::StrCat("syncing directory ", dir), errno);
  return absl::OkStatus();
}

absl::Status WriteFileDurably(const std::string& path, absl::string_view contents, int mode) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus(absl::StrCat("creating ", tmp), errno);
  {
    FdCloser closer(fd);
    if (const int err = WriteAll(fd, contents); err != 0) {
      ::unlink(tmp.c_str());
      return ErrnoStatus(absl::StrCat("writing ", tmp), err);
    }
    if (::fsync(fd) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      return ErrnoStatus(absl::StrCat("syncing ", tmp), err);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus(absl::StrCat("renaming ", tmp, " to ", path), err);
  }
  return SyncDir(DirName(path));
}

absl::Status MakeDirs(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("MakeDirs: empty path");
  std::string prefix;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    prefix = path.substr(0, pos);
    if (prefix.empty()) continue;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoStatus(absl::StrCat("creating directory ", prefix), errno);
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(absl::StrCat("checking ", path), errno);
  if (!S_ISDIR(st.st_mode))
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a directory"));
  return absl::OkStatus();
}

absl::Status RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus(absl::StrCat("checking ", path), errno);
  }
  if (S_ISDIR(st.st_mode)) {
    DIR* d = ::opendir(path.c_str());
    if (d == nullptr) return ErrnoStatus(absl::StrCat("opening directory ", path), errno);
    std::vector<std::string> children;
    while (struct dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") children.push_back(absl::StrCat(path, "/", name));
    }
    ::closedir(d);
    for (const std::string& child : children) {
      if (absl::Status s = RemoveTree(child); !s.ok()) return s;
    }
    if (::rmdir(path.c_str()) != 0) return ErrnoStatus(absl::StrCat("removing directory ", path), errno);
    return absl::OkStatus();
  }
  if (::unlink(path.c_str()) != 0) return ErrnoStatus(absl::StrCat("removing ", path), errno);
  return absl::OkStatus();
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace medprof
