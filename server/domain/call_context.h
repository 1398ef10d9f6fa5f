// CallContext: what a domain method knows about its caller, without any gRPC type.
//
// The rpc layer fills one per call from the transport (peer address, authenticated identity,
// deadline, a cancellation probe); tests and background work use CallContext::Background().
// Long-running domain methods (long-poll, watch) check cancelled() and the deadline.
//
// A value type; cancelled() may be called from the thread serving the call.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace medprof::server {

struct CallContext {
  // Transport address of the caller, for logs ("ipv4:127.0.0.1:51234").
  std::string peer;
  // Authenticated identity (TLS client certificate subject); "" when unauthenticated
  // (plaintext on loopback, development).
  std::string identity;
  // Project the caller acts in; studies are stored under it. Default "default".
  std::string project = "default";
  // False when the caller sees only the studies (and their jobs, runs, events) of `project`;
  // true (the default: authentication off, admin "*" tokens, background work) = every project.
  bool all_projects = true;
  // Set for agent tokens: the one agent name the caller may act as (Register with it, and use
  // only that agent's agent_id). "" = any agent (authentication off).
  std::string agent_name;
  // Bearer token id of the caller ("tok-..."), for logs and rate limits; "" without tokens.
  std::string token_id;
  // When the caller stops waiting; time_point::max() = no deadline.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // True once the caller has gone away; unset = never.
  std::function<bool()> is_cancelled;

  bool cancelled() const { return is_cancelled && is_cancelled(); }
  static CallContext Background() { return CallContext{}; }
};

}  // namespace medprof::server
