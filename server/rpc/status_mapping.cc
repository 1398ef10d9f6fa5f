#include "server/rpc/status_mapping.h"

#include <string>

#include "common/logging.h"

namespace medprof::server::rpc {
namespace {

const Logger kLog("rpc");

static_assert(static_cast<int>(absl::StatusCode::kInvalidArgument) == grpc::StatusCode::INVALID_ARGUMENT);
static_assert(static_cast<int>(absl::StatusCode::kFailedPrecondition) == grpc::StatusCode::FAILED_PRECONDITION);
static_assert(static_cast<int>(absl::StatusCode::kUnauthenticated) == grpc::StatusCode::UNAUTHENTICATED);
static_assert(static_cast<int>(absl::StatusCode::kDataLoss) == grpc::StatusCode::DATA_LOSS);

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status, std::string_view method) {
  if (status.ok()) return grpc::Status::OK;
  const std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kUnknown:
      kLog.Error("{} failed: {}", method, status.ToString());
      break;
    default:
      kLog.Debug("{} refused: {}", method, status.ToString());
      break;
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace medprof::server::rpc
