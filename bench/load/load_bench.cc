// medprof-load-bench: many simulated agents against one medprof-server, in one process.
//
// Starts medprof-server (--server-bin) on a fresh database in --dir, registers --agents agents
// (each on its own gRPC channel, so its own TCP connection, as real agents are), then for
// --duration-s seconds: every agent heartbeats every --heartbeat-s seconds and, every
// --upload-s seconds, leases a job (AcquireJob, wait 0), uploads one run's results (one
// client stream: RunStarted, --steps step rows, an OpAggregates of --ops rows, a
// KernelAggregates of --kernels rows, a RunSummary) and finishes it (FinishRun SUCCEEDED).
// Studies are submitted up front so every upload finds a queued job. Each agent's first
// heartbeat and first upload fall at a random offset within its period, so the load is
// spread as it would be in a fleet.
//
// Prints: sustained uploads/s, p50/p99/max latency of each RPC, errors, and the server's
// resident memory (VmRSS, peak of once-a-second samples; VmHWM at the end). Raises
// RLIMIT_NOFILE to its hard limit first (the server inherits it: one socket per agent).
//
//   medprof-load-bench --server-bin build/bin/medprof-server --agents 1000 --duration-s 180 [--tokens]
//
// --tokens: the server runs with --auth tokens; an admin token ("*") submits, and every agent
// has its own agent token (made with `medprof-server token create` before the server starts).
#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <queue>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "medprof/v1/service.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = medprof::v1;

struct Flags {
  std::string server_bin;
  std::string dir = "/tmp/medprof-load";
  int agents = 1000;
  int duration_s = 180;
  int heartbeat_s = 5;
  int upload_s = 60;
  int steps = 20;
  int ops = 120;
  int kernels = 160;
  int threads = 96;
  bool tokens = false;
};

// Runs `medprof-server token create ...` and returns the token it prints ("" on failure).
std::string CreateToken(const std::string& server_bin, const std::string& db, const std::vector<std::string>& args) {
  std::string cmd = server_bin + " token create --db " + db;
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  char buf[256] = {0};
  std::string out = fgets(buf, sizeof(buf), p) != nullptr ? std::string(buf) : "";
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// Latencies of one RPC kind, in microseconds.
class Histogram {
 public:
  void Add(int64_t us, bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    us_.push_back(us);
    if (!ok) ++errors_;
  }
  std::string Line(const char* name) {
    std::lock_guard<std::mutex> lock(mu_);
    if (us_.empty()) return std::string(name) + ": no calls";
    std::sort(us_.begin(), us_.end());
    auto q = [&](double p) { return us_[std::min(us_.size() - 1, static_cast<size_t>(p * (us_.size() - 1) + 0.5))]; };
    char buf[256];
    std::snprintf(buf, sizeof(buf), "%-14s n=%-7zu p50 %8.2f ms  p99 %8.2f ms  max %8.2f ms  errors %lld", name,
                  us_.size(), q(0.5) / 1e3, q(0.99) / 1e3, us_.back() / 1e3, static_cast<long long>(errors_));
    return buf;
  }
  int64_t errors() {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
  }

 private:
  std::mutex mu_;
  std::vector<int64_t> us_;
  int64_t errors_ = 0;
};

struct Agent {
  std::string name, id, token;
  std::unique_ptr<v1::AgentService::Stub> stub;
};

struct Event {
  Clock::time_point at;
  int agent;
  bool upload;
  bool operator>(const Event& o) const { return at > o.at; }
};

int64_t RssKb(pid_t pid, const char* key) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key)));
  }
  return -1;
}

v1::RegisterRequest Registration(const std::string& name) {
  v1::RegisterRequest r;
  r.set_protocol_version(v1::PROTOCOL_VERSION_1);
  r.set_agent_name(name);
  r.set_host(name + ".load");
  r.set_version("load-bench");
  auto* d = r.add_devices();
  d->set_index(-1);
  d->set_kind("cpu");
  d->set_name("cpu");
  (*r.mutable_labels())["site"] = "load";
  return r;
}

