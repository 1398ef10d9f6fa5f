// medprof-agent: wires the flags, the inventory, the work directory, the uplink and the
// agent together, and turns SIGTERM/SIGINT into a graceful drain (stop_signals.h: further
// SIGTERMs are ignored while draining, a SIGINT then exits at once).
#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/agent/agent.h"
#include "common/file_util.h"
#include "agent/agent/host_facts.h"
#include "agent/agent/inventory.h"
#include "agent/agent/nvml_probe.h"
#include "agent/agent/options.h"
#include "agent/agent/stop_signals.h"
#include "agent/agent/uplink.h"
#include "agent/agent/work_dir.h"
#include "common/logging.h"
#include "common/proto_json.h"
#include "common/status.h"
#include "common/tls_files.h"
#include "common/token_text.h"

namespace {

using namespace medprof::agent;  // NOLINT: main only wires this component

const medprof::Logger kLog("agent");

// Exit 1 for a flag or value the user gave (as the CLI does), 2 for everything else.
int Fail(const absl::Status& s, int code = 2) {
  std::fprintf(stderr, "medprof-agent: %s\n", std::string(s.message()).c_str());
  return code;
}

std::string DefaultWorkerPath() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "medprof-worker";
  return medprof::DirName(std::string(self, static_cast<size_t>(n))) + "/medprof-worker";
}

// --print-inventory: what this agent would register with, as JSON; 0, or 2 when it cannot print.
int PrintInventory(const AgentOptions& options, const HostFacts& facts,
                   const std::map<std::string, std::string>& labels, const Inventory& inventory) {
  medprof::v1::RegisterRequest shown;
  shown.set_protocol_version(medprof::v1::PROTOCOL_VERSION_1);
  shown.set_agent_name(options.name);
  shown.set_host(facts.host);
  shown.set_version(AgentVersionLine());
  for (const OfferedDevice& d : inventory.devices) *shown.add_devices() = d.device;
  for (const auto& [k, v] : labels) (*shown.mutable_labels())[k] = v;
  absl::StatusOr<std::string> json = medprof::MessageToJson(shown, {.pretty = true, .print_defaults = true});
  if (!json.ok()) return Fail(json.status(), 2);
  std::printf("%s", json->c_str());
  if (!inventory.HasGpu()) std::printf("no GPU: %s\n", inventory.no_gpu_reason.c_str());
  return 0;
}

// The connection to the server of --server, with TLS from --tls-* (files read and checked: CA not
// expired, key matches certificate, which is valid now).
absl::StatusOr<std::unique_ptr<Uplink>> MakeUplink(const AgentOptions& options, const std::string& token) {
  MEDPROF_ASSIGN_OR_RETURN(ServerAddress address, ParseServerAddress(options.server));
  UplinkOptions uplink_options;
  uplink_options.target = address.Target();
  uplink_options.token = token;
  MEDPROF_ASSIGN_OR_RETURN(medprof::tls::ClientPems pems,
                           medprof::tls::LoadClientFiles(options.tls_ca, options.tls_cert, options.tls_key));
  uplink_options.use_tls = !options.tls_ca.empty();
  uplink_options.tls_ca_pem = pems.ca;
  uplink_options.tls_cert_pem = pems.cert;
  uplink_options.tls_key_pem = pems.key;
  return Uplink::Create(uplink_options);
}

