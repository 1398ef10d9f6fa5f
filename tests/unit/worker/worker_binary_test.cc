// The real medprof-worker binary: exit codes and messages for bad configurations, --describe,
// a tiny end-to-end CPU run read back with ResultReader, and SIGTERM mid-run.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "agent/worker/describe.h"
#include "tests/testing/json_face.h"
#include "agent/worker/config_mapping.h"
#include "common/result_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const char* WorkerPath() { return MEDPROF_WORKER_BIN; }

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Result {
  int exit_code = -1;
  std::string out, err;
};

// Runs the worker with `args`; stdout/stderr go to files. `result_fd` (if >= 0) is passed
// to the child as fd 3.
pid_t Spawn(const std::vector<std::string>& args, const std::string& stem, int result_fd = -1) {
  const std::string out = stem + ".stdout", err = stem + ".stderr";
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    if (result_fd >= 0) dup2(result_fd, 3);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(WorkerPath()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(WorkerPath(), argv.data());
    _exit(127);
  }
  return pid;
}

// The exit code; minus the signal number when the process died of a signal (so a worker
// killed by SIGTERM is not mistaken for one that exited with 143).
int Wait(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return -WTERMSIG(status);
}

Result RunBinary(const std::vector<std::string>& args, const std::string& name) {
  const std::string stem = ::testing::TempDir() + "/medprof_worker_" + name;
  Result r;
  r.exit_code = Wait(Spawn(args, stem));
  r.out = Slurp(stem + ".stdout");
  r.err = Slurp(stem + ".stderr");
  return r;
}

std::vector<v1::WorkerMessage> ReadAll(ResultReader& reader) {
  std::vector<v1::WorkerMessage> records;
  while (true) {
    v1::WorkerMessage m;
    auto more = reader.Next(&m);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    records.push_back(std::move(m));
  }
  return records;
}

std::vector<v1::WorkerMessage> ReadFile(const std::string& path) {
  auto reader = ResultReader::OpenFile(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  return ReadAll(**reader);
}

const std::vector<std::string> kTiny = {"--preset", "baseline", "--base-channels", "8", "--channel-mult", "1,2",
                                        "--volume", "16", "--attention-ds", "2", "--threads", "2"};

std::vector<std::string> Tiny(std::vector<std::string> more) {
  std::vector<std::string> args = kTiny;
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(WorkerBinaryTest, BadVolumeExits2NamingTheFieldAndWritesWorkerError) {
  const std::string out = ::testing::TempDir() + "/medprof_worker_badvolume.pb";
  const Result r = RunBinary({"--preset", "baseline", "--volume", "20", "--out", out}, "badvolume");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("volume: 20 is out of range"));
  EXPECT_EQ(r.out, "");  // never stdout
  const std::vector<v1::WorkerMessage> records = ReadFile(out);
  ASSERT_EQ(records.size(), 1u);
  ASSERT_TRUE(records[0].has_error());
  EXPECT_EQ(records[0].error().kind(), "invalid_config");
  EXPECT_THAT(records[0].error().message(), HasSubstr("volume"));
}

// --decode prints a results file as JSON lines; a missing or cut file is refused with the cause.
TEST(WorkerBinaryTest, DecodePrintsJsonLinesAndRefusesBadFiles) {
  const std::string out = ::testing::TempDir() + "/medprof_worker_decode.pb";
  ASSERT_EQ(RunBinary({"--preset", "baseline", "--volume", "20", "--out", out}, "decode_src").exit_code, 2);
  Result r = RunBinary({"--decode", out}, "decode_ok");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json line = nlohmann::json::parse(r.out);  // one record: the WorkerError
  EXPECT_EQ(line.at("error").at("kind"), "invalid_config");

  r = RunBinary({"--decode", out + ".missing"}, "decode_missing");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(".missing"));

  const std::string bytes = Slurp(out);
  ASSERT_GT(bytes.size(), 4u);
  const std::string cut = out + ".cut";
  {
    std::ofstream f(cut, std::ios::binary);
    f << bytes.substr(0, bytes.size() - 3);
  }
  r = RunBinary({"--decode", cut}, "decode_cut");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("--decode " + cut));
  EXPECT_EQ(r.out, "");
}

