// ModelLibrary: the user models a project uploads (issue 21) — the files in a blob directory next
// to the database (common/blob_dir.h, named by SHA-256, outside SQLite rows), a `models` row per
// project that holds one (server/store/records.h: ModelRecord).
//
// Rules:
//   - a project sees, uses and fetches only its own models (all_projects callers see every row);
//   - an upload arrives in pieces at increasing offsets and resumes where an interrupted one
//     stopped (HasModel says where); the file becomes visible only after its hash checks;
//   - a file another project already uploaded is not stored twice, but the caller must still send
//     its bytes, which are compared with the stored file (holding a hash proves nothing);
//   - one upload per hash at a time (ABORTED for a second one, to be retried);
//   - every file is at most DomainOptions::max_model_bytes (refusals name the limit);
//   - an agent fetches a model only for a running run it holds the lease of, whose study's
//     project holds the model;
//   - a deleted model's file goes when no project names it any more.
// Without a model directory (an in-memory database and no --model-dir) every call is
// FAILED_PRECONDITION saying so.
//
// Thread-safe. Holds references to the DomainCore and the BlobDir (null = none), which outlive it.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/blob_dir.h"
#include "medprof/v1/workload.pb.h"
#include "server/domain/call_context.h"
#include "server/domain/core.h"

namespace medprof::server {

// Largest piece of a model file in one message, either way.
inline constexpr size_t kModelChunkBytes = size_t{1} << 20;

// One message of an upload stream.
struct ModelPiece {
  std::string sha256;
  std::string file_name;
  uint64_t size_bytes = 0;
  uint64_t offset = 0;
  std::string data;
};

struct HasModelResult {
  bool present = false;        // the caller's project holds it
  uint64_t resume_offset = 0;  // when absent: bytes of an interrupted upload held
  std::optional<ModelRecord> model;
};

struct UploadModelResult {
  ModelRecord model;
  uint64_t bytes_received = 0;
};

struct FetchModelRequest {
  std::string agent_id;
  std::string run_id;
  std::string sha256;
  uint64_t offset = 0;
};

class ModelLibrary {
 public:
  ModelLibrary(DomainCore& core, BlobDir* blobs) : core_(core), blobs_(blobs) {}

  absl::StatusOr<HasModelResult> Has(const CallContext& ctx, const std::string& sha256);
  // Reads pieces with `next` (false = the stream ended) into the blob directory and records the
  // model for the caller's project. FAILED_PRECONDITION "... resume at offset N" when the
  // stream ended before the last byte.
  absl::StatusOr<UploadModelResult> Upload(const CallContext& ctx, absl::FunctionRef<bool(ModelPiece&)> next);
  // The caller's project's models (every project's for all_projects callers), newest first.
  absl::StatusOr<std::vector<ModelRecord>> List(const CallContext& ctx);
  // Removes the model from the caller's project (every project for all_projects callers);
  // true when the file went too. NOT_FOUND when the project holds no such model.
  absl::StatusOr<bool> Delete(const CallContext& ctx, const std::string& sha256);
  // Streams the file from request.offset in pieces of kModelChunkBytes to `write` (offset,
  // data, whole size; false = the caller went away: CANCELLED).
  absl::Status Fetch(const CallContext& ctx, const FetchModelRequest& request,
                     absl::FunctionRef<bool(uint64_t, absl::string_view, uint64_t)> write);
  // A submission's model: held by the caller's project (NOT_FOUND "model.sha256: ... upload it
  // first") and without local_path (the agent's business).
  absl::Status CheckReference(const CallContext& ctx, const v1::ModelRef& model);

 private:
  class UploadSlot;
  absl::Status CheckEnabled() const;
  absl::Status CheckFirstPiece(const ModelPiece& piece) const;
  absl::Status Accept(const ModelPiece& head, const ModelPiece& piece, bool compare_only, uint64_t& compared);
  absl::StatusOr<ModelRecord> Record(const CallContext& ctx, const ModelPiece& first);
  absl::StatusOr<uint64_t> AuthorizeFetch(const FetchModelRequest& request);

  DomainCore& core_;
  BlobDir* const blobs_;
  std::mutex mu_;
  std::set<std::string> uploading_;  // hashes with an upload in progress
};

}  // namespace medprof::server
