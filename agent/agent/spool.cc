#include "agent/agent/spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/result_stream.h"

namespace medprof::agent {
namespace {

constexpr char kResults[] = "results.log";
constexpr char kAcked[] = "acked";
constexpr char kOutcome[] = "outcome.pb";
constexpr char kAssignment[] = "assignment.pb";
constexpr char kJob[] = "job.pb";
// A chunk is a WorkerMessage (<= kMaxWorkerMessageBytes) plus the run id and seq.
constexpr uint64_t kMaxChunkBytes = kMaxWorkerMessageBytes + 4096;

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Decodes a varint at data[pos..]; false when the bytes end first or it is over 10 bytes.
bool ReadVarint(const std::string& data, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *pos < data.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(data[(*pos)++]);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

std::string Basename(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

absl::Status WriteMessage(const std::string& path, const google::protobuf::Message& m) {
  std::string bytes;
  if (!m.SerializeToString(&bytes)) return absl::InternalError(absl::StrCat("serializing ", path));
  return WriteFileDurably(path, bytes);
}

}  // namespace

absl::Status ValidateRunId(const std::string& run_id) {
  bool ok = !run_id.empty() && run_id.size() <= 128 && run_id != "." && run_id != "..";
  for (char c : run_id) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) ok = false;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("run_id '", run_id, "' is not allowed (1..128 characters of A-Z a-z 0-9 . _ -)"));
  }
  return absl::OkStatus();
}

RunSpool::RunSpool(std::string dir, std::string run_id, int fd)
    : dir_(std::move(dir)), run_id_(std::move(run_id)), fd_(fd) {}

RunSpool::~RunSpool() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::unique_ptr<RunSpool>> RunSpool::Create(const std::string& dir,
                                                           const v1::Assignment& assignment) {
  const std::string run_id = Basename(dir);
  if (absl::Status s = ValidateRunId(run_id); !s.ok()) return s;
  if (run_id != assignment.run_id()) {
    return absl::InvalidArgumentError(
        absl::StrCat("spool directory ", dir, " does not match run_id '", assignment.run_id(), "'"));
  }
  if (PathExists(dir))
    return absl::AlreadyExistsError(absl::StrCat("spool directory ", dir, " already exists"));
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  if (absl::Status s = WriteMessage(absl::StrCat(dir, "/", kAssignment), assignment); !s.ok()) return s;
  if (absl::Status s = WriteMessage(absl::StrCat(dir, "/", kJob), assignment.config()); !s.ok()) return s;
  if (absl::Status s = SyncDir(DirName(dir)); !s.ok()) return s;
  return Open(dir);
}

absl::StatusOr<std::unique_ptr<RunSpool>> RunSpool::Open(const std::string& dir) {
  const std::string run_id = Basename(dir);
  if (absl::Status s = ValidateRunId(run_id); !s.ok()) return s;
  const std::string results = absl::StrCat(dir, "/", kResults);
  const int fd = ::open(results.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(absl::StrCat("opening ", results), errno);
  std::unique_ptr<RunSpool> spool(new RunSpool(dir, run_id, fd));
  if (absl::Status s = spool->Scan(); !s.ok()) return s;
  return spool;
}

absl::Status RunSpool::Scan() {
  if (auto bytes = ReadFile(absl::StrCat(dir_, "/", kAssignment)); bytes.ok()) {
    v1::Assignment a;
    if (a.ParseFromString(*bytes)) assignment_ = std::move(a);
  }
  const std::string results = absl::StrCat(dir_, "/", kResults);
  auto data = ReadFile(results);
  if (!data.ok()) return data.status();
  size_t pos = 0;
  std::string problem;
  while (pos < data->size()) {
    const size_t start = pos;
    uint64_t size = 0;
    if (!ReadVarint(*data, &pos, &size)) {
      problem = "a record whose size prefix is cut short";
    } else if (size > kMaxChunkBytes || size > data->size() - pos) {
      problem = absl::StrCat("a record cut short (", data->size() - pos, " of ", size, " bytes)");
    } else {
      v1::ResultChunk chunk;
      if (!chunk.ParseFromArray(data->data() + pos, static_cast<int>(size))) {
        problem = "a record that does not parse";
      } else if (chunk.seq() != offsets_.size() + 1 || chunk.run_id() != run_id_) {
        problem = absl::StrCat("a record out of sequence (seq ", chunk.seq(), ", run '", chunk.run_id(),
                               "'; expected seq ", offsets_.size() + 1, ")");
      }
    }
    if (!problem.empty()) {
      pos = start;
      break;
    }
    offsets_.push_back(start);
    pos += size;
  }
  end_ = pos;
  if (!problem.empty()) {
    repair_note_ = absl::StrCat("dropped ", problem, " at byte ", end_, " of ", results, " (",
                                data->size() - end_, " bytes after ", offsets_.size(), " complete records)");
    if (::ftruncate(fd_, static_cast<off_t>(end_)) != 0 || ::fsync(fd_) != 0) {
      return ErrnoStatus(absl::StrCat("truncating ", results, " to its complete records"), errno);
    }
  }

  const std::string acked_path = absl::StrCat(dir_, "/", kAcked);
  if (auto text = ReadFile(acked_path); text.ok()) {
    uint64_t acked = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &acked))
      acked_ = std::min<uint64_t>(acked, offsets_.size());
  } else if (!absl::IsNotFound(text.status())) {
    return text.status();
  }
  const std::string outcome_path = absl::StrCat(dir_, "/", kOutcome);
  if (auto bytes = ReadFile(outcome_path); bytes.ok()) {
    v1::FinishRunRequest outcome;
    if (!outcome.ParseFromString(*bytes)) {
      return absl::DataLossError(absl::StrCat(outcome_path, " does not parse as a FinishRunRequest"));
    }
    outcome_ = std::move(outcome);
  } else if (!absl::IsNotFound(bytes.status())) {
    return bytes.status();
  }
  return absl::OkStatus();
}

