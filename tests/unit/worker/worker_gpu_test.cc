// GPU run of the real medprof-worker (label gpu; skipped where no GPU is usable): the CUPTI
// backend traces kernels, attributes them to LibTorch ops and phases, and counts only the
// measured steps. Run on the GPU machine: ctest -L gpu -R worker_gpu_test
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/profiler/backend.h"
#include "agent/profiler/gpu_probe.h"
#include "common/result_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace medprof::worker {
namespace {

using ::testing::HasSubstr;

int RunWorker(const std::vector<std::string>& args, const std::string& stem) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int e = ::open((stem + ".stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(e, 2);
    std::vector<char*> argv = {const_cast<char*>(MEDPROF_WORKER_BIN)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(MEDPROF_WORKER_BIN, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<v1::WorkerMessage> ReadFile(const std::string& path) {
  std::vector<v1::WorkerMessage> out;
  auto reader = ResultReader::OpenFile(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  while (true) {
    v1::WorkerMessage m;
    auto more = (*reader)->Next(&m);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    out.push_back(std::move(m));
  }
  return out;
}

class WorkerGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const profiler::GpuProbe probe = profiler::ProbeGpu();
    if (!probe.available) GTEST_SKIP() << probe.reason;
    if (!profiler::TorchHasCuda()) GTEST_SKIP() << "LibTorch without CUDA";
  }

  // Runs a tiny model on the GPU; returns the records.
  std::vector<v1::WorkerMessage> Run(const std::string& phase, const std::string& name,
                                     const std::vector<std::string>& extra = {"--overhead-pairs", "0"},
                                     const std::string& preset = "baseline") {
    const std::string stem = ::testing::TempDir() + "/medprof_worker_gpu_" + name;
    std::vector<std::string> args = {"--preset", preset, "--base-channels", "8", "--channel-mult", "1,2",
                                     "--volume", "16", "--attention-ds", "2", "--steps", "3", "--warmup", "1",
                                     "--phase", phase, "--grad-accum", "1", "--device", "cuda", "--out", stem + ".pb"};
    args.insert(args.end(), extra.begin(), extra.end());
    const int code = RunWorker(args, stem);
    EXPECT_EQ(code, 0) << "stderr in " << stem << ".stderr";
    return ReadFile(stem + ".pb");
  }
};

TEST_F(WorkerGpuTest, ForwardKernelsAreTracedAttributedAndCountedPerMeasuredStep) {
  const auto records = Run("forward", "forward");
  ASSERT_FALSE(records.empty());
  ASSERT_TRUE(records.front().has_started());
  const v1::RunStarted& rs = records.front().started();
  EXPECT_EQ(rs.backend(), "cupti");
  EXPECT_EQ(rs.environment().device(), "cuda:0");
  EXPECT_FALSE(rs.environment().gpu_name().empty());
  EXPECT_THAT(rs.environment().cupti_library(), HasSubstr("libcupti"));

  const v1::KernelAggregates* kernels = nullptr;
  for (const auto& m : records) {
    if (m.has_kernels()) kernels = &m.kernels();
    if (m.has_step()) EXPECT_GT(m.step().device_ns(), 0);
  }
  ASSERT_NE(kernels, nullptr);
  EXPECT_EQ(kernels->steps(), 3);
  EXPECT_EQ(kernels->dropped_records(), 0);
  ASSERT_GT(kernels->kernels_size(), 0);
  int64_t total = 0, attributed = 0;
  bool conv = false;
  for (const v1::KernelStat& k : kernels->kernels()) {
    // Every forward step launches the same kernels: counts are multiples of 3.
    EXPECT_EQ(k.count() % 3, 0) << k.name() << " under " << k.op();
    EXPECT_GE(k.max_ns(), k.min_ns());
    EXPECT_GE(k.total_ns(), k.count() * k.min_ns());
    total += k.total_ns();
    if (!k.op().empty()) attributed += k.total_ns();
    if (k.category() == "conv") conv = true;
    if (k.grid_size() == 3) {
      EXPECT_GT(k.theoretical_occupancy(), 0.0) << k.name();
      EXPECT_LE(k.theoretical_occupancy(), 1.0) << k.name();
    }
    EXPECT_EQ(k.phase(), "fwd") << k.name();
  }
  EXPECT_TRUE(conv);
  EXPECT_GT(attributed, total * 9 / 10) << "kernels without an op take more than 10% of the time";

  ASSERT_TRUE(records.back().has_summary());
  const v1::RunSummary& sum = records.back().summary();
  EXPECT_EQ(sum.layers(1).layer(), "trace");
  EXPECT_TRUE(sum.layers(1).ran());
  EXPECT_EQ(sum.layers(2).layer(), "sampling");
  EXPECT_TRUE(sum.layers(2).ran()) << sum.layers(2).reason();  // counters are permitted on the H200 machine
  EXPECT_EQ(sum.layers(3).layer(), "metrics");
  EXPECT_FALSE(sum.layers(3).ran());
  EXPECT_THAT(sum.layers(3).reason(), HasSubstr("not requested"));
}

// Every layer on a tiny TF32 model: counter values per kernel and per phase, PC-sampling stall
// shares, the PM-sampling timeline, findings, the raw timeline and the overhead figures.
TEST_F(WorkerGpuTest, EveryLayerRunsAndReportsValues) {
  const auto records = Run("train", "layers", {"--metrics", "--metrics-top-k", "5", "--overhead-pairs", "2"}, "opt1");
  std::map<std::string, std::map<std::string, double>> scopes;  // scope -> name -> value
  const v1::KernelFindings* findings = nullptr;
  const v1::Timeline* timeline = nullptr;
  const v1::UtilizationTimeline* util = nullptr;
  for (const auto& m : records) {
    if (m.has_metrics()) {
      for (const auto& v : m.metrics().values()) scopes[v.scope()][v.name()] = v.value();
    }
    if (m.has_findings()) findings = &m.findings();
    if (m.has_timeline()) timeline = &m.timeline();
    if (m.has_utilization()) util = &m.utilization();
  }
  ASSERT_TRUE(records.back().has_summary());
  const v1::RunSummary& sum = records.back().summary();
  for (const auto& l : sum.layers()) EXPECT_TRUE(l.ran()) << l.layer() << ": " << l.reason();
  EXPECT_GT(sum.metrics_wall_ms(), 0);

  int profiled = 0;
  for (const auto& [scope, values] : scopes) {
    if (scope.rfind("kernel:", 0) != 0 || !values.count("duration_ns")) continue;
    ++profiled;
    EXPECT_GT(values.at("duration_ns"), 0) << scope;
    EXPECT_GT(values.at("warp_instructions"), 0) << scope;
    EXPECT_GT(values.at("sm_cycles"), 0) << scope;
    for (const char* pct : {"achieved_occupancy_pct", "l2_hit_pct", "tensor_pipe_pct", "fma_pipe_pct"}) {
      ASSERT_TRUE(values.count(pct)) << scope << " " << pct;
      EXPECT_GE(values.at(pct), 0.0);
      EXPECT_LE(values.at(pct), 100.0);
    }
  }
  EXPECT_EQ(profiled, 5);
  for (const char* phase : {"phase:fwd", "phase:bwd"}) {
    ASSERT_TRUE(scopes.count(phase)) << phase;
    EXPECT_GT(scopes[phase]["sm_cycles"], 0) << phase;
    EXPECT_GT(scopes[phase]["warp_instructions"], 0) << phase;
  }
  EXPECT_GT(scopes["run"]["pcsamp.samples"], 0);
  EXPECT_GT(scopes["run"]["gpu_time_ns"], 0);
  EXPECT_TRUE(scopes["run"].count("trace.overhead_pct"));
  ASSERT_NE(findings, nullptr);
  EXPECT_GT(findings->findings_size(), 0);
  ASSERT_NE(timeline, nullptr);
  EXPECT_GT(timeline->events_size(), 0);
  ASSERT_NE(util, nullptr);
  EXPECT_GT(util->samples_size(), 0);
  EXPECT_EQ(util->samples(0).values_size(), util->metrics_size());
}

TEST_F(WorkerGpuTest, LayersTurnedOffSayWhy) {
  const auto records = Run("forward", "off", {"--no-sampling", "--overhead-pairs", "0"});
  ASSERT_TRUE(records.back().has_summary());
  const v1::RunSummary& sum = records.back().summary();
  EXPECT_FALSE(sum.layers(2).ran());
  EXPECT_THAT(sum.layers(2).reason(), HasSubstr("sampling off"));
  const auto none = Run("forward", "notrace", {"--no-trace", "--overhead-pairs", "0"});
  ASSERT_TRUE(none.front().has_started());
  EXPECT_EQ(none.front().started().backend(), "cpu");
  ASSERT_TRUE(none.back().has_summary());
  EXPECT_FALSE(none.back().summary().layers(1).ran());
  EXPECT_THAT(none.back().summary().layers(1).reason(), HasSubstr("trace off (requested)"));
}

TEST_F(WorkerGpuTest, TrainKernelsCoverEveryPhase) {
  const auto records = Run("train", "train");
  std::set<std::string> phases;
  for (const auto& m : records) {
    if (m.has_kernels()) {
      for (const auto& k : m.kernels().kernels()) phases.insert(k.phase());
    }
  }
  EXPECT_TRUE(phases.count("fwd"));
  EXPECT_TRUE(phases.count("bwd"));
  EXPECT_TRUE(phases.count("optim"));
}

}  // namespace
}  // namespace medprof::worker
