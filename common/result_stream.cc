#include "common/result_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "google/protobuf/io/coded_stream.h"

namespace medprof {
namespace {

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

std::string EncodeDelimited(const v1::WorkerMessage& message) {
  std::string body;
  message.SerializeToString(&body);
  std::string out;
  {
    google::protobuf::io::StringOutputStream sos(&out);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.WriteVarint32(static_cast<uint32_t>(body.size()));
  }
  out += body;
  return out;
}

ResultWriter::ResultWriter(int fd, bool owns_fd) : fd_(fd), owns_fd_(owns_fd) {}
ResultWriter::~ResultWriter() {
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::unique_ptr<ResultWriter>> ResultWriter::OpenFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(absl::StrCat("opening result file ", path));
  return std::make_unique<ResultWriter>(fd, true);
}

absl::Status ResultWriter::Write(const v1::WorkerMessage& message) {
  if (message.ByteSizeLong() > kMaxWorkerMessageBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("worker message of ", message.ByteSizeLong(),
                                                     " bytes exceeds the limit of ", kMaxWorkerMessageBytes));
  }
  const std::string rec = EncodeDelimited(message);
  if (const int err = WriteAll(fd_, rec); err != 0) {
    return absl::InternalError(absl::StrCat("writing result record: ", std::strerror(err)));
  }
  ++written_;
  return absl::OkStatus();
}

ResultReader::ResultReader(int fd, bool owns_fd) : fd_(fd), owns_fd_(owns_fd) {}
ResultReader::~ResultReader() {
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::unique_ptr<ResultReader>> ResultReader::OpenFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno(absl::StrCat("opening result file ", path));
  return std::make_unique<ResultReader>(fd, true);
}

bool ResultReader::ReadFull(void* buf, size_t n, size_t* got) {
  *got = 0;
  auto* p = static_cast<char*>(buf);
  while (*got < n) {
    ssize_t r = ::read(fd_, p + *got, n - *got);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (r == 0) break;
    *got += static_cast<size_t>(r);
  }
  return true;
}

absl::StatusOr<bool> ResultReader::Next(v1::WorkerMessage* message) {
  // Varint32 size prefix, read byte by byte (at most 5 bytes).
  uint32_t size = 0;
  int shift = 0;
  for (int i = 0;; ++i) {
    unsigned char b;
    size_t got;
    if (!ReadFull(&b, 1, &got)) return Errno("reading result stream");
    if (got == 0) {
      if (i == 0) return false;  // clean end between records
      return absl::DataLossError(absl::StrCat("result stream ends inside the size of record ", records_ + 1));
    }
    if (i >= 5) return absl::DataLossError(absl::StrCat("record ", records_ + 1, ": malformed size prefix"));
    size |= static_cast<uint32_t>(b & 0x7f) << shift;
    shift += 7;
    if ((b & 0x80) == 0) break;
  }
  if (size > kMaxWorkerMessageBytes) {
    return absl::DataLossError(absl::StrCat("record ", records_ + 1, ": size ", size, " exceeds the limit of ",
                                            kMaxWorkerMessageBytes, " bytes"));
  }
  std::string body(size, '\0');
  size_t got = 0;
  if (!ReadFull(body.data(), size, &got)) return Errno("reading result stream");
  if (got != size) {
    return absl::DataLossError(
        absl::StrCat("record ", records_ + 1, " cut short: ", got, " of ", size, " bytes"));
  }
  if (!message->ParseFromString(body)) {
    return absl::InvalidArgumentError(absl::StrCat("record ", records_ + 1, " is not a WorkerMessage"));
  }
  ++records_;
  return true;
}

}  // namespace medprof
