// Network-address facts shared by the server, agent and CLI.
//
// The one place that decides whether a host is this machine's loopback: plaintext gRPC is
// allowed only there. Pure functions; thread-safe.
#pragma once

#include <string>

namespace medprof::net {

// True for "localhost" (and its common aliases), 127.0.0.0/8, ::1 and ::ffff:127.x.y.z.
// `host` is a bare host: no port, no brackets.
bool IsLoopbackHost(const std::string& host);

}  // namespace medprof::net
