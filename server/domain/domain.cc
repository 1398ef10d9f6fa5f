#include "server/domain/domain.h"

#include "common/status.h"

namespace medprof::server {

absl::StatusOr<std::unique_ptr<Domain>> Domain::Create(Store* store, const Clock* clock, DomainOptions options) {
  if (store == nullptr || clock == nullptr) return absl::InvalidArgumentError("Domain::Create: store and clock required");
  MEDPROF_RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<Domain>(new Domain(*store, *clock, options));
}

void Domain::Shutdown() {
  core_.work.Shutdown();
  core_.events.Shutdown();
}

}  // namespace medprof::server