// Waits for the agent to end while a thread takes the stop signals (blocked in every thread by
// `signals`): the first SIGTERM/SIGINT drains, a second SIGINT exits at once.
absl::Status RunUntilStopped(Agent* running, sigset_t& signals) {
  std::thread signal_thread([&signals, running] {
    bool draining = false;
    for (;;) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      if (sig == SIGUSR2) return;
      switch (OnStopSignal(sig, draining)) {
        case StopSignalAction::kDrain:
          draining = true;
          running->Drain(absl::StrCat("received ", SignalName(sig)));
          break;
        case StopSignalAction::kIgnore:
          kLog.Info("{} while draining: ignored (the drain goes on; SIGINT exits now)", SignalName(sig));
          break;
        case StopSignalAction::kExitNow:
          // Workers die with us (PR_SET_PDEATHSIG); the next start reports their runs INTERRUPTED.
          kLog.Error("{} while draining: exiting now", SignalName(sig));
          ::_exit(128 + sig);
      }
    }
  });
  const absl::Status result = running->Wait();
  pthread_kill(signal_thread.native_handle(), SIGUSR2);
  signal_thread.join();
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  // Every thread inherits this mask; the signal thread takes the signals with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR2);  // main -> signal thread: stop
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"medprof-agent: runs medprof profiling jobs on this node and uploads the results"};
  AgentOptions options;
  bool show_version = false;
  app.add_flag("--version", show_version, "Print the version and exit");
  AddFlags(&app, &options);
  // Before CLI11, whose "not expected" message would print the secret.
  if (absl::Status s = medprof::token::RefuseTokenOnCommandLine(std::vector<std::string>(argv, argv + argc),
                                                                "--token-file FILE (or MEDPROF_TOKEN)");
      !s.ok()) {
    return Fail(s, 1);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (show_version) {
    std::printf("%s\n", AgentVersionLine().c_str());
    return 0;
  }
  const medprof::EnvLookup env = medprof::ProcessEnv();
  if (absl::Status s = ValidateOptions(&options, env); !s.ok()) return Fail(s, 1);
  medprof::LogLevel level = medprof::LogLevel::kInfo;
  medprof::logging::ParseLevel(options.log_level, &level);
  medprof::logging::Init("medprof-agent", level);

  const HostFacts facts = CaptureHostFacts(env, options.site);
  const std::map<std::string, std::string> labels = MakeLabels(facts, *ParseLabels(options.labels));
  std::unique_ptr<GpuProbe> probe = MakeNvmlProbe();
  InventoryInputs inventory_inputs;
  inventory_inputs.cuda_visible_devices = env("CUDA_VISIBLE_DEVICES");
  Inventory inventory = BuildInventory(probe.get(), inventory_inputs);

  if (options.print_inventory) return PrintInventory(options, facts, labels, inventory);
  if (!inventory.HasGpu()) kLog.Info("no GPU ({}); offering the CPU", inventory.no_gpu_reason);

  absl::StatusOr<int> max_jobs =
      ValidateMaxJobs(options.max_jobs, static_cast<int>(inventory.devices.size()));
  if (!max_jobs.ok()) return Fail(max_jobs.status(), max_jobs.status().code() == absl::StatusCode::kInvalidArgument ? 1 : 2);
  const std::string worker = options.worker_path.empty() ? DefaultWorkerPath() : options.worker_path;
  if (::access(worker.c_str(), X_OK) != 0) {
    return Fail(
        absl::InvalidArgumentError(absl::StrCat("--worker: ", worker,
                                                " is not an executable file (install medprof-worker next "
                                                "to medprof-agent or pass --worker PATH)")));
  }
  absl::StatusOr<std::unique_ptr<WorkDir>> work_dir = WorkDir::Open(options.work_dir);
  if (!work_dir.ok()) return Fail(work_dir.status());
  absl::StatusOr<std::string> name = (*work_dir)->AgentName(options.name, facts.host);
  if (!name.ok()) return Fail(name.status());
  absl::StatusOr<std::string> token = LoadToken(options, env);
  if (!token.ok()) return Fail(token.status());
  if (!options.token_file.empty()) {
    if (std::string w = medprof::token::TokenFileWarning(options.token_file); !w.empty()) kLog.Warn("{}", w);
  }
  absl::StatusOr<std::unique_ptr<Uplink>> uplink = MakeUplink(options, *token);
  if (!uplink.ok()) return Fail(uplink.status());

  AgentConfig config;
  config.name = *name;
  config.worker_path = worker;
  config.max_jobs = *max_jobs;
  config.drain_timeout_ms = static_cast<int64_t>(options.drain_timeout_s) * 1000;
  config.model_cache_bytes = static_cast<uint64_t>(options.model_cache_bytes);
  config.labels = labels;
  config.facts = facts;
  config.inventory = std::move(inventory);
  config.server = options.server;
  const std::string work_path = (*work_dir)->path();
  absl::StatusOr<std::unique_ptr<Agent>> agent =
      Agent::Create(std::move(config), *std::move(work_dir), *std::move(uplink), MakeProcessLauncher());
  if (!agent.ok()) return Fail(agent.status());

  kLog.Info(
      "{} starting: name {}, server {} ({}), work dir {}, worker {}", AgentVersionLine(), *name,
      options.server,
      options.tls_ca.empty() ? "plain text, loopback" : (options.tls_cert.empty() ? "TLS" : "mutual TLS"),
      work_path, worker);
  if (absl::Status s = (*agent)->Start(); !s.ok()) {
    kLog.Error("cannot start: {}", s.ToString());
    return 1;
  }

  const absl::Status result = RunUntilStopped(agent->get(), signals);
  if (!result.ok()) {
    kLog.Error("{}", result.ToString());
    return 1;
  }
  return 0;
}
