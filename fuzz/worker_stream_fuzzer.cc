// libFuzzer target: the worker-stream decoder (common/result_stream.h) on arbitrary bytes, as
// the agent reads them from a worker that may have been killed mid-record or gone mad.
// Every record that decodes is also turned into the server's ingest form and back to bytes,
// which must decode to the same message (compared field by field: map entries serialize in
// hash order, so two equal messages need not give the same bytes; a NaN decoded from the
// stream equals the NaN it re-encodes to).
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/result_stream.h"
#include "medprof/v1/results.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("worker-stream", 0);
  if (fd < 0) std::abort();
  size_t off = 0;
  while (off < size) {
    const ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) std::abort();
    off += static_cast<size_t>(n);
  }
  lseek(fd, 0, SEEK_SET);
  medprof::ResultReader reader(fd, /*owns_fd=*/true);
  medprof::v1::WorkerMessage m;
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer same;
  same.set_field_comparator(&comparator);
  for (int i = 0; i < 100000; ++i) {
    absl::StatusOr<bool> next = reader.Next(&m);
    if (!next.ok()) {
      // Refusals are DATA_LOSS (cut short, oversized) or INVALID_ARGUMENT (does not parse).
      const absl::StatusCode c = next.status().code();
      if (c != absl::StatusCode::kDataLoss && c != absl::StatusCode::kInvalidArgument) std::abort();
      break;
    }
    if (!*next) break;
    const std::string bytes = medprof::EncodeDelimited(m);
    medprof::v1::WorkerMessage again;
    // Skip the varint prefix: EncodeDelimited's payload must parse back identically.
    size_t p = 0;
    while (p < bytes.size() && (static_cast<uint8_t>(bytes[p]) & 0x80)) ++p;
    if (!again.ParseFromArray(bytes.data() + p + 1, static_cast<int>(bytes.size() - p - 1))) std::abort();
    if (!same.Compare(again, m)) std::abort();
  }
  return 0;
}
