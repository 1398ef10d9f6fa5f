#include "common/blob_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/sha256.h"
#include "common/status.h"

namespace medprof {
namespace {

namespace fs = std::filesystem;

absl::Status CheckName(absl::string_view sha256) {
  if (IsSha256Hex(sha256)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("sha256: '", sha256, "' is not a SHA-256 (allowed: 64 lowercase hex digits)"));
}

uint64_t FileSize(const std::string& path) {
  std::error_code ec;
  const uintmax_t n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

}  // namespace

absl::StatusOr<std::unique_ptr<BlobDir>> BlobDir::Open(const Options& options) {
  MEDPROF_RETURN_IF_ERROR(MakeDirs(options.path));
  std::unique_ptr<BlobDir> dir(new BlobDir(options));
  std::vector<std::pair<fs::file_time_type, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(options.path, ec)) {
    const std::string name = e.path().filename().string();
    if (IsSha256Hex(name) && e.is_regular_file()) found.emplace_back(e.last_write_time(), name);
  }
  if (ec) return ErrnoStatus(absl::StrCat("listing ", options.path), ec.value());
  std::sort(found.begin(), found.end());  // oldest first: the least recently used
  absl::MutexLock lock(&dir->mu_);
  for (const auto& [time, name] : found) {
    dir->files_[name] = {FileSize(dir->PathOf(name)), ++dir->clock_};
  }
  return dir;
}

std::string BlobDir::PathOf(absl::string_view sha256) const { return absl::StrCat(o_.path, "/", sha256); }

std::string BlobDir::PartPath(absl::string_view sha256) const { return absl::StrCat(o_.path, "/", sha256, ".part"); }

bool BlobDir::Has(absl::string_view sha256) const {
  absl::MutexLock lock(&mu_);
  return files_.count(std::string(sha256)) > 0;
}

uint64_t BlobDir::PartialBytes(absl::string_view sha256) const {
  if (!IsSha256Hex(sha256)) return 0;
  absl::MutexLock lock(&mu_);
  return FileSize(PartPath(sha256));
}

absl::Status BlobDir::Append(absl::string_view sha256, uint64_t size_bytes, uint64_t offset, absl::string_view data) {
  MEDPROF_RETURN_IF_ERROR(CheckName(sha256));
  if (size_bytes > o_.max_file_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("size_bytes: ", size_bytes, " exceeds the limit of ",
                                                   o_.max_file_bytes, " bytes per model file"));
  }
  if (offset + data.size() > size_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("data: ", offset + data.size(), " bytes would exceed the file's ",
                                                   size_bytes, " bytes"));
  }
  absl::MutexLock lock(&mu_);
  const std::string part = PartPath(sha256);
  const uint64_t have = FileSize(part);
  if (offset != have) {
    return absl::FailedPreconditionError(
        absl::StrCat("offset: ", offset, " is not where ", sha256, " stopped; resume at ", have));
  }
  const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(absl::StrCat("opening ", part), errno);
  const int err = WriteAll(fd, data);
  ::close(fd);
  if (err != 0) return ErrnoStatus(absl::StrCat("writing ", part), err);
  return absl::OkStatus();
}

absl::Status BlobDir::Commit(absl::string_view sha256, uint64_t size_bytes) {
  MEDPROF_RETURN_IF_ERROR(CheckName(sha256));
  // Hashed outside the lock (seconds for a large model); one writer per name by contract.
  const std::string part = PartPath(sha256);
  const uint64_t have = FileSize(part);
  if (have != size_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat(sha256, ": ", have, " of ", size_bytes, " bytes received; resume at ", have));
  }
  MEDPROF_ASSIGN_OR_RETURN(const std::string actual, Sha256OfFile(part));
  if (actual != sha256) {
    std::error_code ec;
    fs::remove(part, ec);
    return absl::DataLossError(absl::StrCat("the received file hashes to ", actual, ", not ", sha256,
                                            " (corrupted in transfer; sent again from the start)"));
  }
  absl::MutexLock lock(&mu_);
  if (::rename(part.c_str(), PathOf(sha256).c_str()) != 0) {
    return ErrnoStatus(absl::StrCat("renaming ", part), errno);
  }
  MEDPROF_RETURN_IF_ERROR(SyncDir(o_.path));
  files_[std::string(sha256)] = {size_bytes, ++clock_};
  return absl::OkStatus();
}

absl::StatusOr<std::string> BlobDir::Read(absl::string_view sha256, uint64_t offset, size_t max_bytes) const {
  MEDPROF_RETURN_IF_ERROR(CheckName(sha256));
  uint64_t size = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = files_.find(std::string(sha256));
    if (it == files_.end()) return absl::NotFoundError(absl::StrCat("model ", sha256, " is not stored here"));
    size = it->second.size;
  }
  if (offset > size) {
    return absl::OutOfRangeError(absl::StrCat("offset: ", offset, " is past the end of ", sha256, " (", size, " bytes)"));
  }
  const std::string path = PathOf(sha256);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(absl::StrCat("opening ", path), errno);
  std::string out(static_cast<size_t>(std::min<uint64_t>(max_bytes, size - offset)), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return ErrnoStatus(absl::StrCat("reading ", path), err);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return out;
}

absl::Status BlobDir::Delete(absl::string_view sha256) {
  MEDPROF_RETURN_IF_ERROR(CheckName(sha256));
  absl::MutexLock lock(&mu_);
  std::error_code ec1, ec2;
  const bool file = fs::remove(PathOf(sha256), ec1);
  const bool part = fs::remove(PartPath(sha256), ec2);
  if (ec1 || ec2) return ErrnoStatus(absl::StrCat("removing ", sha256), (ec1 ? ec1 : ec2).value());
  files_.erase(std::string(sha256));
  if (!file && !part) return absl::NotFoundError(absl::StrCat("model ", sha256, " is not stored here"));
  return SyncDir(o_.path);
}

void BlobDir::Touch(absl::string_view sha256) {
  absl::MutexLock lock(&mu_);
  auto it = files_.find(std::string(sha256));
  if (it != files_.end()) it->second.used = ++clock_;
}

uint64_t BlobDir::TotalBytes() const {
  absl::MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& [name, e] : files_) total += e.size;
  return total;
}

absl::Status BlobDir::Reserve(uint64_t size_bytes) {
  if (o_.max_total_bytes == 0) return absl::OkStatus();
  if (size_bytes > o_.max_total_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("a model of ", size_bytes, " bytes exceeds the cache's limit of ",
                                                     o_.max_total_bytes, " bytes"));
  }
  absl::MutexLock lock(&mu_);
  return EvictLocked(size_bytes);
}

absl::Status BlobDir::EvictLocked(uint64_t needed) {
  uint64_t total = 0;
  for (const auto& [name, e] : files_) total += e.size;
  while (total + needed > o_.max_total_bytes && !files_.empty()) {
    auto lru = std::min_element(files_.begin(), files_.end(),
                                [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
    std::error_code ec;
    fs::remove(PathOf(lru->first), ec);
    if (ec) return ErrnoStatus(absl::StrCat("evicting ", lru->first), ec.value());
    total -= lru->second.size;
    files_.erase(lru);
  }
  return SyncDir(o_.path);
}

}  // namespace medprof
