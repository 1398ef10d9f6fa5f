// medprof-worker: one profiling job = one process. Wiring only; the work is in run.h.
//
//   medprof-worker --preset opt1 --volume 128 --steps 20 --out run.pb
//   medprof-worker --job job.pb --result-fd 3
//   medprof-worker --preset baseline --describe
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/profiler/gpu_probe.h"
#include "agent/worker/config_mapping.h"
#include "agent/worker/describe.h"
#include "agent/worker/exit_codes.h"
#include "agent/worker/result_channel.h"
#include "agent/worker/run.h"
#include "agent/worker/crash_report.h"
#include "agent/worker/signal_watcher.h"
#include "agent/worker/worker_args.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/proto_json.h"
#include "common/result_stream.h"
#include "common/version.h"

namespace {

using medprof::worker::ResultChannel;
using medprof::worker::WorkerArgs;

// After a command line that did not parse: the result channel it named, if any, so the agent
// still gets a WorkerError record (e.g. for an unreadable job file).
std::unique_ptr<ResultChannel> ChannelFromRawArgs(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value;
    if (args[i] == "--result-fd" && i + 1 < args.size()) value = args[i + 1];
    else if (args[i].rfind("--result-fd=", 0) == 0) value = args[i].substr(12);
    if (!value.empty()) {
      char* end = nullptr;
      const long fd = std::strtol(value.c_str(), &end, 10);
      if (end != nullptr && *end == '\0' && fd > 2 && fd < 65536) {
        auto c = ResultChannel::FromFd(static_cast<int>(fd));
        if (c.ok()) return *std::move(c);
      }
      return nullptr;
    }
  }
  return nullptr;
}

int InvalidConfig(ResultChannel* channel, const std::string& message) {
  std::fprintf(stderr, "medprof-worker: %s\n", message.c_str());
  if (channel != nullptr) (void)channel->WriteError("invalid_config", message);
  return medprof::worker::kExitInvalidConfig;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t start_ns = medprof::MonotonicNs();
  medprof::worker::InstallCrashReport();
  // First: SIGTERM/SIGINT handling (stop after the current step; a second signal stops at once).
  std::atomic<ResultChannel*> live_channel{nullptr};
  auto watcher = medprof::worker::SignalWatcher::Start([&live_channel](int signo, int count) {
    if (count >= 2) {
      if (ResultChannel* c = live_channel.load()) {
        (void)c->WriteError("interrupted",
                            absl::StrCat("stopped at once by a second signal (", strsignal(signo), ")"));
      }
      std::_Exit(medprof::worker::kExitInterrupted);
    }
    medprof::logging::Write("worker", medprof::LogLevel::kWarn,
                            absl::StrCat(strsignal(signo),
                                         ": stopping after the current step (send again to stop at once)"));
  });
  if (!watcher.ok()) {
    std::fprintf(stderr, "medprof-worker: %s\n", watcher.status().ToString().c_str());
    return medprof::worker::kExitWorkloadFailed;
  }

  const std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = medprof::worker::ParseArgs(args);
  if (!parsed.ok()) {
    auto channel = ChannelFromRawArgs(args);
    return InvalidConfig(channel.get(), std::string(parsed.status().message()) + " (see --help)");
  }
  WorkerArgs& a = *parsed;
  switch (a.action) {
    case WorkerArgs::Action::kHelp:
      std::fputs(a.help.c_str(), stdout);
      return medprof::worker::kExitOk;
    case WorkerArgs::Action::kVersion: {
      const auto libs = medprof::profiler::DescribeCudaLibraries();
      std::printf("medprof-worker %s\nLibTorch %s%s\n", medprof::kVersionLine,
                  medprof::worker::TorchBuildVersion().c_str(),
                  libs.cuda_compiled ? absl::StrCat(", CUDA runtime ", libs.runtime_version, ", CUPTI API ",
                                                    libs.cupti_version).c_str()
                                     : ", built without CUDA/CUPTI");
      return medprof::worker::kExitOk;
    }
    default:
      break;
  }
  medprof::logging::Init("medprof-worker", a.log_level);

  if (a.action == WorkerArgs::Action::kDecode) {
    // A results file as JSON lines (for scripts and the Nsight Compute comparison).
    auto reader = medprof::ResultReader::OpenFile(a.decode_path);
    if (!reader.ok()) return InvalidConfig(nullptr, std::string(reader.status().message()));
    medprof::v1::WorkerMessage m;
    for (;;) {
      auto more = (*reader)->Next(&m);
      if (!more.ok()) {
        std::fprintf(stderr, "medprof-worker: --decode %s: %s\n", a.decode_path.c_str(),
                     more.status().ToString().c_str());
        return medprof::worker::kExitWorkloadFailed;
      }
      if (!*more) return medprof::worker::kExitOk;
      absl::StatusOr<std::string> line = medprof::MessageToJson(m, {.pretty = false});
      if (!line.ok()) {
        std::fprintf(stderr, "medprof-worker: --decode: %s\n", line.status().ToString().c_str());
        return medprof::worker::kExitWorkloadFailed;
      }
      std::printf("%s", line->c_str());
    }
  }

  if (a.action == WorkerArgs::Action::kDescribe) {
    auto effective = medprof::worker::Effective(a.config);
    if (!effective.ok()) return InvalidConfig(nullptr, std::string(effective.status().message()));
    auto json = medprof::worker::DescribeJson(*effective);
    if (!json.ok()) {  // a bad user model: invalid_config (2); out of memory in its dry run: 3
      std::fprintf(stderr, "medprof-worker: %s\n", json.status().ToString().c_str());
      return medprof::worker::ClassifyFailure(json.status()).exit_code;
    }
    std::printf("%s\n", json->c_str());
    return medprof::worker::kExitOk;
  }

  auto channel = a.out_path.empty() ? ResultChannel::FromFd(a.result_fd) : ResultChannel::OpenFile(a.out_path);
  if (!channel.ok()) return InvalidConfig(nullptr, std::string(channel.status().message()));
  (*channel)->InstallCrashHandler();
  live_channel.store(channel->get());

  auto effective = medprof::worker::Effective(a.config);
  if (!effective.ok()) return InvalidConfig(channel->get(), std::string(effective.status().message()));

  medprof::worker::RunContext ctx;
  ctx.effective = *effective;
  ctx.channel = channel->get();
  ctx.stop_count = &(*watcher)->count();
  ctx.process_start_ns = start_ns;
  int code = medprof::worker::kExitWorkloadFailed;
  try {
    code = medprof::worker::RunWorker(ctx);
  } catch (const std::exception& e) {
    const std::string message = absl::StrCat("unexpected exception: ", e.what());
    std::fprintf(stderr, "medprof-worker: %s\n", message.c_str());
    (void)(*channel)->WriteError("internal", message);
  }
  live_channel.store(nullptr);
  return code;
}
