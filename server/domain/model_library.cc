#include "server/domain/model_library.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/status.h"

namespace medprof::server {
namespace {

absl::Status CheckSha(const std::string& sha256) {
  if (IsSha256Hex(sha256)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("sha256: '", sha256.substr(0, 80),
                                                 "' is not a SHA-256 (allowed: 64 lowercase hex digits)"));
}

absl::Status NoModel(const std::string& project, const std::string& sha256) {
  return absl::NotFoundError(absl::StrCat("sha256: project '", project, "' holds no model ", sha256));
}

}  // namespace

// Claims the upload of one hash for the lifetime of the object.
class ModelLibrary::UploadSlot {
 public:
  UploadSlot(ModelLibrary& lib, std::string sha256) : lib_(lib), sha256_(std::move(sha256)) {}
  ~UploadSlot() {
    if (!claimed_) return;
    std::lock_guard<std::mutex> lock(lib_.mu_);
    lib_.uploading_.erase(sha256_);
  }
  absl::Status Claim() {
    std::lock_guard<std::mutex> lock(lib_.mu_);
    if (!lib_.uploading_.insert(sha256_).second) {
      return absl::AbortedError(absl::StrCat("sha256: another upload of ", sha256_, " is in progress; retry later"));
    }
    claimed_ = true;
    return absl::OkStatus();
  }

 private:
  ModelLibrary& lib_;
  const std::string sha256_;
  bool claimed_ = false;
};

absl::Status ModelLibrary::CheckEnabled() const {
  if (blobs_ != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "models: this server has no model directory (an in-memory database; start it with --model-dir DIR)");
}

absl::Status ModelLibrary::CheckFirstPiece(const ModelPiece& piece) const {
  MEDPROF_RETURN_IF_ERROR(CheckSha(piece.sha256));
  if (piece.file_name.empty() || piece.file_name.size() > 255 || piece.file_name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("file_name: '", piece.file_name.substr(0, 80),
                                                   "' is not a file name (allowed: 1..255 characters, no '/')"));
  }
  const auto limit = static_cast<uint64_t>(core_.options.max_model_bytes);
  if (piece.size_bytes == 0 || piece.size_bytes > limit) {
    return absl::InvalidArgumentError(absl::StrCat("size_bytes: ", piece.size_bytes,
                                                   " is out of range (allowed 1..", limit,
                                                   ", the server's limit --max-model-bytes)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<HasModelResult> ModelLibrary::Has(const CallContext& ctx, const std::string& sha256) {
  MEDPROF_RETURN_IF_ERROR(CheckEnabled());
  MEDPROF_RETURN_IF_ERROR(CheckSha(sha256));
  HasModelResult out;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(out.model, tx.GetModel(ctx.project, sha256));
    return absl::OkStatus();
  }));
  out.present = out.model.has_value() && blobs_->Has(sha256);
  if (!out.present) {
    out.model.reset();
    // A file held for another project is compared from its start, never resumed.
    out.resume_offset = blobs_->Has(sha256) ? 0 : blobs_->PartialBytes(sha256);
  }
  return out;
}

absl::StatusOr<UploadModelResult> ModelLibrary::Upload(const CallContext& ctx,
                                                       absl::FunctionRef<bool(ModelPiece&)> next) {
  MEDPROF_RETURN_IF_ERROR(CheckEnabled());
  ModelPiece piece;
  if (!next(piece)) return absl::InvalidArgumentError("UploadModel: the stream carried no chunk");
  MEDPROF_RETURN_IF_ERROR(CheckFirstPiece(piece));
  const ModelPiece head{piece.sha256, piece.file_name, piece.size_bytes, 0, ""};
  UploadSlot slot(*this, head.sha256);
  MEDPROF_RETURN_IF_ERROR(slot.Claim());
  // A file stored for another project: the bytes are compared, not stored again.
  const bool compare_only = blobs_->Has(head.sha256);
  uint64_t compared = 0;
  UploadModelResult out;
  do {
    MEDPROF_RETURN_IF_ERROR(Accept(head, piece, compare_only, compared));
    out.bytes_received += piece.data.size();
  } while (next(piece));
  const uint64_t held = compare_only ? compared : blobs_->PartialBytes(head.sha256);
  if (held < head.size_bytes) {
    return absl::FailedPreconditionError(absl::StrCat("UploadModel: ", held, " of ", head.size_bytes, " bytes of ",
                                                      head.sha256, " received; resume at offset ",
                                                      compare_only ? 0 : held));
  }
  if (!compare_only) MEDPROF_RETURN_IF_ERROR(blobs_->Commit(head.sha256, head.size_bytes));
  MEDPROF_ASSIGN_OR_RETURN(out.model, Record(ctx, head));
  return out;
}

// Stores one piece of the upload `head` describes, or (compare_only) compares it with the stored
// file at `compared`, which it advances.
absl::Status ModelLibrary::Accept(const ModelPiece& head, const ModelPiece& piece, bool compare_only,
                                  uint64_t& compared) {
  if (piece.sha256 != head.sha256 || piece.size_bytes != head.size_bytes || piece.file_name != head.file_name) {
    return absl::InvalidArgumentError("sha256: every chunk of one upload must name the same file, name and size");
  }
  if (piece.data.size() > kModelChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("data: ", piece.data.size(), " bytes in one chunk (allowed up to ", kModelChunkBytes, ")"));
  }
  if (!compare_only) return blobs_->Append(head.sha256, head.size_bytes, piece.offset, piece.data);
  if (piece.offset != compared) {
    return absl::FailedPreconditionError(absl::StrCat("offset: ", piece.offset, " but the server expects ", compared,
                                                      " (the server holds this file: send it from offset 0)"));
  }
  MEDPROF_ASSIGN_OR_RETURN(std::string stored, blobs_->Read(head.sha256, compared, piece.data.size()));
  if (stored != piece.data) {
    return absl::DataLossError(absl::StrCat("data: the bytes at offset ", compared, " are not those of ",
                                            head.sha256, " (the file changed while it was sent?)"));
  }
  compared += piece.data.size();
  return absl::OkStatus();
}

