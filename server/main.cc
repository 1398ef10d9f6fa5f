// medprof-server: wires the SQLite store, the domain and the gRPC endpoint together, runs the
// lease reaper, and shuts down gracefully on SIGTERM/SIGINT (one signal thread, sigwait).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/version.h"
#include "server/domain/domain.h"
#include "server/domain/limits.h"
#include "server/domain/tokens.h"
#include "server/monitor/prometheus_exporter.h"
#include "server/rpc/grpc_server.h"
#include "server/store/db_lock.h"
#include "server/store/sqlite_store.h"

namespace medprof::server {
namespace {

const Logger kLog("server");

struct Flags {
  std::string db;
  std::string listen = "127.0.0.1:7000";
  int64_t lease_ttl_ms = 30000;
  int64_t heartbeat_interval_ms = 5000;
  int max_attempts_default = 3;
  int64_t max_result_bytes_per_run = int64_t{512} << 20;
  std::string synchronous = "normal";
  std::string model_dir;  // "" = <db>.models next to the database (none for :memory:)
  int64_t max_model_bytes = int64_t{2} << 30;
  std::string tls_cert, tls_key, tls_client_ca;
  int tls_reload_interval_s = 60;
  std::string auth;  // "" = off on loopback, tokens elsewhere
  std::string log_level = "info";
  // Prometheus /metrics: HOST:PORT or "off". A failure to bind the default only warns.
  std::string metrics_listen = monitor::kDefaultMetricsListen;
  bool metrics_listen_given = false;
  // Allows --metrics-listen on a non-loopback address (plain HTTP, no authentication).
  bool metrics_insecure = false;
};

// `medprof-server token create|list|revoke`: token administration on the database file (the
// server may be running; a revocation reaches it within limits::kTokenCacheTtl).
struct TokenFlags {
  std::string db;
  std::string role, project, agent, note;
  std::string token_id;
};

int RunToken(const std::string& command, const TokenFlags& f) {
  if (f.db != ":memory:" && !std::filesystem::exists(f.db) && command != "create") {
    std::fprintf(stderr, "medprof-server token %s: --db %s does not exist\n", command.c_str(), f.db.c_str());
    return 2;
  }
  SqliteStoreOptions store_options;
  store_options.path = f.db;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(store_options);
  if (!store.ok()) {
    std::fprintf(stderr, "medprof-server token: %s\n", std::string(store.status().message()).c_str());
    return 2;
  }
  TokenService tokens(**store, *Clock::Real());
  if (command == "create") {
    TokenGrant grant;
    absl::StatusOr<Role> role = ParseRole(f.role);
    if (!role.ok()) {
      std::fprintf(stderr, "medprof-server token create: --%s\n", std::string(role.status().message()).c_str());
      return 1;
    }
    grant.role = *role;
    grant.project = f.project;
    grant.agent_name = f.agent;
    grant.note = f.note;
    absl::StatusOr<CreatedToken> created = tokens.Create(grant);
    if (!created.ok()) {
      std::fprintf(stderr, "medprof-server token create: %s\n", std::string(created.status().message()).c_str());
      return created.status().code() == absl::StatusCode::kInvalidArgument ? 1 : 2;
    }
    // The secret goes to stdout alone (pipe it into a file); the description to stderr.
    std::fprintf(stderr, "created %s (role %s, project %s%s%s); the token is shown only now:\n",
                 created->record.token_id.c_str(), f.role.c_str(), f.project.c_str(),
                 f.agent.empty() ? "" : ", agent ", f.agent.c_str());
    std::printf("%s\n", created->token.c_str());
    return 0;
  }
  if (command == "list") {
    absl::StatusOr<std::vector<TokenRecord>> list = tokens.List();
    if (!list.ok()) {
      std::fprintf(stderr, "medprof-server token list: %s\n", std::string(list.status().message()).c_str());
      return 2;
    }
    std::printf("%-18s %-7s %-20s %-24s %-14s %-14s %s\n", "TOKEN_ID", "ROLE", "PROJECT", "AGENT", "CREATED_MS",
                "REVOKED_MS", "NOTE");
    for (const TokenRecord& t : *list) {
      std::printf("%-18s %-7s %-20s %-24s %-14lld %-14s %s\n", t.token_id.c_str(), t.role.c_str(), t.project.c_str(),
                  t.agent_name.empty() ? "-" : t.agent_name.c_str(), static_cast<long long>(t.created_unix_ms),
                  t.revoked_unix_ms == 0 ? "-" : std::to_string(t.revoked_unix_ms).c_str(), t.note.c_str());
    }
    return 0;
  }
  absl::Status s = tokens.Revoke(f.token_id);
  if (!s.ok()) {
    std::fprintf(stderr, "medprof-server token revoke: %s\n", std::string(s.message()).c_str());
    return s.code() == absl::StatusCode::kNotFound ? 1 : 2;
  }
  std::fprintf(stderr, "revoked %s (a running server stops accepting it within %lld s)\n", f.token_id.c_str(),
               static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(limits::kTokenCacheTtl).count()));
  return 0;
}

// Calls Scheduler::ExpireLeases every `interval` until stopped.
class LeaseReaper {
 public:
  LeaseReaper(Scheduler& scheduler, std::chrono::milliseconds interval)
      : scheduler_(scheduler), interval_(interval), thread_([this] { Loop(); }) {}
  ~LeaseReaper() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
      lock.unlock();
      absl::StatusOr<int> expired = scheduler_.ExpireLeases();
      if (!expired.ok()) kLog.Error("expiring leases: {}", expired.status().ToString());
      lock.lock();
    }
  }

  Scheduler& scheduler_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Exit 1 for a flag value that is wrong (INVALID_ARGUMENT), 2 for anything else (a port in use,
// a locked or read-only database, bad TLS files), as the CLI and the agent do.
int Fail(const absl::Status& s) {
  kLog.Error("cannot start: {}", std::string(s.message()));
  return s.code() == absl::StatusCode::kInvalidArgument ? 1 : 2;
}

// /metrics is plain HTTP without authentication: off loopback only when the operator says so
// (--metrics-insecure). It has no TLS of its own; scrape it through a TLS proxy on loopback.
absl::Status CheckMetricsListen(const Flags& flags) {
  if (flags.metrics_listen == "off" || flags.metrics_insecure) return absl::OkStatus();
  absl::StatusOr<rpc::ListenAddress> address = rpc::ParseListenAddress(flags.metrics_listen);
  if (!address.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics-listen '", flags.metrics_listen,
                                                   "': expected HOST:PORT (e.g. 127.0.0.1:9464) or off"));
  }
  if (rpc::IsLoopback(address->host)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--metrics-listen ", flags.metrics_listen,
      ": /metrics is plain HTTP without authentication, so it listens off loopback only with "
      "--metrics-insecure (or keep it on 127.0.0.1 and scrape it through a TLS proxy)"));
}

