#include "agent/agent/work_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "agent/agent/options.h"
#include "common/status.h"

namespace medprof::agent {

absl::StatusOr<std::unique_ptr<WorkDir>> WorkDir::Open(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("--work-dir: empty path");
  for (const char* sub : {"/spool", "/cache"}) {
    if (absl::Status s = MakeDirs(path + sub); !s.ok()) return Annotate(s, "--work-dir");
  }
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr)
    return ErrnoStatus(absl::StrCat("resolving ", path), errno);
  const std::string abs = resolved;
  const std::string lock_path = abs + "/agent.lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(absl::StrCat("opening ", lock_path), errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder = "another process";
    char buf[32] = {};
    if (::pread(fd, buf, sizeof buf - 1, 0) > 0) {
      holder = absl::StrCat("pid ", absl::StripAsciiWhitespace(buf));
    }
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat("work dir ", abs,
                                                        " is in use by another medprof-agent (", holder,
                                                        "); give each agent its own --work-dir"));
    }
    return ErrnoStatus(absl::StrCat("locking ", lock_path), err);
  }
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(absl::StrCat("writing ", lock_path), err);
  }
  return std::unique_ptr<WorkDir>(new WorkDir(abs, fd));
}

WorkDir::~WorkDir() { ::close(lock_fd_); }

absl::StatusOr<std::string> WorkDir::AgentName(const std::string& requested, const std::string& host) const {
  if (!requested.empty()) {
    if (absl::Status s = ValidateAgentName(requested); !s.ok()) return s;
    return requested;
  }
  const std::string name_path = path_ + "/agent-name";
  if (auto stored = ReadFile(name_path); stored.ok()) {
    const std::string name(absl::StripAsciiWhitespace(*stored));
    if (absl::Status s = ValidateAgentName(name, name_path); !s.ok()) return s;
    return name;
  } else if (!absl::IsNotFound(stored.status())) {
    return stored.status();
  }
  std::string short_host = host.substr(0, host.find('.'));
  for (char& c : short_host) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) c = '-';
  }
  if (short_host.empty()) short_host = "agent";
  if (short_host.size() > 110) short_host.resize(110);
  uint32_t hash = 2166136261u;  // FNV-1a over the absolute path
  for (unsigned char c : path_) hash = (hash ^ c) * 16777619u;
  const std::string name = absl::StrFormat("%s-%08x", short_host, hash);
  if (absl::Status s = WriteFileDurably(name_path, name + "\n"); !s.ok()) return s;
  return name;
}

}  // namespace medprof::agent
