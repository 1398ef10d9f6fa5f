// GPU run of the real medprof-worker (label gpu; skipped where no GPU is usable): the CUPTI
// backend traces kernels, attributes them to LibTorch ops and phases, and counts only the
// measured steps. Run on the GPU machine: ctest -L gpu -R worker_gpu_test
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
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
  std::vector<v1::WorkerMessage> Run(const std::string& phase, const std::string& name) {
    const std::string stem = ::testing::TempDir() + "/medprof_worker_gpu_" + name;
    const int code = RunWorker({"--preset", "baseline", "--base-channels", "8", "--channel-mult", "1,2",
                                "--volume", "16", "--attention-ds", "2", "--steps", "3", "--warmup", "1", "--phase", phase,
                                "--grad-accum", "1", "--device", "cuda", "--out", stem + ".pb"},
                               stem);
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
  EXPECT_EQ(sum.layers(2).reason(), "not implemented in this build");
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