// Inserts the caller's project's row (or keeps the one there) and returns it.
absl::StatusOr<ModelRecord> ModelLibrary::Record(const CallContext& ctx, const ModelPiece& first) {
  ModelRecord row;
  row.project = ctx.project;
  row.sha256 = first.sha256;
  row.file_name = first.file_name;
  row.size_bytes = static_cast<int64_t>(first.size_bytes);
  row.uploader = ctx.token_id;
  row.created_unix_ms = core_.clock.NowUnixMs();
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(bool inserted, tx.InsertModel(row));
    if (inserted) return absl::OkStatus();
    MEDPROF_ASSIGN_OR_RETURN(std::optional<ModelRecord> existing, tx.GetModel(row.project, row.sha256));
    if (existing.has_value()) row = *existing;
    return absl::OkStatus();
  }));
  return row;
}

absl::StatusOr<std::vector<ModelRecord>> ModelLibrary::List(const CallContext& ctx) {
  MEDPROF_RETURN_IF_ERROR(CheckEnabled());
  std::vector<ModelRecord> out;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(out, tx.ListModels(ctx.all_projects ? "" : ctx.project));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<bool> ModelLibrary::Delete(const CallContext& ctx, const std::string& sha256) {
  MEDPROF_RETURN_IF_ERROR(CheckEnabled());
  MEDPROF_RETURN_IF_ERROR(CheckSha(sha256));
  UploadSlot slot(*this, sha256);
  MEDPROF_RETURN_IF_ERROR(slot.Claim());
  int removed = 0;
  int left = 0;
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(removed, tx.DeleteModel(ctx.all_projects ? "" : ctx.project, sha256));
    MEDPROF_ASSIGN_OR_RETURN(left, tx.CountModelRows(sha256));
    return absl::OkStatus();
  }));
  if (removed == 0) return NoModel(ctx.project, sha256);
  if (left > 0) return false;
  MEDPROF_RETURN_IF_ERROR(blobs_->Delete(sha256));
  return true;
}

// The file's size when `request` names a running run leased to its agent, in a project that
// holds the model.
absl::StatusOr<uint64_t> ModelLibrary::AuthorizeFetch(const FetchModelRequest& request) {
  MEDPROF_RETURN_IF_ERROR(CheckSha(request.sha256));
  MEDPROF_RETURN_IF_ERROR(RequireId(request.agent_id, "agent_id"));
  MEDPROF_RETURN_IF_ERROR(RequireId(request.run_id, "run_id"));
  std::optional<ModelRecord> model;
  std::string project;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(std::optional<RunRecord> run, tx.GetRun(request.run_id));
    if (!run.has_value() || run->agent_id != request.agent_id || run->state != RunState::kRunning) {
      return absl::FailedPreconditionError(absl::StrCat("run_id: '", request.run_id.substr(0, 64),
                                                        "' is not a running run of agent ", request.agent_id));
    }
    MEDPROF_ASSIGN_OR_RETURN(std::optional<StudyRecord> study, tx.GetStudy(run->study_id));
    if (study.has_value()) project = study->project;
    MEDPROF_ASSIGN_OR_RETURN(model, tx.GetModel(project, request.sha256));
    return absl::OkStatus();
  }));
  if (!model.has_value()) return NoModel(project, request.sha256);
  return static_cast<uint64_t>(model->size_bytes);
}

absl::Status ModelLibrary::Fetch(const CallContext&, const FetchModelRequest& request,
                                 absl::FunctionRef<bool(uint64_t, absl::string_view, uint64_t)> write) {
  MEDPROF_RETURN_IF_ERROR(CheckEnabled());
  MEDPROF_ASSIGN_OR_RETURN(uint64_t size, AuthorizeFetch(request));
  if (request.offset > size) {
    return absl::OutOfRangeError(
        absl::StrCat("offset: ", request.offset, " is past the end of the model (allowed 0..", size, ")"));
  }
  for (uint64_t offset = request.offset; offset < size;) {
    MEDPROF_ASSIGN_OR_RETURN(std::string data, blobs_->Read(request.sha256, offset, kModelChunkBytes));
    if (data.empty()) return absl::DataLossError(absl::StrCat("sha256: the stored file ", request.sha256, " is short"));
    if (!write(offset, data, size)) return absl::CancelledError("FetchModel: the agent went away");
    offset += data.size();
  }
  return absl::OkStatus();
}

absl::Status ModelLibrary::CheckReference(const CallContext& ctx, const v1::ModelRef& model) {
  if (!model.local_path().empty()) {
    return absl::InvalidArgumentError("model.local_path: set by the agent that fetched the file, not by a submission");
  }
  MEDPROF_RETURN_IF_ERROR(CheckEnabled());
  MEDPROF_ASSIGN_OR_RETURN(HasModelResult has, Has(ctx, model.sha256()));
  if (has.present) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("model.sha256: project '", ctx.project, "' holds no model ", model.sha256(),
                                          " (upload it first: medprof submit --model FILE does)"));
}

}  // namespace medprof::server
