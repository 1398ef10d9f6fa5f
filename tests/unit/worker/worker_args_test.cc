// medprof-worker's command line, job files with overrides, the effective config, the mapping
// to workload options and the failure classification.
#include "agent/worker/worker_args.h"

#include <fstream>

#include "agent/worker/config_mapping.h"
#include "agent/worker/run.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::worker {
namespace {

using ::medprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/medprof_worker_args_" + name;
}

TEST(ParseArgsTest, FlagsFillTheConfig) {
  MEDPROF_ASSERT_OK_AND_ASSIGN(
      WorkerArgs a,
      ParseArgs({"--preset", "opt12", "--phase", "sample", "--volume", "32", "--depth", "48", "--steps", "4",
                 "--warmup", "0", "--batch", "2", "--base-channels", "16", "--channel-mult", "1,2,4",
                 "--res-blocks", "2", "--attention-ds", "2,4", "--in-channels", "8", "--out-channels", "4",
                 "--groups", "8", "--grad-accum", "1", "--lr", "0.001", "--seed", "12345678901",
                 "--sample-steps", "5", "--no-tf32", "--fused", "--device", "cpu", "--threads", "2",
                 "--out", "/tmp/r.pb", "--log-level", "debug"}));
  EXPECT_EQ(a.action, WorkerArgs::Action::kRun);
  const v1::WorkloadConfig& c = a.config;
  EXPECT_EQ(c.preset(), "opt12");
  EXPECT_EQ(c.phase(), v1::PHASE_SAMPLE);
  EXPECT_EQ(c.volume(), 32);
  EXPECT_EQ(c.depth(), 48);
  EXPECT_FALSE(c.has_height());
  EXPECT_EQ(c.steps(), 4);
  EXPECT_TRUE(c.has_warmup());
  EXPECT_EQ(c.warmup(), 0);
  EXPECT_EQ(c.batch(), 2);
  EXPECT_EQ(c.base_channels(), 16);
  EXPECT_THAT(c.channel_mult(), ElementsAre(1, 2, 4));
  EXPECT_EQ(c.res_blocks(), 2);
  EXPECT_THAT(c.attention_ds(), ElementsAre(2, 4));
  EXPECT_EQ(c.in_channels(), 8);
  EXPECT_EQ(c.out_channels(), 4);
  EXPECT_EQ(c.groups(), 8);
  EXPECT_EQ(c.grad_accum(), 1);
  EXPECT_DOUBLE_EQ(c.learning_rate(), 0.001);
  EXPECT_EQ(c.seed(), 12345678901ull);
  EXPECT_EQ(c.sample_steps(), 5);
  EXPECT_TRUE(c.has_tf32());
  EXPECT_FALSE(c.tf32());
  EXPECT_TRUE(c.fused());
  EXPECT_FALSE(c.has_channels_last());  // not given: the preset decides
  EXPECT_EQ(c.device(), v1::DEVICE_KIND_CPU);
  EXPECT_EQ(c.cpu_threads(), 2);
  EXPECT_EQ(a.out_path, "/tmp/r.pb");
  EXPECT_EQ(a.result_fd, -1);
  EXPECT_EQ(a.log_level, LogLevel::kDebug);
}