// One JSON face (issue 19): --describe and --decode print proto names and the tables' words.
TEST(WorkerBinaryTest, DescribeAndDecodeUseTheTablesSpellings) {
  const Result d = RunBinary({"--preset", "opt1", "--device", "cpu", "--describe"}, "describe_face");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  medprof::testing::ExpectTableSpellings(d.out, "--describe");
  EXPECT_THAT(d.out, ::testing::ContainsRegex("\"phase\": *\"train\""));
  EXPECT_THAT(d.out, ::testing::ContainsRegex("\"device\": *\"cpu\""));
  const std::string out = ::testing::TempDir() + "/medprof_worker_face.pb";
  ASSERT_EQ(RunBinary({"--preset", "baseline", "--volume", "20", "--out", out}, "face_src").exit_code, 2);
  const Result r = RunBinary({"--decode", out}, "face_decode");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  medprof::testing::ExpectTableSpellings(r.out, "--decode");
}

TEST(WorkerBinaryTest, CommandLineErrorsExit2) {
  Result r = RunBinary({"--preset", "baseline"}, "nochannel");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--out FILE or --result-fd N is required"));
  r = RunBinary({"--preset", "nope", "--steps", "x", "--describe"}, "badsteps");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--steps"));
  // --device cuda without a GPU is a workload failure (exit 3, kind cuda), before RunStarted.
  const std::string out = ::testing::TempDir() + "/medprof_worker_cuda.pb";
  r = RunBinary(Tiny({"--device", "cuda", "--out", out}), "cuda");
  if (r.exit_code == 0) GTEST_SKIP() << "a GPU is usable here";
  EXPECT_EQ(r.exit_code, 3);
  const auto records = ReadFile(out);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].error().kind(), "cuda");
  EXPECT_THAT(records[0].error().message(), HasSubstr("device: cuda requested, but no GPU"));
}

TEST(WorkerBinaryTest, DescribeAtDefaults) {
  const Result r = RunBinary({"--preset", "baseline", "--describe"}, "describe");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parameters"].get<int64_t>(), 40226433);
  EXPECT_EQ(j["config"]["preset"], "baseline");
  EXPECT_EQ(j["config"]["volume"], 128);
  EXPECT_EQ(j["config"]["steps"], 10);
  EXPECT_EQ(j["volume"], nlohmann::json::array({128, 128, 128}));
  EXPECT_EQ(j["flags"]["tf32"], false);
  EXPECT_GT(j["estimated_peak_memory_bytes"].get<uint64_t>(), 1ull << 30);
  EXPECT_NEAR(j["estimated_peak_memory_gib"].get<double>(),
              j["estimated_peak_memory_bytes"].get<double>() / (1024.0 * 1024 * 1024), 1e-9);
  EXPECT_EQ(j["build"]["cupti_compiled"], MEDPROF_HAVE_CUDA == 1);
  EXPECT_FALSE(j["build"]["torch_version"].get<std::string>().empty());
}