int Run(const Flags& flags, const sigset_t& signals) {
  kLog.Info("medprof-server {} starting", kVersionLine);

  // Everything that can be checked without side effects first: a refused start creates no file.
  DomainOptions options;
  options.lease_ttl_ms = flags.lease_ttl_ms;
  options.heartbeat_interval_ms = flags.heartbeat_interval_ms;
  options.max_attempts_default = flags.max_attempts_default;
  options.max_result_bytes_per_run = flags.max_result_bytes_per_run;
  options.model_dir = flags.model_dir.empty() && flags.db != ":memory:" ? flags.db + ".models" : flags.model_dir;
  options.max_model_bytes = flags.max_model_bytes;
  if (absl::Status s = options.Validate(); !s.ok()) return Fail(s);
  if (absl::Status s = CheckMetricsListen(flags); !s.ok()) return Fail(s);
  rpc::GrpcServerOptions server_options;
  server_options.listen = flags.listen;
  server_options.tls_cert_file = flags.tls_cert;
  server_options.tls_key_file = flags.tls_key;
  server_options.tls_client_ca_file = flags.tls_client_ca;
  server_options.tls_reload_interval_s = flags.tls_reload_interval_s;
  if (!flags.auth.empty()) {
    absl::StatusOr<rpc::AuthMode> mode = rpc::ParseAuthMode(flags.auth);
    if (!mode.ok()) return Fail(mode.status());
    server_options.auth = *mode;
  }
  absl::StatusOr<std::unique_ptr<rpc::GrpcServer>> server = rpc::GrpcServer::Create(server_options);
  if (!server.ok()) return Fail(server.status());
  absl::StatusOr<Synchronous> sync = ParseSynchronous(flags.synchronous);
  if (!sync.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--", sync.status().message())));
  if (flags.db != ":memory:") {
    const std::filesystem::path dir = std::filesystem::absolute(flags.db).parent_path();
    if (!std::filesystem::is_directory(dir)) {
      return Fail(absl::FailedPreconditionError(
          absl::StrCat("--db ", flags.db, ": directory ", dir.string(), " does not exist (create it first)")));
    }
  }
  // One server per database: the lock is held until this process exits.
  absl::StatusOr<std::unique_ptr<DbLock>> db_lock = DbLock::Acquire(flags.db);
  if (!db_lock.ok()) return Fail(db_lock.status());
  SqliteStoreOptions store_options;
  store_options.path = flags.db;
  store_options.synchronous = *sync;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(store_options);
  if (!store.ok()) return Fail(store.status());
  kLog.Info("database {}: schema version {}, journal {}, synchronous {}", flags.db, (*store)->schema_version(),
            (*store)->journal_mode(), flags.synchronous);

  absl::StatusOr<std::unique_ptr<Domain>> domain = Domain::Create(store->get(), Clock::Real(), options);
  if (!domain.ok()) return Fail(domain.status());

  std::unique_ptr<monitor::PrometheusExporter> exporter;
  if (flags.metrics_listen != "off") {
    absl::StatusOr<std::unique_ptr<monitor::PrometheusExporter>> e =
        monitor::PrometheusExporter::Start(flags.metrics_listen, **domain);
    if (e.ok()) {
      exporter = std::move(e).value();
      kLog.Info("Prometheus metrics on http://{}/metrics", exporter->address());
    } else if (flags.metrics_listen_given) {
      return Fail(e.status());
    } else {
      kLog.Warn("no Prometheus metrics: {} (pass --metrics-listen HOST:PORT or off)", std::string(e.status().message()));
    }
  }

  if (absl::Status s = (*server)->Start(domain->get()); !s.ok()) return Fail(s);

  if ((*server)->auth_mode() == rpc::AuthMode::kTokens) {
    kLog.Info("bearer tokens required (roles admin, submit, read, agent; `medprof-server token create`)");
  }
  if (!(*server)->tls()) {
    kLog.Warn("plaintext on loopback, no TLS{} (development only)",
              (*server)->auth_mode() == rpc::AuthMode::kOff ? ", no tokens" : "");
  } else if ((*server)->mutual_tls()) {
    kLog.Info("TLS with client certificates (mutual TLS; CA {})", flags.tls_client_ca);
  } else {
    kLog.Info("TLS (certificate {})", flags.tls_cert);
  }
  if ((*server)->tls()) kLog.Info("TLS files re-read every {} s (replace them to renew)", flags.tls_reload_interval_s);
  if (!options.model_dir.empty()) {
    kLog.Info("user models in {} (at most {} bytes a file)", options.model_dir, options.max_model_bytes);
  }
  kLog.Info("lease ttl {} ms, heartbeat interval {} ms, max attempts per job {} (default)", options.lease_ttl_ms,
            options.heartbeat_interval_ms, options.max_attempts_default);
  kLog.Info("listening on {}", (*server)->address());

  const auto reap_every = std::chrono::milliseconds(std::clamp<int64_t>(options.lease_ttl_ms / 10, 100, 1000));
  LeaseReaper reaper((*domain)->scheduler(), reap_every);

  rpc::GrpcServer* srv = server->get();
  std::thread signal_thread([srv, &signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    kLog.Info("received {}: shutting down (in-flight calls get 5 s)", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    srv->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  });
  srv->Wait();
  signal_thread.join();
  kLog.Info("stopped");
  return 0;
}

}  // namespace
}  // namespace medprof::server

