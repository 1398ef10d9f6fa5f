// A directory of files named by their SHA-256 (common/sha256.h): where user model files live, on
// the server (a blob directory next to the database, outside SQLite rows) and in an agent's work
// directory (a bounded cache, least recently used out). Issue 21.
//
// Layout: <dir>/<sha256> is a complete file whose content hashes to its name; <dir>/<sha256>.part
// is one being received. Writes resume: PartialBytes says how much of a .part arrived, Append
// continues it at exactly that offset, Commit hashes it and renames it into place (or removes it
// and says both hashes). A reader never sees a file before its hash was checked.
//
// Limits: every file at most `max_file_bytes` (refusals name the limit); with `max_total_bytes`
// set, Reserve evicts complete files least recently used first (Touch marks use) so that an
// incoming file fits — the agent's cache. The server leaves it 0 (unbounded).
//
// Thread-safe (a server streams several uploads at once): one mutex guards the index; Commit hashes
// outside it. One writer per name at a time (callers serialise uploads of one hash); one BlobDir
// per directory per process; two processes must not share a directory.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace medprof {

class BlobDir {
 public:
  struct Options {
    std::string path;                           // created (0700) if missing
    uint64_t max_file_bytes = uint64_t{2} << 30;  // 2 GiB
    uint64_t max_total_bytes = 0;               // 0 = unbounded; else Reserve evicts LRU files
  };

  // Creates the directory, removes nothing: .part files stay for resuming; the LRU order of
  // complete files starts from their modification times.
  static absl::StatusOr<std::unique_ptr<BlobDir>> Open(const Options& options);

  // True when the complete, verified file is there.
  bool Has(absl::string_view sha256) const;
  // Where the complete file is (whether or not it exists).
  std::string PathOf(absl::string_view sha256) const;
  // Bytes of `sha256` received so far (its .part's size; 0 when none).
  uint64_t PartialBytes(absl::string_view sha256) const;

  // Appends `data` to the .part of `sha256` at `offset`, which must be PartialBytes (else
  // FAILED_PRECONDITION saying where to resume). `size_bytes` is the whole file's size:
  // INVALID_ARGUMENT beyond max_file_bytes ("... exceeds the limit of N bytes") or when the data
  // would run past it. INVALID_ARGUMENT for a name that is not 64 lowercase hex digits.
  absl::Status Append(absl::string_view sha256, uint64_t size_bytes, uint64_t offset, absl::string_view data);
  // Checks that the .part holds `size_bytes` bytes hashing to `sha256` and moves it into place.
  // DATA_LOSS naming the expected and actual hash (the .part is removed) or FAILED_PRECONDITION
  // when bytes are missing.
  absl::Status Commit(absl::string_view sha256, uint64_t size_bytes);

  // Up to `max_bytes` of the complete file from `offset` ("" at the end). NOT_FOUND when absent;
  // OUT_OF_RANGE for an offset past the end.
  absl::StatusOr<std::string> Read(absl::string_view sha256, uint64_t offset, size_t max_bytes) const;
  // Removes the complete file and any .part; NOT_FOUND when neither exists.
  absl::Status Delete(absl::string_view sha256);

  // Marks the complete file as just used (LRU order).
  void Touch(absl::string_view sha256);
  // Makes room for an incoming file of `size_bytes` under max_total_bytes, evicting complete
  // files least recently used first; RESOURCE_EXHAUSTED when even an empty cache cannot hold it.
  absl::Status Reserve(uint64_t size_bytes);
  // Bytes held by complete files.
  uint64_t TotalBytes() const;

 private:
  explicit BlobDir(Options options) : o_(std::move(options)) {}
  std::string PartPath(absl::string_view sha256) const;
  absl::Status EvictLocked(uint64_t needed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options o_;
  mutable absl::Mutex mu_;
  // Complete files: sha256 -> (size, last use tick); the tick orders LRU eviction.
  struct Entry {
    uint64_t size = 0;
    uint64_t used = 0;
  };
  std::map<std::string, Entry> files_ ABSL_GUARDED_BY(mu_);
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace medprof
