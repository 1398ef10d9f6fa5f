#include "agent/agent/options.h"

#include "common/net.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/tls_files.h"
#include "common/token_text.h"

namespace medprof::agent {
namespace {

bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

bool AllNameChars(const std::string& s) {
  for (char c : s) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

// A readable file holding `marker` (a PEM block of the named kind).
absl::Status CheckPemFile(const char* flag, const std::string& path, const char* marker, const char* what) {
  auto pem = ReadFile(path);
  if (!pem.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", pem.status().message()));
  if (pem->find(marker) == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " holds no PEM ", what));
  }
  return absl::OkStatus();
}

}  // namespace

void AddFlags(CLI::App* app, AgentOptions* o) {
  app->add_option("--server", o->server, "Server address HOST:PORT (or $MEDPROF_SERVER)");
  app->add_option("--work-dir", o->work_dir,
                  "Directory for the spool, lock and agent name (created if absent)");
  app->add_option("--name", o->name,
                  "Agent name, 1..128 of [A-Za-z0-9._-] (default: stored in <work-dir>/agent-name, "
                  "first made from the host name and a hash of the work dir)");
  app->add_option("--worker", o->worker_path, "medprof-worker executable (default: next to medprof-agent)");
  app->add_option("--label", o->labels,
                  "Extra label key=value (repeat the flag for more); overrides automatic labels")
      ->allow_extra_args(false);
  app->add_option("--site", o->site, "Site label (default $MEDPROF_SITE)");
  app->add_option("--max-jobs", o->max_jobs, "Jobs at once, 1..number of devices (default: one per device)")
      ->each([o](const std::string&) { o->max_jobs_given = true; });
  app->add_option("--drain-timeout-s", o->drain_timeout_s,
                  "Seconds to stop workers and flush uploads after SIGTERM, 1..3600")
      ->capture_default_str();
  app->add_option("--model-cache-bytes", o->model_cache_bytes,
                  "Bytes of user models cached in the work dir, least recently used out (1 MiB..1 TiB)")
      ->capture_default_str();
  app->add_option("--tls-ca", o->tls_ca,
                  "PEM CA bundle that signed the server certificate (required off loopback)");
  app->add_option("--tls-cert", o->tls_cert, "PEM client certificate chain (servers requiring mutual TLS)");
  app->add_option("--tls-key", o->tls_key, "PEM private key of --tls-cert");
  app->add_option("--token-file", o->token_file, "File holding the agent's bearer token (or $MEDPROF_TOKEN)");
  app->add_option("--log-level", o->log_level, "debug|info|warn|error|off")->capture_default_str();
  app->add_flag("--print-inventory", o->print_inventory, "Print devices and labels, then exit");
}

std::string ServerAddress::Target() const {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

bool IsLoopbackHost(const std::string& host) { return net::IsLoopbackHost(host); }

absl::StatusOr<ServerAddress> ParseServerAddress(const std::string& text, const std::string& field) {
  const std::string usage =
      " (expected HOST:PORT, e.g. medprof.example.org:443 or 127.0.0.1:50051; IPv6 as [::1]:50051)";
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": empty", usage));
  ServerAddress out;
  std::string port_text;
  if (text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrCat(field, ": '", text, "' is not a valid address", usage));
    }
    out.host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": '", text, "' is not a valid address", usage));
    }
    out.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  if (out.host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", text, "' has no host", usage));
  }
  for (char c : out.host) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
          c == '_')) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": host '", out.host, "' contains '", std::string(1, c),
                       "' (allowed: letters, digits, '.', '-', '_', and ':' in IPv6)"));
    }
  }
  int port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": port '", port_text, "' is out of range (allowed 1..65535)"));
  }
  out.port = port;
  out.loopback = IsLoopbackHost(out.host);
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> ParseLabels(const std::vector<std::string>& labels) {
  std::map<std::string, std::string> out;
  for (const std::string& l : labels) {
    const size_t eq = l.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--label: '", l, "' is not key=value"));
    }
    const std::string key = l.substr(0, eq);
    const std::string value = l.substr(eq + 1);
    if (key.empty() || key.size() > 64 || !AllNameChars(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--label: key '", key, "' is not allowed (1..64 characters of A-Z a-z 0-9 . _ -)"));
    }
    if (value.size() > 256) {
      return absl::InvalidArgumentError(
          absl::StrCat("--label ", key, ": value has ", value.size(), " characters (allowed 0..256)"));
    }
    for (char c : value) {
      if (c == ',' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--label ", key, ": value '", value, "' contains a comma or a control character (not allowed)"));
      }
    }
    out[key] = value;
  }
  return out;
}

