// Small POSIX file helpers, defined once for every program: whole-file reads, durable
// replace-by-rename writes (the agent's spool and work directory, the CLI's report and export
// files), directory creation and removal, errno-to-Status conversion.
//
// "Durable" means: written to a temporary file, fsync'ed, renamed over the target, and the
// directory fsync'ed, so after a crash either the old or the new contents are there, never a
// mix. Stateless; thread-safe as far as the file system is.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace medprof {

// absl::Status for a failed system call: code from errno (ENOSPC -> RESOURCE_EXHAUSTED,
// ENOENT -> NOT_FOUND, EACCES -> PERMISSION_DENIED, else INTERNAL), message "<what>: <strerror>".
absl::Status ErrnoStatus(absl::string_view what, int err);

// Reads the whole file into *out: 0, or the errno of the failing open or read (for callers
// whose messages have their own shape, e.g. "--tls-cert FILE: cannot open (strerror)").
int ReadWholeFile(const std::string& path, std::string* out);
// ReadWholeFile as a Status: "opening <path>: <strerror>" or "reading <path>: ..." (codes as
// ErrnoStatus).
absl::StatusOr<std::string> ReadFile(const std::string& path);
// Writes all of `data` to `fd` (retrying short writes and EINTR); 0 or the failing errno.
int WriteAll(int fd, absl::string_view data);
// Writes `contents` to `path` durably (see above); a new file gets `mode` (before the umask).
absl::Status WriteFileDurably(const std::string& path, absl::string_view contents, int mode = 0600);
// fsync of a directory (after creating, renaming or removing entries in it).
absl::Status SyncDir(const std::string& dir);
// mkdir -p (mode 0700 for new directories).
absl::Status MakeDirs(const std::string& path);
// rm -r; a missing path is OK.
absl::Status RemoveTree(const std::string& path);
bool PathExists(const std::string& path);
// The directory part of a path ("." when none).
std::string DirName(const std::string& path);

}  // namespace medprof
