#include "server/rpc/status_mapping.h"

#include <string>

#include "common/logging.h"

namespace medprof::server::rpc {
namespace {

const Logger kLog("rpc");

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status, std::string_view method) {
  if (status.ok()) return grpc::Status::OK;
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
  return ::medprof::ToGrpcStatus(status);
}

}  // namespace medprof::server::rpc
