// medprof-agent's command-line options: the flags (CLI11), their defaults taken from the
// environment, and their validation.
//
// main() builds a CLI::App, calls AddFlags, parses, then ValidateOptions, which fills the
// environment defaults ($MEDPROF_SERVER, $MEDPROF_SITE) and refuses bad values with a message
// naming the flag and the allowed values. Checks that need the device inventory (--max-jobs)
// are in ValidateMaxJobs. Pure functions apart from reading files named by flags; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"

namespace CLI {
class App;
}

namespace medprof::agent {


struct AgentOptions {
  // Server address HOST:PORT (IPv6 as [ADDR]:PORT). Required: --server or $MEDPROF_SERVER.
  std::string server;
  // Directory for the spool, the lock and the stable agent name. Required; created if absent.
  std::string work_dir;
  // Agent name, 1..128 of [A-Za-z0-9._-]. Default: the name stored in <work-dir>/agent-name,
  // created on first start as <short host name>-<hash of the work dir>.
  std::string name;
  // medprof-worker executable. Default: medprof-worker in the agent binary's directory.
  std::string worker_path;
  // Extra labels, each "key=value": key 1..64 of [A-Za-z0-9._-], value <= 256 characters
  // without ',' (selectors are comma-separated). They override the automatic labels.
  std::vector<std::string> labels;
  // Site label (e.g. stampede3). Default $MEDPROF_SITE; may be empty.
  std::string site;
  // Jobs run at once, 1..number of devices (--max-jobs). 0 (default, flag not given) = one per
  // device; a given 0 is refused like any value out of range.
  int max_jobs = 0;
  bool max_jobs_given = false;
  // Seconds to end workers and flush uploads after SIGTERM, 1..3600 (default 90).
  int drain_timeout_s = 90;
  // Bytes of user models kept in <work dir>/models (least recently used out), 1 MiB..1 TiB
  // (default 8 GiB); also the largest model this agent runs.
  int64_t model_cache_bytes = int64_t{8} << 30;
  // PEM file of the CA that signed the server certificate. Required unless the server is on
  // loopback (plain text is refused elsewhere). The system bundle works for public CAs.
  std::string tls_ca;
  // PEM client certificate chain and its private key, for servers that require mutual TLS.
  // Optional; both or neither, and only with --tls-ca.
  std::string tls_cert;
  std::string tls_key;
  // File holding the agent's bearer token (or $MEDPROF_TOKEN). Optional; never a flag value.
  std::string token_file;
  // debug|info|warn|error|off (default info).
  std::string log_level = "info";
  // Print the device inventory and labels, then exit (no server needed).
  bool print_inventory = false;
};

// Registers every flag on `app`, bound to `options`. --version is handled by the caller.
void AddFlags(CLI::App* app, AgentOptions* options);

// HOST:PORT after parsing.
struct ServerAddress {
  std::string host;  // without IPv6 brackets
  int port = 0;
  bool loopback = false;
  // The gRPC target: "host:port" or "[v6]:port".
  std::string Target() const;
};
// Parses HOST:PORT or [V6]:PORT; port 1..65535. `field` names the flag in messages.
absl::StatusOr<ServerAddress> ParseServerAddress(const std::string& text,
                                                 const std::string& field = "--server");
// True for localhost, 127.0.0.0/8 and ::1.
bool IsLoopbackHost(const std::string& host);

// Parses "key=value" labels (see AgentOptions::labels) into a map; later keys win.
absl::StatusOr<std::map<std::string, std::string>> ParseLabels(const std::vector<std::string>& labels);

// Checks an agent name (see AgentOptions::name).
absl::Status ValidateAgentName(const std::string& name, const std::string& field = "--name");

// Fills environment defaults and checks every option that does not need the inventory.
// Reads (not keeps) the token file to check it is usable.
absl::Status ValidateOptions(AgentOptions* options, const EnvLookup& env);

// --max-jobs against the inventory: 0 becomes device_count; otherwise 1..device_count.
absl::StatusOr<int> ValidateMaxJobs(int max_jobs, int device_count);

// The bearer token: --token-file's first line, else $MEDPROF_TOKEN, else "" (none).
absl::StatusOr<std::string> LoadToken(const AgentOptions& options, const EnvLookup& env);

}  // namespace medprof::agent
