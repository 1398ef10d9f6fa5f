#include "server/domain/domain.h"

#include "common/status.h"

namespace medprof::server {

absl::StatusOr<std::unique_ptr<Domain>> Domain::Create(Store* store, const Clock* clock, DomainOptions options) {
  if (store == nullptr || clock == nullptr) return absl::InvalidArgumentError("Domain::Create: store and clock required");
  MEDPROF_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<BlobDir> model_blobs;
  if (!options.model_dir.empty()) {
    BlobDir::Options blob_options;
    blob_options.path = options.model_dir;
    blob_options.max_file_bytes = static_cast<uint64_t>(options.max_model_bytes);
    MEDPROF_ASSIGN_OR_RETURN(model_blobs, BlobDir::Open(blob_options));
  }
  return std::unique_ptr<Domain>(new Domain(*store, *clock, options, std::move(model_blobs)));
}

void Domain::Shutdown() {
  core_.work.Shutdown();
  core_.events.Shutdown();
}

}  // namespace medprof::server
