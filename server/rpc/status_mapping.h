// The one place where medprof-server turns domain statuses into gRPC statuses.
//
// absl::StatusCode and grpc::StatusCode share their numbering (both follow google.rpc.Code),
// so the code passes through unchanged and the message is kept as the person-readable cause.
// Server-side faults (INTERNAL, DATA_LOSS, UNKNOWN) are logged here with the method name, since
// the caller only sees the message.
//
// Pure functions; thread-safe.
#pragma once

#include <string_view>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "common/grpc_status.h"

namespace medprof::server::rpc {

// common/grpc_status.h's conversion, plus the log line of a server-side fault.
grpc::Status ToGrpcStatus(const absl::Status& status, std::string_view method);
using ::medprof::FromGrpcStatus;

}  // namespace medprof::server::rpc
