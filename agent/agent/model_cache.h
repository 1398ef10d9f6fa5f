// The agent's cache of user models (issue 21): <work dir>/models, a BlobDir (common/blob_dir.h)
// bounded in bytes, least recently used files out when a new one needs room.
//
// Get() returns the path of a verified copy of the model, fetching it from the server only when
// the cache lacks it: from the offset a partial earlier fetch reached (also one an agent restart
// interrupted), retrying a broken stream from where it stopped (kFetchAttempts in all), then
// checking the SHA-256 before the file becomes visible. A file whose bytes do not hash to its
// name is removed and the error says both hashes.
//
// Thread-safe: one mutex serialises Get() (one fetch at a time, so two runs of one model fetch
// it once). Eviction may remove a file a finished run used; a running run holds its own hard
// link (agent.cc), so eviction never pulls a file from under a worker.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/blob_dir.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::agent {

// Fetch attempts per Get() before the error is final.
inline constexpr int kFetchAttempts = 3;

// Receives one piece of the file (its offset and bytes); an error ends the fetch.
using ModelSink = std::function<absl::Status(uint64_t offset, absl::string_view data)>;
// Streams the model from `offset` into the sink (the uplink's FetchModel for one run).
using ModelFetch = std::function<absl::Status(uint64_t offset, const ModelSink& sink)>;

class ModelCache {
 public:
  // Opens (creates) `dir`, holding at most `max_bytes` of models (also the largest one).
  static absl::StatusOr<std::unique_ptr<ModelCache>> Open(const std::string& dir, uint64_t max_bytes);

  // The verified local copy of `model` (sha256, size_bytes), fetched with `fetch` when absent.
  // RESOURCE_EXHAUSTED when the model exceeds the cache; the fetch's error after the last
  // attempt; DATA_LOSS when the bytes do not hash to model.sha256.
  absl::StatusOr<std::string> Get(const v1::ModelRef& model, const ModelFetch& fetch);

  uint64_t TotalBytes() const { return blobs_->TotalBytes(); }

 private:
  explicit ModelCache(std::unique_ptr<BlobDir> blobs) : blobs_(std::move(blobs)) {}
  absl::Status FetchInto(const v1::ModelRef& model, const ModelFetch& fetch);

  const std::unique_ptr<BlobDir> blobs_;
  std::mutex mu_;
};

}  // namespace medprof::agent
