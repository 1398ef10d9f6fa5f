// Handle: the shape of every unary handler of medprof-server's services (services.cc,
// model_service.cc) — authenticate, call the domain, convert, map the status in one place.
//
// Header-only; thread-safe as its arguments are.
#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/statusor.h"
#include "server/domain/call_context.h"
#include "server/rpc/auth.h"
#include "server/rpc/status_mapping.h"

namespace medprof::server::rpc {

// Authenticates the call of `method` (token and role; auth.h), runs `call(ctx)` (returning
// absl::StatusOr<T>) with the caller's CallContext, and on success stores `convert(value)` in
// `out`. Checks of the objects a request names go first in `call`, through AccessControl.
template <typename Call, typename Convert, typename Out>
grpc::Status Handle(Authenticator& auth, grpc::ServerContext* context, const char* method, Call call,
                    Convert convert, Out* out) {
  absl::StatusOr<CallContext> ctx = auth.Authenticate(context, method);
  if (!ctx.ok()) return ToGrpcStatus(ctx.status(), method);
  auto result = call(*ctx);
  if (!result.ok()) return ToGrpcStatus(result.status(), method);
  *out = convert(*result);
  return grpc::Status::OK;
}

}  // namespace medprof::server::rpc
