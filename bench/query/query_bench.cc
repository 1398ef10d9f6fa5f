// medprof-query-bench: how fast the server answers the study's questions on a large store.
//
// Fills a SQLite store (a file, WAL, synchronous=NORMAL — the server's settings) with --runs
// generated succeeded runs (default 10,000: 100 studies x 4 presets x 25 repeats over 3 GPUs),
// each with 10 steps, 100 kernel rows and 50 metric values (25 at scope phase:fwd, 25 at scope
// run), then times, on that store:
//   * compare over a study of 100 runs (QueryEngine::Compare, study_id): computed (a domain
//     without the compare cache), and as served (cached after a study's first compare),
//   * compare over a run filter of 100 runs picked across studies (run_ids),
//   * a kernel diff of two runs (QueryEngine::Diff),
//   * ingest of one run's results in one window (ResultIngestor::Ingest: RunStarted, 10 steps,
//     100 kernels, 50 metric values, 10 findings, a timeline, the summary — one transaction),
// and prints median / p99 per query. Targets (docs/queries.md): compare p99 < 50 ms, ingest of
// one run < 5 ms. Exit code 1 with --check when a target is missed.
//
// With --concurrent-s S it times instead, on the same store, compare (one study) and `studies`
// (the newest 50) at 1, 4 and 20 concurrent clients, then ingest of one run every ~50 ms while
// 20 clients read, each phase S seconds. Targets (issue 22): compare p99 at 20 clients under
// 5 x its 1-client p99, studies p99 at 20 clients under 50 ms, ingest p99 under reads < 20 ms.
//
// The ingest line under reads comes with the ingest's own CPU time and how often the scheduler
// preempted it (getrusage RUSAGE_THREAD): wall time far above CPU time is time spent waiting.
// --max-readers N caps the store's reader connections (SqliteStoreOptions::max_readers);
// --query-nice N sets the query threads' nice value (DomainOptions::query_nice; 0 = none) with
// --concurrent-s; without it queries run on the calling thread, whose CPU time is printed.
// --compare-cache N keeps N comparisons (DomainOptions::compare_cache_entries; 0 = every compare
// computed). --think-ms MS gives each client a think time of that mean between its calls (default
// 0: a closed loop, every client calling again at once).
//
//   medprof-query-bench [--runs N] [--iterations N] [--db PATH] [--check] [--concurrent-s S]
//                       [--max-readers N] [--query-nice N] [--compare-cache N] [--think-ms MS]
#include <algorithm>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"
#include "server/domain/domain.h"
#include "server/domain/query_engine.h"
#include "server/store/sqlite_store.h"