// A user model (the fixture torchscript_models writes the examples): --describe loads and dry-runs
// it; a bad one exits 2 naming the cause, on --describe and on a run (with a WorkerError record).
TEST(WorkerBinaryTest, AUserModelIsDescribedRunAndRefusedWhenBad) {
  const std::string dir = MEDPROF_TEST_MODELS_DIR;
  ASSERT_TRUE(std::filesystem::exists(dir + "/tiny_unet.pt"))
      << "no example models in " << dir << ": run this test through ctest (fixture torchscript_example_models)";
  const std::vector<std::string> job = {"--preset", "opt2", "--volume", "16", "--device", "cpu", "--threads", "1"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = job;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  const Result d = RunBinary(with({"--model", dir + "/tiny_unet.pt", "--describe"}), "model_describe");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  const nlohmann::json j = nlohmann::json::parse(d.out);
  EXPECT_EQ(j["workload"], "torchscript");
  EXPECT_EQ(j["model"]["file_name"], "tiny_unet.pt");
  EXPECT_EQ(j["model"]["conditional"], true);
  EXPECT_EQ(j["dry_run"]["output"], nlohmann::json::array({1, 1, 16, 16, 16}));
  EXPECT_EQ(j["dry_run"]["cond"], nlohmann::json::array({1, 2, 16, 16, 16}));
  EXPECT_GT(j["parameters"].get<int64_t>(), 0);
  EXPECT_THAT(j["applied"]["note"].get<std::string>(), HasSubstr("channels_last: "));
  EXPECT_GT(j["estimated_peak_memory_bytes"].get<uint64_t>(), j["memory"]["state_bytes"].get<uint64_t>());

  // A run records which model it ran (hash, name, size), not where this machine keeps the file.
  const std::string good = ::testing::TempDir() + "/medprof_worker_model_good.pb";
  const Result ran = RunBinary(
      with({"--model", dir + "/tiny_unet.pt", "--phase", "forward", "--steps", "1", "--warmup", "0", "--out", good}),
      "model_run");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const std::vector<v1::WorkerMessage> started = ReadFile(good);
  ASSERT_FALSE(started.empty());
  ASSERT_TRUE(started.front().has_started());
  const v1::ModelRef& model = started.front().started().effective().model();
  EXPECT_EQ(model.sha256().size(), 64u);
  EXPECT_EQ(model.file_name(), "tiny_unet.pt");
  EXPECT_GT(model.size_bytes(), 0u);
  EXPECT_EQ(model.local_path(), "");

  const Result bad = RunBinary(with({"--model", dir + "/wrong_shape.pt", "--describe"}), "model_bad_describe");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("model: output shape [1, 2, 16, 16, 16] differs"));

  const std::string out = ::testing::TempDir() + "/medprof_worker_model_bad.pb";
  const Result run = RunBinary(with({"--model", dir + "/ignores_t.pt", "--out", out}), "model_bad_run");
  EXPECT_EQ(run.exit_code, 2) << run.err;
  const std::vector<v1::WorkerMessage> records = ReadFile(out);
  ASSERT_FALSE(records.empty());
  ASSERT_TRUE(records.back().has_error());
  EXPECT_EQ(records.back().error().kind(), "invalid_config");
  EXPECT_THAT(records.back().error().message(), HasSubstr("the output does not depend on t"));
}

TEST(WorkerBinaryTest, DescribeJobFileWithOverrides) {
  v1::WorkloadConfig job;
  job.set_preset("opt2");
  job.set_volume(64);
  job.set_steps(5);
  const std::string path = ::testing::TempDir() + "/medprof_worker_job.pb";
  {
    std::ofstream out(path, std::ios::binary);
    out << job.SerializeAsString();
  }
  const Result r = RunBinary({"--job", path, "--steps", "7", "--tf32", "--describe"}, "describejob");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"]["preset"], "opt2");
  EXPECT_EQ(j["config"]["volume"], 64);
  EXPECT_EQ(j["config"]["steps"], 7);
  EXPECT_EQ(j["flags"]["channels_last"], true);  // opt2
  EXPECT_EQ(j["flags"]["tf32"], true);           // override
  EXPECT_EQ(j["volume"], nlohmann::json::array({64, 64, 64}));
}

// opt3 lists the fused kernels on every build and says when this build cannot run them (the
// CI build: Debian's LibTorch has no CUDA, so the glue is not compiled).
TEST(WorkerBinaryTest, DescribeOpt3ListsTheFusedKernels) {
  const Result r = RunBinary({"--preset", "opt3", "--describe"}, "describeopt3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["flags"]["fused"], true);
  EXPECT_EQ(j["flags"]["channels_last"], true);
  EXPECT_EQ(j["flags"]["bf16"], true);
  const nlohmann::json& f = j["fused_kernels"];
  EXPECT_EQ(f["requested"], true);
  // 8 GroupNorm kernels, then the upsample's 2 and the head conv backward's 3.
  ASSERT_EQ(f["kernels"].size(), 13u);
  EXPECT_EQ(f["kernels"][0]["name"], "medprof_group_norm_stats_ncs");
  EXPECT_EQ(f["kernels"][8]["name"], "medprof_upsample_x2_fwd");
  EXPECT_EQ(f["kernels"][10]["name"], "medprof_conv3x3_small_dgrad");
  for (const auto& k : f["kernels"]) {
    EXPECT_THAT(k["name"].get<std::string>(), ::testing::StartsWith("medprof_"));
    EXPECT_FALSE(k["role"].get<std::string>().empty());
  }
  if (f["compiled"].get<bool>()) {
    EXPECT_EQ(f["unavailable_reason"], "");
  } else {
    EXPECT_THAT(f["unavailable_reason"].get<std::string>(), HasSubstr("LibTorch's ops run instead"));
  }
  // baseline does not ask for them but still lists them.
  const Result b = RunBinary({"--preset", "baseline", "--describe"}, "describebase");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(b.out)["fused_kernels"]["requested"], false);
}

