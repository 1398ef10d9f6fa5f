// SHA-256 (FIPS 180-4) of bytes and of files, as 64 lowercase hex digits: the content hash that
// names a user model file on the server, in the agent's cache and in a run's record.
//
// Self-contained (no OpenSSL) so that the worker, which links no TLS library, can hash too.
// Sha256 objects are not thread-safe; the free functions are.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace medprof {

// Incremental hashing: Update() any number of times, then HexDigest() once.
class Sha256 {
 public:
  Sha256();
  void Update(absl::string_view bytes);
  // Finishes the hash; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes hashed so far
};

std::string Sha256Hex(absl::string_view bytes);
// Streams the file in 1 MiB reads. Errors: NOT_FOUND / PERMISSION_DENIED / INTERNAL with
// "hashing <path>: <strerror>".
absl::StatusOr<std::string> Sha256OfFile(const std::string& path);
// True for 64 lowercase hex digits.
bool IsSha256Hex(absl::string_view text);

}  // namespace medprof