int main(int argc, char** argv) {
  // Every thread inherits this mask, so SIGTERM/SIGINT reach only the signal thread's sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  medprof::server::Flags flags;
  CLI::App app{"medprof-server: the medprof job queue, result store and query service"};
  app.set_version_flag("--version", std::string("medprof-server ") + medprof::kVersionLine);
  app.add_option("--db", flags.db, "SQLite database file (created when missing; its directory must exist)");
  app.add_option("--listen", flags.listen, "HOST:PORT to listen on; port 0 = any free port")->capture_default_str();
  app.add_option("--lease-ttl-ms", flags.lease_ttl_ms, "run lease without heartbeats before the run is lost")
      ->capture_default_str();
  app.add_option("--heartbeat-interval-ms", flags.heartbeat_interval_ms, "heartbeat interval told to agents")
      ->capture_default_str();
  app.add_option("--max-attempts-default", flags.max_attempts_default,
                 "attempts per job when a submission does not say (1..10)")
      ->capture_default_str();
  app.add_option("--max-result-bytes-per-run", flags.max_result_bytes_per_run,
                 "bytes of worker records one run may store (1 MiB..64 GiB); past it the upload is refused")
      ->capture_default_str();
  app.add_option("--synchronous", flags.synchronous,
                 "SQLite synchronous level: normal (survives crashes) or full (also power loss)")
      ->capture_default_str();
  app.add_option("--model-dir", flags.model_dir,
                 "directory of uploaded user models (default: <db>.models next to the database; none for :memory:)");
  app.add_option("--max-model-bytes", flags.max_model_bytes, "largest user model file accepted (1..1 TiB)")
      ->capture_default_str();
  app.add_option("--tls-cert", flags.tls_cert, "PEM server certificate chain (required off loopback)");
  app.add_option("--tls-key", flags.tls_key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", flags.tls_client_ca, "PEM CA that client certificates must chain to (mutual TLS)");
  app.add_option("--tls-reload-interval-s", flags.tls_reload_interval_s,
                 "seconds between checks of the TLS files for a renewed certificate (1..86400)")
      ->capture_default_str();
  app.add_option("--auth", flags.auth,
                 "tokens (bearer tokens required) or off (loopback only); default: off on loopback, else tokens");
  app.add_option("--log-level", flags.log_level, "debug|info|warn|error|off")->capture_default_str();
  CLI::Option* metrics_opt =
      app.add_option("--metrics-listen", flags.metrics_listen,
                     "Prometheus /metrics HOST:PORT (plain HTTP: loopback unless --metrics-insecure), or off")
          ->capture_default_str();
  app.add_flag("--metrics-insecure", flags.metrics_insecure,
               "allow --metrics-listen off loopback (plain HTTP, no authentication: anyone who reaches it reads it)");

  medprof::server::TokenFlags token_flags;
  CLI::App* token = app.add_subcommand("token", "create, list or revoke bearer tokens in --db");
  token->require_subcommand(1);
  CLI::App* create = token->add_subcommand("create", "create a token; prints it once on stdout");
  create->add_option("--db", token_flags.db, "SQLite database file")->required();
  create->add_option("--role", token_flags.role, "admin|submit|read|agent")->required();
  create->add_option("--project", token_flags.project, "project it acts in ('*' = every project, admin only)")
      ->required();
  create->add_option("--agent", token_flags.agent, "agent tokens: the agent name it may act as");
  create->add_option("--note", token_flags.note, "free text shown by `token list`");
  CLI::App* list = token->add_subcommand("list", "list tokens (ids, roles, projects; never secrets)");
  list->add_option("--db", token_flags.db, "SQLite database file")->required();
  CLI::App* revoke = token->add_subcommand("revoke", "revoke a token by id");
  revoke->add_option("--db", token_flags.db, "SQLite database file")->required();
  revoke->add_option("token_id", token_flags.token_id, "tok-... as `token list` shows")->required();
  CLI11_PARSE(app, argc, argv);
  flags.metrics_listen_given = metrics_opt->count() > 0;

  if (token->parsed()) {
    medprof::logging::Init("medprof-server", medprof::LogLevel::kWarn);
    const std::string command = create->parsed() ? "create" : list->parsed() ? "list" : "revoke";
    return medprof::server::RunToken(command, token_flags);
  }
  if (flags.db.empty()) {
    std::fprintf(stderr, "medprof-server: --db is required\n");
    return 1;
  }

  medprof::LogLevel level;
  if (!medprof::logging::ParseLevel(flags.log_level, &level)) {
    std::fprintf(stderr, "medprof-server: --log-level '%s' is not a level (allowed debug|info|warn|error|off)\n",
                 flags.log_level.c_str());
    return 1;
  }
  medprof::logging::Init("medprof-server", level);
  return medprof::server::Run(flags, signals);
}