TEST(DescribeJsonTest, TinyModelCountsItsOwnParameters) {
  v1::WorkloadConfig c;
  c.set_preset("baseline");
  c.set_base_channels(8);
  c.add_channel_mult(1);
  c.add_channel_mult(2);
  c.set_volume(16);
  MEDPROF_ASSERT_OK_AND_ASSIGN(v1::WorkloadConfig e, Effective(c));
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::string json, DescribeJson(e));
  const nlohmann::json j = nlohmann::json::parse(json);
  EXPECT_EQ(j["parameters"].get<int64_t>(),
            meddpm::CountParameters(ToWorkloadOptions(e, v1::DEVICE_KIND_CPU).model));
  EXPECT_LT(j["parameters"].get<int64_t>(), 1'000'000);
  EXPECT_EQ(j["config"]["channel_mult"], nlohmann::json::array({1, 2}));
}

TEST(WorkerBinaryTest, TinyCpuRunEndToEnd) {
  const std::string out = ::testing::TempDir() + "/medprof_worker_e2e.pb";
  const Result r = RunBinary(Tiny({"--steps", "3", "--warmup", "1", "--out", out}), "e2e");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const std::vector<v1::WorkerMessage> records = ReadFile(out);
  ASSERT_GE(records.size(), 8u);

  // RunStarted first.
  ASSERT_TRUE(records.front().has_started());
  const v1::RunStarted& rs = records.front().started();
  EXPECT_EQ(rs.effective().preset(), "baseline");
  EXPECT_EQ(rs.effective().base_channels(), 8);
  EXPECT_EQ(rs.effective().steps(), 3);
  EXPECT_GT(rs.parameters(), 0u);
  EXPECT_GT(rs.started_unix_ms(), 1'600'000'000'000);
  const bool gpu = rs.backend() == "cupti";
  if (!gpu) {
    EXPECT_EQ(rs.backend(), "cpu");
    EXPECT_EQ(rs.environment().device(), "cpu");
    EXPECT_EQ(rs.environment().gpu_name(), "cpu");
    // No roofline on the CPU, and the run says so.
    EXPECT_EQ(rs.environment().ceilings().ceilings_size(), 0);
    EXPECT_THAT(rs.environment().ceilings().note(), HasSubstr("CPU backend: no ceilings"));
  }
  EXPECT_FALSE(rs.environment().host().empty());
  EXPECT_FALSE(rs.environment().torch_version().empty());
  EXPECT_THAT(rs.environment().worker_version(), StartsWith("0."));
  EXPECT_EQ(rs.environment().cpu_threads(), 2);
  EXPECT_FALSE(rs.environment().tf32_cudnn());
#if MEDPROF_HAVE_CUDA
  EXPECT_THAT(rs.environment().cupti_library(), HasSubstr("libcupti"));
#endif

  // Then progress and steps, in order; RunSummary last.
  std::vector<std::string> kinds;
  int steps = 0;
  const v1::OpAggregates* ops = nullptr;
  for (size_t i = 1; i < records.size(); ++i) {
    const v1::WorkerMessage& m = records[i];
    if (m.has_step()) {
      EXPECT_EQ(m.step().step(), steps);
      EXPECT_EQ(m.step().phase(), v1::PHASE_TRAIN);
      EXPECT_GT(m.step().wall_ns(), 0);
      EXPECT_GT(m.step().loss(), 0.0);
      EXPECT_GT(m.step().phase_ns().at("fwd"), 0);
      ++steps;
      kinds.push_back("step");
    } else if (m.has_progress()) {
      kinds.push_back(m.progress().stage() + " " + std::to_string(m.progress().step()) + "/" +
                      std::to_string(m.progress().total()));
    } else if (m.has_ops()) {
      ops = &m.ops();
      kinds.push_back("ops");
    } else if (m.has_kernels()) {
      kinds.push_back("kernels");
    } else if (m.has_summary()) {
      kinds.push_back("summary");
    } else if (m.has_timeline()) {
      // The CPU backend's host timeline, in records of at most 20000 events: counted once.
      EXPECT_TRUE(gpu || m.timeline().events_size() > 0);
      if (kinds.back() != "timeline") kinds.push_back("timeline");
    } else {
      kinds.push_back("other");
    }
  }
  EXPECT_EQ(steps, 3);
  if (!gpu) {
    EXPECT_THAT(kinds, ::testing::ElementsAre("setup 1/1", "warmup 1/1", "step", "measure 1/3", "step",
                                              "measure 2/3", "step", "measure 3/3", "ops", "timeline",
                                              "done 3/3", "summary"));
  }
  ASSERT_NE(ops, nullptr);
  EXPECT_EQ(ops->steps(), 3);
  bool conv3d = false;
  for (const v1::OpStat& op : ops->ops()) {
    if (op.name() == "aten::conv3d" && op.phase() == "fwd") {
      conv3d = true;
      EXPECT_EQ(op.count() % 3, 0) << "the same convolutions every measured step";
      EXPECT_GE(op.count(), 3);
      EXPECT_EQ(op.category(), "conv");
      EXPECT_LE(op.self_ns(), op.total_ns());
    }
  }
  EXPECT_TRUE(conv3d);

  ASSERT_TRUE(records.back().has_summary());
  const v1::RunSummary& sum = records.back().summary();
  EXPECT_EQ(sum.measured_steps(), 3);
  EXPECT_GT(sum.step_ms_median(), 0.0);
  EXPECT_LE(sum.step_ms_min(), sum.step_ms_median());
  EXPECT_LE(sum.step_ms_median(), sum.step_ms_max());
  EXPECT_GT(sum.peak_memory_bytes(), 0u);
  EXPECT_GT(sum.wall_ms(), 0);
  EXPECT_GT(sum.final_loss(), 0.0);
  ASSERT_EQ(sum.layers_size(), 4);
  EXPECT_EQ(sum.layers(0).layer(), "cpu");
  EXPECT_TRUE(sum.layers(0).ran());
  EXPECT_EQ(sum.layers(1).layer(), "trace");
  if (!gpu) {
    EXPECT_FALSE(sum.layers(1).ran());
    EXPECT_THAT(sum.layers(1).reason(), StartsWith("no GPU"));
  }
}