namespace medprof::bench {
namespace {

using server::StoreTx;

constexpr const char* kPresets[] = {"baseline", "opt1", "opt2", "opt12"};
constexpr const char* kGpus[] = {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-32GB"};
constexpr const char* kCategories[] = {"conv", "gemm", "norm", "elementwise", "layout", "copy", "reduction"};
constexpr int kRunsPerStudy = 100;
constexpr int kKernels = 100;
constexpr int kMetrics = 50;
constexpr int kSteps = 10;

double Ms(std::chrono::steady_clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Figures {
  double median = 0, p99 = 0, max = 0;
};

Figures Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Figures f;
  f.median = server::Quantile(v, 0.5);
  f.p99 = server::Quantile(v, 0.99);
  f.max = v.back();
  return f;
}

// This thread's involuntary context switches so far: how often the scheduler took the CPU away.
long ThreadPreemptions() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nivcsw;
}

double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

std::string KernelName(int i) { return absl::StrCat("void kernel_", i, "<float, 128, 4>(Params<float>)"); }

std::vector<server::KernelRow> MakeKernels(std::mt19937_64& rng) {
  std::vector<server::KernelRow> rows;
  for (int i = 0; i < kKernels; ++i) {
    server::KernelRow k;
    k.name = KernelName(i);
    k.op = absl::StrCat("aten::op", i % 30);
    k.phase = i % 3 == 0 ? "fwd" : (i % 3 == 1 ? "bwd" : "optim");
    k.category = kCategories[i % 7];
    k.count = 10 + static_cast<int64_t>(rng() % 20);
    k.total_ns = 1000 + static_cast<int64_t>(rng() % 5'000'000);
    k.min_ns = 100;
    k.max_ns = k.total_ns;
    k.grid = {128, 1, 1};
    k.block = {256, 1, 1};
    k.registers = 64;
    k.theoretical_occupancy = 0.5;
    rows.push_back(std::move(k));
  }
  return rows;
}

std::vector<server::MetricRow> MakeMetrics(std::mt19937_64& rng) {
  static const std::vector<std::string> names = {
      "sm_cycles", "warp_instructions", "duration_ns", "tensor_pipe_pct", "fma_pipe_pct", "achieved_occupancy_pct",
      "l1_hit_pct", "l2_hit_pct", "dram_throughput_pct", "cpi", "stall.long_scoreboard", "stall.math_pipe_throttle",
      "stall.wait", "stall.barrier", "stall.short_scoreboard", "stall.mio_throttle", "stall.lg_throttle",
      "stall.not_selected", "stall.selected", "ipc", "issue_active_pct", "sm_throughput_pct", "dram_bytes",
      "inst_pipe.fma", "inst_pipe.alu"};
  std::vector<server::MetricRow> rows;
  for (int i = 0; i < kMetrics; ++i) {
    const bool phase = i < 25;
    rows.push_back(server::MetricRow{phase ? "phase:fwd" : "run",
                                     phase ? names[i % names.size()] : absl::StrCat("share.", kCategories[i % 7], i),
                                     static_cast<double>(rng() % 10000) / 100.0, ""});
  }
  return rows;
}

absl::Status Fill(server::Store& store, int runs, std::vector<std::string>* run_ids,
                  std::vector<std::string>* study_ids) {
  std::mt19937_64 rng(42);
  const int studies = (runs + kRunsPerStudy - 1) / kRunsPerStudy;
  int made = 0;
  for (int s = 0; s < studies; ++s) {
    MEDPROF_RETURN_IF_ERROR(store.Write([&](StoreTx& tx) -> absl::Status {
      server::StudyRecord st;
      st.study_id = absl::StrFormat("st-%012d", s);
      st.name = "bench";
      st.project = "default";
      st.created_unix_ms = 1;
      MEDPROF_RETURN_IF_ERROR(tx.InsertStudy(st));
      study_ids->push_back(st.study_id);
      for (int i = 0; i < kRunsPerStudy && made < runs; ++i, ++made) {
        server::JobRecord j;
        j.job_id = absl::StrFormat("job-%012d", made);
        j.study_id = st.study_id;
        j.preset = kPresets[i % 4];
        j.repeat = i / 4 + 1;
        j.state = server::JobState::kSucceeded;
        j.config_json = "{}";
        MEDPROF_RETURN_IF_ERROR(tx.InsertJob(j));
        server::RunRecord r;
        r.run_id = absl::StrFormat("run-%012d", made);
        r.job_id = j.job_id;
        r.study_id = st.study_id;
        r.agent_id = "agent-bench";
        r.device_index = 0;
        r.state = server::RunState::kSucceeded;
        MEDPROF_RETURN_IF_ERROR(tx.InsertRun(r));
        r.gpu_name = kGpus[(i / 4) % 3];
        r.backend = "cupti";
        r.summary_json = R"({"measured_steps":10,"layers":[{"layer":"trace","ran":true},{"layer":"metrics","ran":true}]})";
        MEDPROF_RETURN_IF_ERROR(tx.UpdateRunResults(r));
        MEDPROF_RETURN_IF_ERROR(tx.UpdateRunState(r));
        std::vector<server::StepRow> steps;
        for (int k = 0; k < kSteps; ++k) {
          steps.push_back(server::StepRow{.phase = 2, .step = k, .wall_ns = 10'000'000 + static_cast<int64_t>(rng() % 1'000'000)});
        }
        MEDPROF_RETURN_IF_ERROR(tx.InsertSteps(r.run_id, steps));
        MEDPROF_RETURN_IF_ERROR(tx.InsertKernels(r.run_id, MakeKernels(rng)));
        MEDPROF_RETURN_IF_ERROR(tx.InsertMetrics(r.run_id, MakeMetrics(rng)));
        run_ids->push_back(r.run_id);
      }
      return absl::OkStatus();
    }));
  }
  return absl::OkStatus();
}

// One run's upload, as the agent sends it (one window).
std::vector<server::ResultChunk> RunChunks(const std::string& run_id, const std::string& agent_id,
                                           std::mt19937_64& rng) {
  std::vector<v1::WorkerMessage> msgs;
  v1::WorkerMessage m;
  m.mutable_started()->mutable_environment()->set_gpu_name(kGpus[0]);
  m.mutable_started()->set_backend("cupti");
  msgs.push_back(m);
  for (int k = 0; k < kSteps; ++k) {
    m.Clear();
    m.mutable_step()->set_phase(v1::PHASE_TRAIN);
    m.mutable_step()->set_step(k);
    m.mutable_step()->set_wall_ns(10'000'000);
    (*m.mutable_step()->mutable_phase_ns())["fwd"] = 3'000'000;
    msgs.push_back(m);
  }
  m.Clear();
  for (const server::KernelRow& k : MakeKernels(rng)) {
    auto* s = m.mutable_kernels()->add_kernels();
    s->set_name(k.name);
    s->set_op(k.op);
    s->set_phase(k.phase);
    s->set_category(k.category);
    s->set_count(k.count);
    s->set_total_ns(k.total_ns);
  }
  msgs.push_back(m);
  m.Clear();
  for (const server::MetricRow& r : MakeMetrics(rng)) {
    auto* v = m.mutable_metrics()->add_values();
    v->set_scope(r.scope);
    v->set_name(r.name);
    v->set_value(r.value);
  }
  msgs.push_back(m);
  m.Clear();
  for (int i = 0; i < 10; ++i) {
    auto* f = m.mutable_findings()->add_findings();
    f->set_kernel(KernelName(i));
    f->set_rule("memory_bound");
    f->set_priority(0.01 * i);
  }
  msgs.push_back(m);
  m.Clear();
  m.mutable_timeline()->set_steps(1);
  for (int i = 0; i < 200; ++i) {
    auto* e = m.mutable_timeline()->add_events();
    e->set_name(KernelName(i % kKernels));
    e->set_kind("kernel");
    e->set_start_ns(i * 1000);
    e->set_duration_ns(900);
  }
  msgs.push_back(m);
  m.Clear();
  m.mutable_summary()->set_measured_steps(kSteps);
  msgs.push_back(m);
  std::vector<server::ResultChunk> chunks;
  for (size_t i = 0; i < msgs.size(); ++i) chunks.push_back(server::ResultChunk{run_id, agent_id, i + 1, msgs[i]});
  return chunks;
}

// ---------------------------------------------------------------- concurrent reads (--concurrent)

struct Latencies {
  std::vector<double> compare, studies;
};

// `clients` threads, each alternating a compare of a random study and a list of the newest 50
// studies until `until`; every latency recorded. think_ms = 0: a closed loop (each client calls
// again as soon as it has its answer); > 0: each client waits an exponentially distributed time
// of that mean between calls, as people and CLI processes do.
Latencies ReadLoad(server::Domain& domain, const std::vector<std::string>& study_ids, int clients,
                   std::chrono::steady_clock::time_point until, double think_ms) {
  std::vector<Latencies> per(clients);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937_64 rng(100 + c);
      std::exponential_distribution<double> think(think_ms > 0 ? 1.0 / think_ms : 1.0);
      const server::CallContext ctx = server::CallContext::Background();
      for (bool compare = (c % 2 == 0); std::chrono::steady_clock::now() < until; compare = !compare) {
        if (think_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(think(rng)));
        const auto start = std::chrono::steady_clock::now();
        absl::Status s;
        if (compare) {
          server::CompareRequest r;
          r.study_id = study_ids[rng() % study_ids.size()];
          s = domain.queries().Compare(ctx, r).status();
        } else {
          server::ListStudiesRequest r;
          r.limit = 50;
          s = domain.studies().ListStudies(ctx, r).status();
        }
        if (!s.ok()) {
          std::fprintf(stderr, "%s: %s\n", compare ? "compare" : "studies", s.ToString().c_str());
          std::exit(2);
        }
        (compare ? per[c].compare : per[c].studies).push_back(Ms(std::chrono::steady_clock::now() - start));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  Latencies all;
  for (const Latencies& l : per) {
    all.compare.insert(all.compare.end(), l.compare.begin(), l.compare.end());
    all.studies.insert(all.studies.end(), l.studies.begin(), l.studies.end());
  }
  return all;
}

// A registered agent that leases and ingests runs of a submitted study, one at a time.
class Ingester {
 public:
  static absl::StatusOr<Ingester> Create(server::Domain& domain) {
    const server::CallContext ctx = server::CallContext::Background();
    server::RegisterAgentRequest reg;
    reg.protocol_version = 1;
    reg.agent_name = "bench-agent";
    reg.max_concurrent_jobs = 1;
    server::DeviceRecord d;
    d.index = 0;
    d.kind = "cuda";
    d.name = kGpus[0];
    reg.devices = {d};
    MEDPROF_ASSIGN_OR_RETURN(auto agent, domain.agents().Register(ctx, reg));
    return Ingester(domain, agent.agent_id);
  }
  // Submits a study of 100 jobs to lease from.
  absl::Status Submit() {
    server::SubmitStudyRequest sub;
    sub.presets = {"baseline"};
    sub.config.set_volume(16);
    sub.config.set_base_channels(8);
    sub.repeats = 100;
    return domain_->studies().SubmitStudy(server::CallContext::Background(), sub).status();
  }
  // One ingest: its wall time, this thread's CPU time during it, and how often it was preempted.
  struct Sample {
    double wall_ms = 0, cpu_ms = 0;
    long preemptions = 0;
  };
  // Leases one run, ingests its results (timed) and finishes it.
  absl::StatusOr<Sample> One(std::mt19937_64& rng) {
    const server::CallContext ctx = server::CallContext::Background();
    server::AcquireJobRequest acq;
    acq.agent_id = agent_id_;
    MEDPROF_ASSIGN_OR_RETURN(auto a, domain_->scheduler().AcquireJob(ctx, acq));
    if (!a.has_value()) {
      MEDPROF_RETURN_IF_ERROR(Submit());
      MEDPROF_ASSIGN_OR_RETURN(a, domain_->scheduler().AcquireJob(ctx, acq));
      if (!a.has_value()) return absl::InternalError("no job to lease after a submission");
    }
    const std::vector<server::ResultChunk> chunks = RunChunks(a->run_id, agent_id_, rng);
    const long preempted0 = ThreadPreemptions();
    const double cpu0 = ThreadCpuMs();
    const auto start = std::chrono::steady_clock::now();
    MEDPROF_RETURN_IF_ERROR(domain_->ingestor().Ingest(ctx, chunks).status());
    Sample sample{Ms(std::chrono::steady_clock::now() - start), ThreadCpuMs() - cpu0,
                  ThreadPreemptions() - preempted0};
    server::FinishRunRequest fin;
    fin.agent_id = agent_id_;
    fin.run_id = a->run_id;
    fin.state = server::RunState::kSucceeded;
    fin.last_seq = chunks.size();
    MEDPROF_RETURN_IF_ERROR(domain_->scheduler().FinishRun(ctx, fin).status());
    return sample;
  }

 private:
  Ingester(server::Domain& domain, std::string agent_id) : domain_(&domain), agent_id_(std::move(agent_id)) {}
  server::Domain* domain_;
  std::string agent_id_;
};

void PrintLine(const char* what, std::vector<double> v) {
  if (v.empty()) {
    std::printf("  %-34s (no calls)\n", what);
    return;
  }
  const size_t calls = v.size();
  const Figures f = Summarize(std::move(v));
  std::printf("  %-34s p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  (%zu calls)\n", what, f.median, f.p99, f.max,
              calls);
}

// Compare and list latencies at 1, 4 and 20 concurrent clients, then ingest latency while 20
// clients read; each phase `seconds` long. Returns 1 when a target is missed.
int ConcurrentReads(server::Domain& domain, const std::vector<std::string>& study_ids, int seconds,
                    double think_ms) {
  std::map<int, Figures> compare_at, studies_at;
  // Every study's comparison made once before the clock starts, so that each phase times the same
  // thing (cache hits) whatever its number of calls: with few calls (think time) the ten first
  // computes would otherwise be the 1-client p99.
  for (const std::string& id : study_ids) {
    server::CompareRequest r;
    r.study_id = id;
    if (absl::Status s = domain.queries().Compare(server::CallContext::Background(), r).status(); !s.ok()) {
      std::fprintf(stderr, "compare warm-up: %s\n", s.ToString().c_str());
      return 2;
    }
  }
  for (int clients : {1, 4, 20}) {
    Latencies l =
        ReadLoad(domain, study_ids, clients, std::chrono::steady_clock::now() + std::chrono::seconds(seconds), think_ms);
    std::printf("%d concurrent client(s), %d s, think time %s:\n", clients, seconds,
                think_ms > 0 ? absl::StrFormat("%.0f ms (mean)", think_ms).c_str() : "none (closed loop)");
    compare_at[clients] = Summarize(l.compare);
    studies_at[clients] = Summarize(l.studies);
    PrintLine("compare (one study of 100 runs)", l.compare);
    PrintLine("studies (newest 50)", l.studies);
  }
  auto ingester = Ingester::Create(domain);
  if (!ingester.ok()) {
    std::fprintf(stderr, "ingest setup: %s\n", ingester.status().ToString().c_str());
    return 2;
  }
  std::vector<double> ingest, ingest_cpu;
  long preempted = 0, preempted_ingests = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::thread readers([&] { ReadLoad(domain, study_ids, 20, until, think_ms); });
  pthread_setname_np(pthread_self(), "bench-ingest");  // to find it in perf sched / top -H
  std::mt19937_64 rng(9);
  while (std::chrono::steady_clock::now() < until) {
    absl::StatusOr<Ingester::Sample> one = ingester->One(rng);
    if (!one.ok()) {
      std::fprintf(stderr, "ingest: %s\n", one.status().ToString().c_str());
      std::exit(2);
    }
    ingest.push_back(one->wall_ms);
    ingest_cpu.push_back(one->cpu_ms);
    preempted += one->preemptions;
    preempted_ingests += one->preemptions > 0 ? 1 : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // an upload every ~50 ms
  }
  readers.join();
  std::printf("ingest while 20 clients read, %d s:\n", seconds);
  const Figures ing = Summarize(ingest);
  PrintLine("ingest of one run (one window)", ingest);
  PrintLine("  its CPU time (the rest is waiting)", ingest_cpu);
  std::printf("  ingests preempted by the scheduler: %ld of %zu (%ld preemptions)\n", preempted_ingests,
              ingest.size(), preempted);
  const bool ok_compare = compare_at[20].p99 < 5 * compare_at[1].p99;
  const bool ok_studies = studies_at[20].p99 < 50;
  const bool ok_ingest = ing.p99 < 20;
  std::printf("targets: compare p99 at 20 clients < 5 x at 1 client: %s (%.2f vs 5 x %.2f ms); studies p99 at 20 "
              "clients < 50 ms: %s (%.2f ms); ingest p99 under reads < 20 ms: %s (%.2f ms)\n",
              ok_compare ? "met" : "MISSED", compare_at[20].p99, compare_at[1].p99, ok_studies ? "met" : "MISSED",
              studies_at[20].p99, ok_ingest ? "met" : "MISSED", ing.p99);
  return ok_compare && ok_studies && ok_ingest ? 0 : 1;
}

int Main(int argc, char** argv) {
  double think_ms = 0;
  int runs = 10000, iterations = 200, concurrent_s = 0, max_readers = server::SqliteStoreOptions().max_readers;
  server::DomainOptions domain_options;
  bool check = false;
  std::string db;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (a == "--iterations" && i + 1 < argc) iterations = std::atoi(argv[++i]);
    else if (a == "--db" && i + 1 < argc) db = argv[++i];
    else if (a == "--check") check = true;
    else if (a == "--concurrent-s" && i + 1 < argc) concurrent_s = std::atoi(argv[++i]);
    else if (a == "--max-readers" && i + 1 < argc) max_readers = std::atoi(argv[++i]);
    else if (a == "--query-nice" && i + 1 < argc) domain_options.query_nice = std::atoi(argv[++i]);
    else if (a == "--compare-cache" && i + 1 < argc) domain_options.compare_cache_entries = std::atoi(argv[++i]);
    else if (a == "--think-ms" && i + 1 < argc) think_ms = std::atof(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: medprof-query-bench [--runs N] [--iterations N] [--db PATH] [--check] [--concurrent-s S] "
                   "[--max-readers N] [--query-nice N] [--compare-cache N] [--think-ms MS]\n");
      return 2;
    }
  }
  if (think_ms < 0 || think_ms > 10000) {
    std::fprintf(stderr, "--think-ms must be 0..10000 (0: closed loop)\n");
    return 2;
  }
  if (runs < 200 || iterations < 10) {
    std::fprintf(stderr, "--runs must be >= 200 and --iterations >= 10\n");
    return 2;
  }
  logging::Init("medprof-query-bench", LogLevel::kWarn);
  std::string dir;
  if (db.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "medprof-query-bench-XXXXXX").string();
    dir = mkdtemp(tmpl.data());
    db = dir + "/bench.db";
  }
  // One client: CPU time is measured on the calling thread, so the queries run there.
  if (concurrent_s == 0) domain_options.query_nice = 0;
  server::SqliteStoreOptions so;
  so.path = db;
  so.max_readers = max_readers;
  auto store = server::SqliteStore::Open(so);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 2;
  }
  auto domain = server::Domain::Create(store->get(), Clock::Real(), domain_options);
  if (!domain.ok()) {
    std::fprintf(stderr, "%s\n", domain.status().ToString().c_str());
    return 2;
  }
  server::QueryEngine& q = (*domain)->queries();
  const server::CallContext ctx = server::CallContext::Background();

  std::vector<std::string> run_ids, study_ids;
  auto t0 = std::chrono::steady_clock::now();
  if (absl::Status s = Fill(**store, runs, &run_ids, &study_ids); !s.ok()) {
    std::fprintf(stderr, "fill: %s\n", s.ToString().c_str());
    return 2;
  }
  const double fill_s = Ms(std::chrono::steady_clock::now() - t0) / 1000.0;
  std::printf("store: %d runs (%zu studies of %d), %d kernel rows, %d metric values, %d steps; filled in %.1f s\n",
              runs, study_ids.size(), kRunsPerStudy, runs * kKernels, runs * kMetrics, runs * kSteps, fill_s);

  if (concurrent_s > 0) {
    const int rc = ConcurrentReads(**domain, study_ids, concurrent_s, think_ms);
    std::printf("reader connections opened: %d\n", (*store)->readers_opened());
    if (!dir.empty()) std::filesystem::remove_all(dir);
    return check ? rc : (rc == 2 ? 2 : 0);
  }

  std::mt19937_64 rng(7);
  // Wall time (what a client sees) and this thread's CPU time (what the query costs, without the
  // time other processes of a shared machine take from it).
  auto time_it = [&](const char* what, auto fn) {
    std::vector<double> ms, cpu;
    for (int i = 0; i < iterations; ++i) {
      const double cpu0 = ThreadCpuMs();
      auto start = std::chrono::steady_clock::now();
      if (absl::Status s = fn(); !s.ok()) {
        std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
        std::exit(2);
      }
      ms.push_back(Ms(std::chrono::steady_clock::now() - start));
      cpu.push_back(ThreadCpuMs() - cpu0);
    }
    const Figures f = Summarize(ms);
    const Figures c = Summarize(cpu);
    std::printf("%-52s wall median %7.2f ms p99 %7.2f ms | cpu median %6.2f ms p99 %6.2f ms (%d)\n", what, f.median,
                f.p99, c.median, c.p99, iterations);
    return f;
  };

  // The same store through a domain without the compare cache: what computing a comparison costs
  // (the first compare of a study, or the first after a write to it).
  server::DomainOptions uncached = domain_options;
  uncached.compare_cache_entries = 0;
  auto cold = server::Domain::Create(store->get(), Clock::Real(), uncached);
  if (!cold.ok()) return 2;
  const Figures cmp_computed = time_it("compare, one study of 100 runs, computed (no cache)", [&]() -> absl::Status {
    server::CompareRequest r;
    r.study_id = study_ids[rng() % study_ids.size()];
    MEDPROF_ASSIGN_OR_RETURN(server::CompareResult out, (*cold)->queries().Compare(ctx, r));
    return out.runs_compared == kRunsPerStudy ? absl::OkStatus() : absl::InternalError("wrong run count");
  });
  size_t cells = 0;
  const Figures cmp_study = time_it("compare, one study of 100 runs (cached after the first)", [&]() -> absl::Status {
    server::CompareRequest r;
    r.study_id = study_ids[rng() % study_ids.size()];
    MEDPROF_ASSIGN_OR_RETURN(server::CompareResult out, q.Compare(ctx, r));
    cells = out.cells.size();
    return out.runs_compared == kRunsPerStudy ? absl::OkStatus() : absl::InternalError("wrong run count");
  });
  const Figures cmp_filter = time_it("compare, run filter of 100 runs across studies", [&]() -> absl::Status {
    server::CompareRequest r;
    for (int i = 0; i < 100; ++i) r.run_ids.push_back(run_ids[rng() % run_ids.size()]);
    std::sort(r.run_ids.begin(), r.run_ids.end());
    r.run_ids.erase(std::unique(r.run_ids.begin(), r.run_ids.end()), r.run_ids.end());
    MEDPROF_ASSIGN_OR_RETURN(server::CompareResult out, q.Compare(ctx, r));
    return out.runs_compared == static_cast<int>(r.run_ids.size()) ? absl::OkStatus()
                                                                     : absl::InternalError("wrong run count");
  });
  time_it("store reads only: the rows compare reads for 100 runs", [&]() -> absl::Status {
    const size_t first = (rng() % (run_ids.size() - 100));
    return (*store)->Read([&](StoreTx& tx) -> absl::Status {
      for (size_t i = first; i < first + 100; ++i) {
        MEDPROF_ASSIGN_OR_RETURN(auto run, tx.GetRun(run_ids[i]));
        MEDPROF_ASSIGN_OR_RETURN(auto job, tx.GetJob(run->job_id));
        MEDPROF_RETURN_IF_ERROR(tx.ListSteps(run_ids[i]).status());
        MEDPROF_RETURN_IF_ERROR(tx.ListKernels(run_ids[i]).status());
        MEDPROF_RETURN_IF_ERROR(tx.ListOps(run_ids[i]).status());
        MEDPROF_RETURN_IF_ERROR(tx.ListMetrics(run_ids[i]).status());
        MEDPROF_RETURN_IF_ERROR(tx.ListFindings(run_ids[i]).status());
      }
      return absl::OkStatus();
    });
  });
  const Figures diff = time_it("kernel diff of two runs (100 kernels each)", [&]() -> absl::Status {
    server::DiffRequest r;
    r.run_a = run_ids[rng() % run_ids.size()];
    r.run_b = run_ids[rng() % run_ids.size()];
    MEDPROF_ASSIGN_OR_RETURN(server::DiffResult out, q.Diff(ctx, r));
    return out.rows.empty() ? absl::InternalError("empty diff") : absl::OkStatus();
  });
  const Figures kernels = time_it("kernels of one run (100 rows)", [&]() -> absl::Status {
    server::KernelsRequest r;
    r.run_id = run_ids[rng() % run_ids.size()];
    return q.Kernels(ctx, r).status();
  });

  // Ingest: runs leased through the real scheduler, then one window each.
  server::RegisterAgentRequest reg;
  reg.protocol_version = 1;
  reg.agent_name = "bench-agent";
  reg.max_concurrent_jobs = 1;
  server::DeviceRecord d;
  d.index = 0;
  d.kind = "cuda";
  d.name = kGpus[0];
  reg.devices = {d};
  auto agent = (*domain)->agents().Register(ctx, reg);
  if (!agent.ok()) return 2;
  server::SubmitStudyRequest sub;
  sub.presets = {"baseline"};
  sub.config.set_volume(16);
  sub.config.set_base_channels(8);
  sub.repeats = std::min(iterations, 100);
  auto submitted = (*domain)->studies().SubmitStudy(ctx, sub);
  if (!submitted.ok()) {
    std::fprintf(stderr, "submit: %s\n", submitted.status().ToString().c_str());
    return 2;
  }
  std::vector<double> ingest_ms, ingest_cpu;
  for (int i = 0; i < sub.repeats; ++i) {
    server::AcquireJobRequest acq;
    acq.agent_id = agent->agent_id;
    auto a = (*domain)->scheduler().AcquireJob(ctx, acq);
    if (!a.ok() || !a->has_value()) return 2;
    const std::vector<server::ResultChunk> chunks = RunChunks((*a)->run_id, agent->agent_id, rng);
    const double cpu0 = ThreadCpuMs();
    auto start = std::chrono::steady_clock::now();
    auto done = (*domain)->ingestor().Ingest(ctx, chunks);
    ingest_ms.push_back(Ms(std::chrono::steady_clock::now() - start));
    ingest_cpu.push_back(ThreadCpuMs() - cpu0);
    if (!done.ok()) {
      std::fprintf(stderr, "ingest: %s\n", done.status().ToString().c_str());
      return 2;
    }
    server::FinishRunRequest fin;
    fin.agent_id = agent->agent_id;
    fin.run_id = (*a)->run_id;
    fin.state = server::RunState::kSucceeded;
    fin.last_seq = chunks.size();
    if (!(*domain)->scheduler().FinishRun(ctx, fin).ok()) return 2;
  }
  const Figures ingest = Summarize(ingest_ms);
  const Figures ingest_c = Summarize(ingest_cpu);
  std::printf("%-52s wall median %7.2f ms p99 %7.2f ms | cpu median %6.2f ms p99 %6.2f ms (%zu)\n",
              "ingest of one run (one window, one transaction)", ingest.median, ingest.p99, ingest_c.median,
              ingest_c.p99, ingest_ms.size());
  (void)kernels;
  (void)cells;

  const bool ok_compare = cmp_study.p99 < 50 && cmp_filter.p99 < 50 && cmp_computed.p99 < 50;
  // The issue sets compare's target on its p99 and ingest's as a plain time: the brief reads such a
  // time as the median over repeated runs. The p99 is printed beside it (WAL checkpoints land
  // in the tail).
  const bool ok_ingest = ingest.median < 5;
  std::printf("targets: compare p99 < 50 ms: %s (%.2f computed / %.2f cached / %.2f filter ms); ingest of one run "
              "< 5 ms: %s (median %.2f ms, p99 %.2f ms); diff p99 %.2f ms\n",
              ok_compare ? "met" : "MISSED", cmp_computed.p99, cmp_study.p99, cmp_filter.p99, ok_ingest ? "met" : "MISSED",
              ingest.median, ingest.p99, diff.p99);
  if (!dir.empty()) std::filesystem::remove_all(dir);
  return check && !(ok_compare && ok_ingest) ? 1 : 0;
}

}  // namespace
}  // namespace medprof::bench

int main(int argc, char** argv) { return medprof::bench::Main(argc, argv); }