absl::Status RunSpool::Append(const v1::WorkerMessage& message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.ok()) return broken_;
  v1::ResultChunk chunk;
  chunk.set_run_id(run_id_);
  chunk.set_seq(offsets_.size() + 1);
  *chunk.mutable_message() = message;
  std::string body;
  if (!chunk.SerializeToString(&body)) return absl::InternalError("serializing a result chunk");
  std::string record;
  AppendVarint(body.size(), &record);
  record += body;
  const std::string path = absl::StrCat(dir_, "/", kResults);
  int err = WriteAll(fd_, record);
  if (err == 0 && ::fdatasync(fd_) != 0) err = errno;
  if (err != 0) {
    // Cut a partial record off again, so the file holds complete records only.
    if (::ftruncate(fd_, static_cast<off_t>(end_)) != 0) {
      broken_ = ErrnoStatus(absl::StrCat("appending result ", chunk.seq(), " to ", path, " (",
                                         std::strerror(err), ") and then truncating it back"),
                            errno);
      return broken_;
    }
    return ErrnoStatus(absl::StrCat("appending result ", chunk.seq(), " to ", path), err);
  }
  offsets_.push_back(end_);
  end_ += record.size();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::ResultChunk>> RunSpool::ReadChunks(uint64_t from_seq, size_t max_chunks,
                                                                  size_t max_bytes) const {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) per chunk
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (from_seq < 1) from_seq = 1;
    size_t bytes = 0;
    for (uint64_t seq = from_seq; seq <= offsets_.size() && ranges.size() < max_chunks; ++seq) {
      const uint64_t begin = offsets_[seq - 1];
      const uint64_t end = seq < offsets_.size() ? offsets_[seq] : end_;
      if (!ranges.empty() && bytes + (end - begin) > max_bytes) break;
      bytes += end - begin;
      ranges.emplace_back(begin, end);
    }
  }
  std::vector<v1::ResultChunk> out;
  out.reserve(ranges.size());
  const std::string path = absl::StrCat(dir_, "/", kResults);
  for (const auto& [begin, end] : ranges) {
    std::string record(end - begin, '\0');
    size_t got = 0;
    while (got < record.size()) {
      const ssize_t r =
          ::pread(fd_, record.data() + got, record.size() - got, static_cast<off_t>(begin + got));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(absl::StrCat("reading ", path), errno);
      }
      if (r == 0) return absl::DataLossError(absl::StrCat(path, " is shorter than its index"));
      got += static_cast<size_t>(r);
    }
    size_t pos = 0;
    uint64_t size = 0;
    v1::ResultChunk chunk;
    if (!ReadVarint(record, &pos, &size) || pos + size != record.size() ||
        !chunk.ParseFromArray(record.data() + pos, static_cast<int>(size))) {
      return absl::DataLossError(absl::StrCat(path, ": record at byte ", begin, " no longer parses"));
    }
    out.push_back(std::move(chunk));
  }
  return out;
}

uint64_t RunSpool::last_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return offsets_.size();
}

uint64_t RunSpool::acked_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return acked_;
}

absl::Status RunSpool::SetAcked(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  if (seq > offsets_.size()) {
    return absl::OutOfRangeError(absl::StrCat("run ", run_id_, ": acknowledgement through seq ", seq,
                                              " exceeds the ", offsets_.size(), " chunks in the spool"));
  }
  if (seq == acked_) return absl::OkStatus();
  if (absl::Status s = WriteFileDurably(absl::StrCat(dir_, "/", kAcked), absl::StrCat(seq, "\n")); !s.ok())
    return s;
  acked_ = seq;
  return absl::OkStatus();
}

absl::Status RunSpool::WriteOutcome(const v1::FinishRunRequest& outcome) {
  // The file first: an outcome in memory tells the uploader that nobody writes to this
  // directory any more (it may remove it).
  absl::Status written = WriteMessage(absl::StrCat(dir_, "/", kOutcome), outcome);
  std::lock_guard<std::mutex> lock(mu_);
  outcome_ = outcome;
  return written;
}

std::optional<v1::FinishRunRequest> RunSpool::outcome() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outcome_;
}

absl::Status RunSpool::Remove() {
  if (absl::Status s = RemoveTree(dir_); !s.ok()) return s;
  return SyncDir(DirName(dir_));
}

absl::StatusOr<std::vector<std::string>> ListRunDirs(const std::string& spool_root) {
  DIR* d = ::opendir(spool_root.c_str());
  if (d == nullptr) return ErrnoStatus(absl::StrCat("listing ", spool_root), errno);
  std::vector<std::string> out;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = absl::StrCat(spool_root, "/", name);
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) out.push_back(path);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace medprof::agent