absl::Status ValidateAgentName(const std::string& name, const std::string& field) {
  if (name.empty() || name.size() > 128 || !AllNameChars(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", name, "' is not allowed (1..128 characters of A-Z a-z 0-9 . _ -)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(AgentOptions* o, const EnvLookup& env) {
  LogLevel level;
  if (!logging::ParseLevel(o->log_level, &level)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-level: '", o->log_level, "' is not one of debug, info, warn, error, off"));
  }
  if (o->work_dir.empty() && !o->print_inventory) {
    return absl::InvalidArgumentError("--work-dir: required (a directory for the spool; created if absent)");
  }
  if (o->drain_timeout_s < 1 || o->drain_timeout_s > 3600) {
    return absl::InvalidArgumentError(
        absl::StrCat("--drain-timeout-s: ", o->drain_timeout_s, " is out of range (allowed 1..3600)"));
  }
  if (o->model_cache_bytes < (int64_t{1} << 20) || o->model_cache_bytes > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("--model-cache-bytes: ", o->model_cache_bytes,
                                                   " is out of range (allowed 1048576..1099511627776)"));
  }
  if (o->max_jobs_given && (o->max_jobs < 1 || o->max_jobs > 64)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-jobs: ", o->max_jobs,
                                                   " is out of range (allowed 1..number of devices, at most 64; "
                                                   "leave it out for one job per device)"));
  }
  if (!o->name.empty()) {
    if (absl::Status s = ValidateAgentName(o->name); !s.ok()) return s;
  }
  if (auto labels = ParseLabels(o->labels); !labels.ok()) return labels.status();
  if (o->site.empty()) {
    if (auto site = env("MEDPROF_SITE"); site.has_value()) o->site = *site;
  }
  if (!o->site.empty()) {
    if (auto s = ParseLabels({absl::StrCat("site=", o->site)}); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--site: '", o->site, "' is not allowed (<= 256 characters, no comma or control character)"));
    }
  }
  if (o->print_inventory) return absl::OkStatus();  // no server needed

  if (o->server.empty()) {
    if (auto s = env("MEDPROF_SERVER"); s.has_value()) o->server = *s;
  }
  if (o->server.empty()) {
    return absl::InvalidArgumentError(
        "--server: required (HOST:PORT of medprof-server, or set $MEDPROF_SERVER)");
  }
  auto address = ParseServerAddress(o->server);
  if (!address.ok()) return address.status();
  if (o->tls_ca.empty() && !address->loopback) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-ca: required for the non-loopback server ", o->server,
        " (plain text is allowed only to localhost/127.0.0.1/::1; pass the PEM CA that signed the server "
        "certificate, or /etc/ssl/certs/ca-certificates.crt for a public CA)"));
  }
  if (!o->tls_ca.empty()) {
    MEDPROF_RETURN_IF_ERROR(
        CheckPemFile("--tls-ca", o->tls_ca, "-----BEGIN CERTIFICATE-----", "certificate"));
  }
  if (o->tls_cert.empty() != o->tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key: give both (mutual TLS) or neither");
  }
  if (!o->tls_cert.empty()) {
    if (o->tls_ca.empty()) {
      return absl::InvalidArgumentError("--tls-cert: a client certificate needs TLS; pass --tls-ca as well");
    }
    MEDPROF_RETURN_IF_ERROR(
        CheckPemFile("--tls-cert", o->tls_cert, "-----BEGIN CERTIFICATE-----", "certificate"));
    MEDPROF_RETURN_IF_ERROR(CheckPemFile("--tls-key", o->tls_key, "PRIVATE KEY-----", "private key"));
  }
  // Beyond the markers: the key matches the certificate, which is valid now; the CA has not expired.
  if (auto pems = tls::LoadClientFiles(o->tls_ca, o->tls_cert, o->tls_key); !pems.ok()) {
    return absl::InvalidArgumentError(pems.status().message());
  }
  if (auto token = LoadToken(*o, env); !token.ok()) return token.status();
  return absl::OkStatus();
}

absl::StatusOr<int> ValidateMaxJobs(int max_jobs, int device_count) {
  if (device_count < 1) return absl::FailedPreconditionError("the agent offers no device");
  if (max_jobs == 0) return device_count;
  if (max_jobs < 1 || max_jobs > device_count) {
    return absl::InvalidArgumentError(absl::StrCat("--max-jobs: ", max_jobs, " is out of range (allowed 1..",
                                                   device_count,
                                                   ", the number of devices this agent offers)"));
  }
  return max_jobs;
}

absl::StatusOr<std::string> LoadToken(const AgentOptions& options, const EnvLookup& env) {
  if (!options.token_file.empty()) return token::ReadTokenFile(options.token_file, "--token-file");
  std::optional<std::string> t = env("MEDPROF_TOKEN");
  if (!t.has_value() || t->empty()) return std::string();
  const std::string stripped(absl::StripAsciiWhitespace(*t));
  MEDPROF_RETURN_IF_ERROR(token::CheckShape(stripped, "MEDPROF_TOKEN"));
  return stripped;
}

}  // namespace medprof::agent