TEST(ParseArgsTest, RefusesBadCommandLinesNamingTheFlag) {
  EXPECT_THAT(ParseArgs({"--volume", "32", "--out", "x"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--preset is required")));
  EXPECT_THAT(ParseArgs({"--preset", "baseline"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--out FILE or --result-fd N")));
  EXPECT_THAT(ParseArgs({"--preset", "baseline", "--out", "x", "--result-fd", "3"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exactly one")));
  EXPECT_THAT(ParseArgs({"--preset", "baseline", "--result-fd", "1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--result-fd: 1")));
  EXPECT_THAT(ParseArgs({"--preset", "baseline", "--out", "x", "--volume", "big"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--volume")));
  EXPECT_THAT(ParseArgs({"--preset", "baseline", "--out", "x", "--phase", "infer"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("phase: unknown phase 'infer'")));
  EXPECT_THAT(ParseArgs({"--preset", "baseline", "--out", "x", "--device", "tpu"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--device: 'tpu' is not a device")));
  EXPECT_THAT(ParseArgs({"--preset", "baseline", "--out", "x", "--tf32", "--no-tf32"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tf32")));
  EXPECT_THAT(ParseArgs({"--preset", "baseline", "--out", "x", "--bogus"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--bogus")));
  EXPECT_THAT(ParseArgs({"--preset", "baseline", "--out", "x", "--log-level", "loud"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--log-level: unknown level 'loud'")));
}

TEST(ParseArgsTest, DescribeVersionAndHelpNeedNoChannel) {
  MEDPROF_ASSERT_OK_AND_ASSIGN(WorkerArgs d, ParseArgs({"--preset", "baseline", "--describe"}));
  EXPECT_EQ(d.action, WorkerArgs::Action::kDescribe);
  MEDPROF_ASSERT_OK_AND_ASSIGN(WorkerArgs v, ParseArgs({"--version"}));
  EXPECT_EQ(v.action, WorkerArgs::Action::kVersion);
  MEDPROF_ASSERT_OK_AND_ASSIGN(WorkerArgs h, ParseArgs({"--help"}));
  EXPECT_EQ(h.action, WorkerArgs::Action::kHelp);
  EXPECT_THAT(h.help, HasSubstr("--channel-mult"));
  EXPECT_THAT(h.help, HasSubstr("--result-fd"));
}

TEST(ParseArgsTest, ProfilerLayerFlags) {
  MEDPROF_ASSERT_OK_AND_ASSIGN(
      WorkerArgs a, ParseArgs({"--preset", "opt1", "--metrics", "--metrics-top-k", "12", "--metrics-launches", "5", "--overhead-pairs", "5",
                               "--no-sampling", "--out", "r.pb"}));
  EXPECT_TRUE(a.config.metrics());
  EXPECT_EQ(a.config.metrics_top_k(), 12);
  EXPECT_EQ(a.config.metrics_launches(), 5);
  EXPECT_EQ(a.config.overhead_pairs(), 5);
  EXPECT_TRUE(a.config.has_sampling());
  EXPECT_FALSE(a.config.sampling());
  EXPECT_FALSE(a.config.has_trace());  // unset: the default (on) applies
  MEDPROF_ASSERT_OK_AND_ASSIGN(WorkerArgs b, ParseArgs({"--preset", "opt1", "--no-trace", "--out", "r.pb"}));
  EXPECT_FALSE(b.config.trace());
  // Defaults and the range of overhead_pairs.
  MEDPROF_ASSERT_OK_AND_ASSIGN(v1::WorkloadConfig d, Effective(b.config));
  EXPECT_EQ(d.overhead_pairs(), 3);
  EXPECT_TRUE(d.sampling());
  EXPECT_EQ(d.counter_api(), "auto");
  b.config.set_counter_api("cupti");
  EXPECT_THAT(Effective(b.config), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("counter_api: 'cupti'")));
  b.config.set_counter_api("legacy");
  b.config.set_overhead_pairs(51);
  EXPECT_THAT(Effective(b.config), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overhead_pairs")));
  // --decode needs no preset and no channel.
  MEDPROF_ASSERT_OK_AND_ASSIGN(WorkerArgs c, ParseArgs({"--decode", "run.pb"}));
  EXPECT_EQ(c.action, WorkerArgs::Action::kDecode);
  EXPECT_EQ(c.decode_path, "run.pb");
}

TEST(ParseArgsTest, JobFileWithFlagOverrides) {
  v1::WorkloadConfig job;
  job.set_preset("opt1");
  job.set_volume(64);
  job.set_steps(5);
  job.add_channel_mult(1);
  job.add_channel_mult(2);
  job.set_device(v1::DEVICE_KIND_CUDA);
  const std::string path = TempPath("job.pb");
  {
    std::ofstream out(path, std::ios::binary);
    out << job.SerializeAsString();
  }
  MEDPROF_ASSERT_OK_AND_ASSIGN(
      WorkerArgs a, ParseArgs({"--job", path, "--steps", "7", "--no-tf32", "--device", "cpu", "--result-fd", "3"}));
  EXPECT_EQ(a.job_path, path);
  EXPECT_EQ(a.config.preset(), "opt1");  // from the job
  EXPECT_EQ(a.config.volume(), 64);
  EXPECT_THAT(a.config.channel_mult(), ElementsAre(1, 2));
  EXPECT_EQ(a.config.steps(), 7);         // overridden
  EXPECT_TRUE(a.config.has_tf32());
  EXPECT_FALSE(a.config.tf32());
  EXPECT_EQ(a.config.device(), v1::DEVICE_KIND_CPU);
  EXPECT_EQ(a.result_fd, 3);
  // A preset flag replaces the job's preset.
  MEDPROF_ASSERT_OK_AND_ASSIGN(WorkerArgs b, ParseArgs({"--job", path, "--preset", "opt2", "--describe"}));
  EXPECT_EQ(b.config.preset(), "opt2");
  EXPECT_EQ(b.config.volume(), 64);

  EXPECT_THAT(ParseArgs({"--job", TempPath("missing.pb"), "--describe"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--job: cannot open")));
  const std::string garbage = TempPath("garbage.pb");
  {
    std::ofstream out(garbage, std::ios::binary);
    out << "\xff\xff\xff not a proto";
  }
  EXPECT_THAT(ParseArgs({"--job", garbage, "--describe"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not a binary medprof.v1.WorkloadConfig")));
}

TEST(EffectiveTest, DefaultsAndValidationNameTheField) {
  v1::WorkloadConfig c;
  c.set_preset("baseline");
  MEDPROF_ASSERT_OK_AND_ASSIGN(v1::WorkloadConfig e, Effective(c));
  EXPECT_EQ(e.volume(), 128);
  EXPECT_EQ(e.steps(), 10);
  EXPECT_EQ(e.phase(), v1::PHASE_TRAIN);
  c.set_volume(20);
  EXPECT_THAT(Effective(c), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("volume: 20 is out of range")));
  c.set_volume(32);
  c.set_steps(0);
  EXPECT_THAT(Effective(c), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("steps: 0")));
}

TEST(ToWorkloadOptionsTest, MapsEveryField) {
  v1::WorkloadConfig c;
  c.set_preset("opt12");
  c.set_phase(v1::PHASE_FORWARD);
  c.set_volume(32);
  c.set_width(64);
  c.set_base_channels(8);
  c.add_channel_mult(1);
  c.add_channel_mult(2);
  c.set_channels_last(false);  // override the preset
  c.set_seed(9);
  c.set_cpu_threads(3);
  MEDPROF_ASSERT_OK_AND_ASSIGN(v1::WorkloadConfig e, Effective(c));
  const meddpm::WorkloadOptions o = ToWorkloadOptions(e, v1::DEVICE_KIND_CPU);
  EXPECT_EQ(o.phase, meddpm::Phase::kForward);
  EXPECT_EQ(o.depth, 32);
  EXPECT_EQ(o.height, 32);
  EXPECT_EQ(o.width, 64);
  EXPECT_EQ(o.model.base_channels, 8);
  EXPECT_THAT(o.model.channel_mult, ElementsAre(1, 2));
  EXPECT_THAT(o.model.attention_ds, ElementsAre(2));  // Med-DDPM rule: height 32 / 16
  EXPECT_EQ(o.model.groups, 8);
  EXPECT_TRUE(o.tf32);
  EXPECT_FALSE(o.channels_last);
  EXPECT_FALSE(o.bf16);
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(o.cpu_threads, 3);
  EXPECT_EQ(o.device, meddpm::Device::kCpu);
  EXPECT_EQ(o.steps, 10);
  EXPECT_EQ(o.warmup, 2);
  EXPECT_EQ(o.grad_accum, 2);
  EXPECT_EQ(o.sample_steps, 250);
  EXPECT_EQ(ToWorkloadOptions(e, v1::DEVICE_KIND_CUDA).device, meddpm::Device::kCuda);
}

TEST(ClassifyFailureTest, KindsAndExitCodes) {
  EXPECT_EQ(ClassifyFailure(absl::ResourceExhaustedError("out of memory")).kind, "oom");
  EXPECT_EQ(ClassifyFailure(absl::ResourceExhaustedError("out of memory")).exit_code, 3);
  EXPECT_EQ(ClassifyFailure(absl::InvalidArgumentError("volume: 20")).kind, "invalid_config");
  EXPECT_EQ(ClassifyFailure(absl::InvalidArgumentError("volume: 20")).exit_code, 2);
  EXPECT_EQ(ClassifyFailure(absl::InternalError("LibTorch error: CUDA error: an illegal memory access")).kind, "cuda");
  EXPECT_EQ(ClassifyFailure(absl::FailedPreconditionError("device: cuda requested, but no GPU")).kind, "cuda");
  EXPECT_EQ(ClassifyFailure(absl::InternalError("cuDNN error: CUDNN_STATUS_EXECUTION_FAILED")).kind, "cuda");
  EXPECT_EQ(ClassifyFailure(absl::InternalError("shape mismatch")).kind, "internal");
  EXPECT_EQ(ClassifyFailure(absl::InternalError("shape mismatch")).exit_code, 3);
}

}  // namespace
}  // namespace medprof::worker
