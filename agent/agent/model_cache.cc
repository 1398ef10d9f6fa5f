#include "agent/agent/model_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"

namespace medprof::agent {
namespace {

const Logger kLog("agent.models");

}  // namespace

absl::StatusOr<std::unique_ptr<ModelCache>> ModelCache::Open(const std::string& dir, uint64_t max_bytes) {
  BlobDir::Options options;
  options.path = dir;
  options.max_file_bytes = max_bytes;
  options.max_total_bytes = max_bytes;
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<BlobDir> blobs, BlobDir::Open(options));
  return std::unique_ptr<ModelCache>(new ModelCache(std::move(blobs)));
}

absl::StatusOr<std::string> ModelCache::Get(const v1::ModelRef& model, const ModelFetch& fetch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (blobs_->Has(model.sha256())) {
    blobs_->Touch(model.sha256());
    return blobs_->PathOf(model.sha256());
  }
  MEDPROF_RETURN_IF_ERROR(blobs_->Reserve(model.size_bytes()));
  MEDPROF_RETURN_IF_ERROR(FetchInto(model, fetch));
  MEDPROF_RETURN_IF_ERROR(blobs_->Commit(model.sha256(), model.size_bytes()));
  blobs_->Touch(model.sha256());
  return blobs_->PathOf(model.sha256());
}

// Fetches the missing bytes, resuming after a broken stream, until the .part is whole.
absl::Status ModelCache::FetchInto(const v1::ModelRef& model, const ModelFetch& fetch) {
  const std::string& sha = model.sha256();
  absl::Status last;
  for (int attempt = 1; attempt <= kFetchAttempts; ++attempt) {
    const uint64_t from = blobs_->PartialBytes(sha);
    if (from >= model.size_bytes()) return absl::OkStatus();
    last = fetch(from, [&](uint64_t offset, absl::string_view data) {
      return blobs_->Append(sha, model.size_bytes(), offset, data);
    });
    if (last.ok() && blobs_->PartialBytes(sha) >= model.size_bytes()) return absl::OkStatus();
    if (last.ok()) {
      last = absl::DataLossError(absl::StrCat("the server's stream ended at byte ", blobs_->PartialBytes(sha), " of ",
                                              model.size_bytes()));
    }
    kLog.Warn("model {}: fetch attempt {} of {} from byte {}: {}", sha.substr(0, 12), attempt, kFetchAttempts, from,
              std::string(last.message()));
    // A refusal (no such model, not this agent's run, a bad offset) does not heal on a retry.
    if (!absl::IsUnavailable(last) && !absl::IsDeadlineExceeded(last) && !absl::IsDataLoss(last)) break;
  }
  return last;
}

}  // namespace medprof::agent
