// The one conversion between gRPC and absl statuses, for every program that speaks gRPC (the
// server's handlers, the CLI, the agent's uplink). absl::StatusCode and grpc::StatusCode share
// their numbering (both follow google.rpc.Code), so the code passes through unchanged and the
// message is kept as the cause. What each side adds around it (the server's logging, the CLI's
// "server H: CALL failed (CODE)" wording, the agent's method name) stays with that side.
//
// Header-only, for targets that link gRPC; pure functions; thread-safe.
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace medprof {

static_assert(static_cast<int>(absl::StatusCode::kInvalidArgument) == grpc::StatusCode::INVALID_ARGUMENT);
static_assert(static_cast<int>(absl::StatusCode::kFailedPrecondition) == grpc::StatusCode::FAILED_PRECONDITION);
static_assert(static_cast<int>(absl::StatusCode::kUnauthenticated) == grpc::StatusCode::UNAUTHENTICATED);
static_assert(static_cast<int>(absl::StatusCode::kDataLoss) == grpc::StatusCode::DATA_LOSS);

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace medprof