TEST(WorkerBinaryTest, SigtermStopsAfterTheCurrentStepWithExit143) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string stem = ::testing::TempDir() + "/medprof_worker_sigterm";
  const pid_t pid = Spawn(Tiny({"--steps", "200", "--warmup", "0", "--result-fd", "3"}), stem, fds[1]);
  ::close(fds[1]);
  ResultReader reader(fds[0], /*owns_fd=*/true);
  std::vector<v1::WorkerMessage> records;
  bool signalled = false;
  while (true) {
    v1::WorkerMessage m;
    auto more = reader.Next(&m);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    if (m.has_step() && !signalled) {
      ASSERT_EQ(kill(pid, SIGTERM), 0);
      signalled = true;
    }
    records.push_back(std::move(m));
  }
  EXPECT_EQ(Wait(pid), 143);
  ASSERT_TRUE(signalled);
  ASSERT_FALSE(records.empty());
  EXPECT_TRUE(records.front().has_started());
  ASSERT_TRUE(records.back().has_error());
  EXPECT_EQ(records.back().error().kind(), "interrupted");
  EXPECT_THAT(records.back().error().message(), HasSubstr("measured step"));
  int steps = 0;
  for (const auto& m : records) steps += m.has_step() ? 1 : 0;
  EXPECT_GE(steps, 1);
  EXPECT_LT(steps, 200);
  EXPECT_THAT(Slurp(stem + ".stderr"), HasSubstr("stopping after"));
}

}  // namespace
}  // namespace medprof::worker