// One run's worker records (run id and agent id filled per upload).
std::vector<v1::WorkerMessage> RunRecords(const Flags& f) {
  std::vector<v1::WorkerMessage> out;
  v1::WorkerMessage started;
  started.mutable_started()->set_backend("cpu");
  started.mutable_started()->mutable_environment()->set_gpu_name("cpu");
  out.push_back(started);
  for (int i = 0; i < f.steps; ++i) {
    v1::WorkerMessage m;
    m.mutable_step()->set_phase(v1::PHASE_TRAIN);
    m.mutable_step()->set_step(i);
    m.mutable_step()->set_wall_ns(40'000'000 + i * 1000);
    (*m.mutable_step()->mutable_phase_ns())["fwd"] = 15'000'000;
    out.push_back(m);
  }
  v1::WorkerMessage ops;
  for (int i = 0; i < f.ops; ++i) {
    auto* o = ops.mutable_ops()->add_ops();
    o->set_name("aten::op_" + std::to_string(i));
    o->set_phase(i % 2 ? "fwd" : "bwd");
    o->set_category("elementwise");
    o->set_count(20);
    o->set_total_ns(100000 + i);
    o->set_self_ns(50000 + i);
  }
  ops.mutable_ops()->set_steps(f.steps);
  out.push_back(ops);
  v1::WorkerMessage kernels;
  for (int i = 0; i < f.kernels; ++i) {
    auto* k = kernels.mutable_kernels()->add_kernels();
    k->set_name("void kernel_" + std::to_string(i) + "<float>(float*, int)");
    k->set_op("aten::op_" + std::to_string(i % f.ops));
    k->set_phase("fwd");
    k->set_category("conv");
    k->set_count(20);
    k->set_total_ns(200000 + i);
    k->set_min_ns(9000);
    k->set_max_ns(11000);
  }
  kernels.mutable_kernels()->set_steps(f.steps);
  out.push_back(kernels);
  v1::WorkerMessage summary;
  summary.mutable_summary()->set_measured_steps(f.steps);
  summary.mutable_summary()->set_step_ms_median(40.0);
  out.push_back(summary);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"medprof-load-bench: simulated agents against one medprof-server"};
  app.add_option("--server-bin", f.server_bin, "path of medprof-server")->required();
  app.add_option("--dir", f.dir, "scratch directory (database, server log)")->capture_default_str();
  app.add_option("--agents", f.agents, "simulated agents")->capture_default_str();
  app.add_option("--duration-s", f.duration_s, "measured seconds")->capture_default_str();
  app.add_option("--heartbeat-s", f.heartbeat_s, "heartbeat period per agent")->capture_default_str();
  app.add_option("--upload-s", f.upload_s, "upload period per agent")->capture_default_str();
  app.add_option("--steps", f.steps, "step rows per uploaded run")->capture_default_str();
  app.add_option("--ops", f.ops, "op rows per uploaded run")->capture_default_str();
  app.add_option("--kernels", f.kernels, "kernel rows per uploaded run")->capture_default_str();
  app.add_option("--threads", f.threads, "client threads issuing calls")->capture_default_str();
  app.add_flag("--tokens", f.tokens, "server with --auth tokens; one agent token per agent (made with `token create`)");
  CLI11_PARSE(app, argc, argv);

  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);
  std::printf("open-file limit %llu\n", static_cast<unsigned long long>(nofile.rlim_cur));

  std::filesystem::remove_all(f.dir);
  std::filesystem::create_directories(f.dir);
  const std::string log = f.dir + "/server.log";
  const std::string db = f.dir + "/load.db";
  std::string admin_token;
  std::vector<std::string> agent_tokens(f.agents);
  if (f.tokens) {
    const auto t0 = Clock::now();
    admin_token = CreateToken(f.server_bin, db, {"--role", "admin", "--project", "*"});
    for (int i = 0; i < f.agents; ++i) {
      agent_tokens[i] = CreateToken(f.server_bin, db, {"--role", "agent", "--project", "load", "--agent",
                                                       "load-" + std::to_string(i)});
      if (agent_tokens[i].empty()) {
        std::fprintf(stderr, "token create failed for agent %d\n", i);
        return 2;
      }
    }
    std::printf("created %d tokens in %.1f s\n", f.agents + 1,
                std::chrono::duration<double>(Clock::now() - t0).count());
  }
  const pid_t server = fork();
  if (server == 0) {
    std::freopen(log.c_str(), "w", stderr);
    execl(f.server_bin.c_str(), f.server_bin.c_str(), "--db", db.c_str(), "--listen", "127.0.0.1:0",
          "--lease-ttl-ms", "600000", "--heartbeat-interval-ms", std::to_string(f.heartbeat_s * 1000).c_str(),
          "--auth", f.tokens ? "tokens" : "off", static_cast<char*>(nullptr));
    _exit(127);
  }
  // The port: the one "listening on HOST:PORT" line of the server's log (info level, as deployed).
  std::string address;
  for (int i = 0; i < 200 && address.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(log);
    std::string line;
    static const std::regex re("listening on (127\\.0\\.0\\.1:[0-9]+)");
    std::smatch m;
    while (std::getline(in, line)) {
      if (std::regex_search(line, m, re)) address = m[1];
    }
  }
  if (address.empty()) {
    std::fprintf(stderr, "medprof-server did not start; see %s\n", log.c_str());
    kill(server, SIGKILL);
    return 2;
  }
  std::printf("server pid %d on %s, RSS at start %lld kB\n", server, address.c_str(),
              static_cast<long long>(RssKb(server, "VmRSS:")));

  // Queue enough jobs: uploads expected = agents * duration / upload period, with margin.
  auto people = v1::MedprofService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  const int jobs_needed = f.agents * (f.duration_s / f.upload_s + 2) + f.agents;
  // 400 jobs per submission (4 presets x 100 repeats): within the per-token submission limit.
  for (int queued = 0; queued < jobs_needed; queued += 400) {
    v1::SubmitStudyRequest s;
    s.set_name("load");
    for (const char* p : {"baseline", "opt1", "opt2", "opt12"}) s.add_presets(p);
    s.mutable_config()->set_volume(16);
    s.mutable_config()->set_steps(f.steps);
    s.set_repeats(100);
    v1::SubmitStudyResponse out;
    grpc::ClientContext ctx;
    if (f.tokens) ctx.AddMetadata("authorization", "Bearer " + admin_token);
    grpc::Status st = people->SubmitStudy(&ctx, s, &out);
    if (!st.ok()) {
      std::fprintf(stderr, "submit: %s\n", st.error_message().c_str());
      kill(server, SIGKILL);
      return 2;
    }
  }
  std::printf("queued %d jobs\n", jobs_needed);

  std::vector<Agent> agents(f.agents);
  Histogram reg, hb, acq, up, fin;
  {
    std::vector<std::thread> ts;
    std::atomic<int> next{0};
    for (int t = 0; t < 32; ++t) {
      ts.emplace_back([&] {
        for (int i = next++; i < f.agents; i = next++) {
          grpc::ChannelArguments args;
          args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // its own connection, like a real agent
          agents[i].name = "load-" + std::to_string(i);
          agents[i].token = agent_tokens[i];
          agents[i].stub =
              v1::AgentService::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
          grpc::ClientContext ctx;
          if (!agents[i].token.empty()) ctx.AddMetadata("authorization", "Bearer " + agents[i].token);
          v1::RegisterResponse out;
          const auto t0 = Clock::now();
          grpc::Status st = agents[i].stub->Register(&ctx, Registration(agents[i].name), &out);
          reg.Add(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count(), st.ok());
          agents[i].id = out.agent_id();
        }
      });
    }
    for (auto& t : ts) t.join();
  }
  std::printf("registered %d agents; %s\n", f.agents, reg.Line("Register").c_str());

  const std::vector<v1::WorkerMessage> records = RunRecords(f);
  std::mutex mu;
  std::condition_variable cv;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  std::mt19937_64 rng(42);
  const auto start = Clock::now();
  const auto end = start + std::chrono::seconds(f.duration_s);
  for (int i = 0; i < f.agents; ++i) {
    events.push({start + std::chrono::milliseconds(rng() % (f.heartbeat_s * 1000)), i, false});
    events.push({start + std::chrono::milliseconds(rng() % (f.upload_s * 1000)), i, true});
  }
  std::atomic<int64_t> uploads{0}, rows{0}, late_ms_max{0};
  std::atomic<bool> done{false};
  std::vector<std::string> running(f.agents);  // the run an agent holds between acquire and finish

  auto work = [&] {
    while (true) {
      Event e;
      {
        std::unique_lock<std::mutex> lock(mu);
        while (!done && (events.empty() || events.top().at > Clock::now())) {
          if (events.empty()) cv.wait(lock);
          else cv.wait_until(lock, events.top().at);
        }
        if (done) return;
        e = events.top();
        events.pop();
      }
      const int64_t late = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - e.at).count();
      if (late > late_ms_max) late_ms_max = late;
      Agent& a = agents[e.agent];
      if (!e.upload) {
        v1::HeartbeatRequest r;
        r.set_agent_id(a.id);
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!running[e.agent].empty()) r.add_running_run_ids(running[e.agent]);
        }
        v1::HeartbeatResponse out;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        if (!a.token.empty()) ctx.AddMetadata("authorization", "Bearer " + a.token);
        const auto t0 = Clock::now();
        grpc::Status st = a.stub->Heartbeat(&ctx, r, &out);
        hb.Add(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count(), st.ok());
      } else {
        v1::AcquireJobRequest r;
        r.set_agent_id(a.id);
        v1::AcquireJobResponse got;
        grpc::ClientContext actx;
        actx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        if (!a.token.empty()) actx.AddMetadata("authorization", "Bearer " + a.token);
        auto t0 = Clock::now();
        grpc::Status st = a.stub->AcquireJob(&actx, r, &got);
        acq.Add(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count(),
                st.ok() && got.has_assignment());
        if (st.ok() && got.has_assignment()) {
          const std::string run = got.assignment().run_id();
          {
            std::lock_guard<std::mutex> lock(mu);
            running[e.agent] = run;
          }
          grpc::ClientContext uctx;
          uctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
          if (!a.token.empty()) uctx.AddMetadata("authorization", "Bearer " + a.token);
          v1::UploadAck ack;
          t0 = Clock::now();
          auto writer = a.stub->UploadResults(&uctx, &ack);
          uint64_t seq = 0;
          for (const auto& m : records) {
            v1::ResultChunk c;
            c.set_run_id(run);
            c.set_agent_id(a.id);
            c.set_seq(++seq);
            *c.mutable_message() = m;
            if (!writer->Write(c)) break;
          }
          writer->WritesDone();
          st = writer->Finish();
          up.Add(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count(), st.ok());
          v1::FinishRunRequest fr;
          fr.set_agent_id(a.id);
          fr.set_run_id(run);
          fr.set_state(v1::RUN_SUCCEEDED);
          fr.set_last_seq(seq);
          v1::FinishRunResponse fout;
          grpc::ClientContext fctx;
          fctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
          if (!a.token.empty()) fctx.AddMetadata("authorization", "Bearer " + a.token);
          t0 = Clock::now();
          grpc::Status fst = a.stub->FinishRun(&fctx, fr, &fout);
          fin.Add(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count(), fst.ok());
          if (st.ok() && fst.ok()) {
            ++uploads;
            rows += f.steps + f.ops + f.kernels;
          }
          std::lock_guard<std::mutex> lock(mu);
          running[e.agent].clear();
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      events.push({e.at + std::chrono::seconds(e.upload ? f.upload_s : f.heartbeat_s), e.agent, e.upload});
      cv.notify_one();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < f.threads; ++t) pool.emplace_back(work);
  int64_t rss_peak = 0;
  while (Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    rss_peak = std::max(rss_peak, RssKb(server, "VmRSS:"));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  for (auto& t : pool) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();

  std::printf("\n%s\n", f.tokens ? "--auth tokens (one agent token per agent)" : "--auth off");
  std::printf("%d agents, %d s measured (heartbeat every %d s, one run of %d rows every %d s per agent)\n",
              f.agents, f.duration_s, f.heartbeat_s, f.steps + f.ops + f.kernels, f.upload_s);
  std::printf("sustained uploads: %.2f runs/s (%lld runs, %.0f result rows/s)\n", uploads / secs,
              static_cast<long long>(uploads.load()), rows / secs);
  std::printf("%s\n%s\n%s\n%s\n", hb.Line("Heartbeat").c_str(), acq.Line("AcquireJob").c_str(),
              up.Line("UploadResults").c_str(), fin.Line("FinishRun").c_str());
  std::printf("client lateness (schedule slip) max %lld ms\n", static_cast<long long>(late_ms_max.load()));
  std::printf("server RSS: peak sampled %lld kB (%.1f MiB), VmHWM %lld kB\n", static_cast<long long>(rss_peak),
              rss_peak / 1024.0, static_cast<long long>(RssKb(server, "VmHWM:")));
  kill(server, SIGTERM);
  int status = 0;
  waitpid(server, &status, 0);
  return 0;
}
