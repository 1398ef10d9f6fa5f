// proto <-> domain conversion of the rpc layer, and the status mapping.
#include "server/rpc/convert.h"

#include "google/protobuf/util/message_differencer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/rpc/status_mapping.h"
#include "tests/testing/status_matchers.h"

namespace medprof::server::rpc {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::ElementsAre;
using ::testing::Pair;

TEST(Convert, JobAndRunStatesRoundTrip) {
  for (int i = 0; i <= 5; ++i) {
    const auto s = static_cast<JobState>(i);
    EXPECT_EQ(FromProto(ToProto(s)), s) << i;
    EXPECT_EQ(static_cast<int>(ToProto(s)), i);
  }
  for (int i = 0; i <= 6; ++i) {
    const auto s = static_cast<RunState>(i);
    EXPECT_EQ(FromProto(ToProto(s)), s) << i;
  }
  EXPECT_EQ(ToProto(RunState::kInterrupted), v1::RUN_INTERRUPTED);
  EXPECT_EQ(ToProto(JobState::kQueued), v1::JOB_QUEUED);
  EXPECT_EQ(ToProto(StudyState::kDone), v1::STUDY_DONE);
  // Numbers the proto does not define become "unspecified", which the domain refuses.
  EXPECT_EQ(FromProto(static_cast<v1::RunState>(42)), RunState::kUnspecified);
  EXPECT_EQ(FromProto(static_cast<v1::JobState>(-3)), JobState::kUnspecified);
}

TEST(Convert, DeviceRoundTrips) {
  v1::Device d;
  d.set_index(3);
  d.set_kind("cuda");
  d.set_name("NVIDIA H200");
  d.set_uuid("GPU-1234");
  d.set_compute_capability("9.0");
  d.set_memory_bytes(150ULL << 30);
  d.set_driver_version("580.65");
  d.set_cuda_driver_version("13.0");
  d.set_mig_enabled(true);
  d.set_ecc_enabled(true);
  d.set_counters_admin_only(true);
  d.set_sm_count(132);
  EXPECT_TRUE(MessageDifferencer::Equals(ToProto(FromProto(d)), d));
}

TEST(Convert, RegisterRequestKeepsEveryField) {
  v1::RegisterRequest p;
  p.set_protocol_version(v1::PROTOCOL_VERSION_1);
  p.set_agent_name("c001-slot0");
  p.set_host("c001");
  p.set_version("0.1.0");
  p.add_devices()->set_kind("cpu");
  (*p.mutable_labels())["site"] = "tacc";
  p.set_max_concurrent_jobs(2);
  const RegisterAgentRequest r = FromProto(p);
  EXPECT_EQ(r.protocol_version, 1);
  EXPECT_EQ(r.agent_name, "c001-slot0");
  EXPECT_EQ(r.host, "c001");
  EXPECT_EQ(r.version, "0.1.0");
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].kind, "cpu");
  EXPECT_THAT(r.labels, ElementsAre(Pair("site", "tacc")));
  EXPECT_EQ(r.max_concurrent_jobs, 2);
}

TEST(Convert, SubmitRequestKeepsEveryField) {
  v1::SubmitStudyRequest p;
  p.set_name("tf32");
  p.add_presets("baseline");
  p.add_presets("opt1");
  p.mutable_config()->set_volume(64);
  p.mutable_config()->set_tf32(true);
  p.add_targets("gpu=h100");
  p.set_repeats(3);
  p.set_max_attempts(2);
  p.set_timeout_s(600);
  const SubmitStudyRequest r = FromProto(p);
  EXPECT_EQ(r.name, "tf32");
  EXPECT_THAT(r.presets, ElementsAre("baseline", "opt1"));
  EXPECT_TRUE(MessageDifferencer::Equals(r.config, p.config()));
  EXPECT_TRUE(r.config.has_tf32());
  EXPECT_THAT(r.targets, ElementsAre("gpu=h100"));
  EXPECT_EQ(r.repeats, 3);
  EXPECT_EQ(r.max_attempts, 2);
  EXPECT_EQ(r.timeout_s, 600);
}

TEST(Convert, ChunksAndFinishRequests) {
  v1::ResultChunk c;
  c.set_run_id("run-1");
  c.set_agent_id("agent-1");
  c.set_seq(7);
  c.mutable_message()->mutable_step()->set_wall_ns(123);
  const ResultChunk copied = FromProto(c);
  EXPECT_EQ(copied.run_id, "run-1");
  EXPECT_EQ(copied.agent_id, "agent-1");
  EXPECT_EQ(copied.seq, 7u);
  EXPECT_EQ(copied.message.step().wall_ns(), 123);
  const ResultChunk moved = FromProto(v1::ResultChunk(c));
  EXPECT_TRUE(MessageDifferencer::Equals(moved.message, c.message()));

  v1::FinishRunRequest f;
  f.set_agent_id("agent-1");
  f.set_run_id("run-1");
  f.set_state(v1::RUN_FAILED);
  f.set_error("oom");
  f.set_stderr_tail("tail");
  f.set_last_seq(9);
  f.set_exit_code(137);
  const FinishRunRequest r = FromProto(f);
  EXPECT_EQ(r.state, RunState::kFailed);
  EXPECT_EQ(r.error, "oom");
  EXPECT_EQ(r.stderr_tail, "tail");
  EXPECT_EQ(r.last_seq, 9u);
  EXPECT_EQ(r.exit_code, 137);
  EXPECT_FALSE(r.agent_environment.has_value());
  f.mutable_agent_environment()->set_slurm_job_id("42");
  EXPECT_EQ(FromProto(f).agent_environment->slurm_job_id(), "42");

  EXPECT_THAT(ToProto(CommittedThrough{{"run-1", 9}}).committed_through_seq(), ElementsAre(Pair("run-1", 9u)));
}

TEST(Convert, RunViewBecomesARun) {
  RunView v;
  v.record.run_id = "run-1";
  v.record.job_id = "job-1";
  v.record.study_id = "st-1";
  v.record.agent_id = "agent-1";
  v.record.attempt = 2;
  v.record.state = RunState::kSucceeded;
  v.record.gpu_name = "NVIDIA H200";
  v.record.parameters = 40226433;
  v.record.started_unix_ms = 10;
  v.record.finished_unix_ms = 20;
  v.preset = "opt12";
  v.environment.set_gpu_name("NVIDIA H200");
  v.summary = v1::RunSummary();
  v.summary->set_measured_steps(4);
  v.steps.push_back(StepRow{.phase = 2, .step = 1, .wall_ns = 99, .device_ns = 98, .loss = 0.5,
                            .phase_ns = {{"fwd", 40}}});
  KernelRow k;
  k.name = "k";
  k.grid = {1, 2, 3};
  k.block = {128, 1, 1};
  k.theoretical_occupancy = 0.75;
  v.kernels.push_back(k);
  v.ops.push_back(OpRow{"aten::conv3d", "fwd", "conv", 2, 30, 20});
  v.metrics.push_back(MetricRow{"run", "dram__bytes.sum", 5.0, "byte"});
  const v1::Run p = ToProto(v);
  EXPECT_EQ(p.run_id(), "run-1");
  EXPECT_EQ(p.attempt(), 2);
  EXPECT_EQ(p.state(), v1::RUN_SUCCEEDED);
  EXPECT_EQ(p.preset(), "opt12");
  EXPECT_EQ(p.gpu(), "NVIDIA H200");
  EXPECT_EQ(p.parameters(), 40226433u);
  EXPECT_EQ(p.summary().measured_steps(), 4);
  ASSERT_EQ(p.steps_size(), 1);
  EXPECT_EQ(p.steps(0).phase(), v1::PHASE_TRAIN);
  EXPECT_EQ(p.steps(0).wall_ns(), 99);
  EXPECT_EQ(p.steps(0).phase_ns().at("fwd"), 40);
  ASSERT_EQ(p.kernels_size(), 1);
  EXPECT_THAT(p.kernels(0).grid(), ElementsAre(1, 2, 3));
  EXPECT_DOUBLE_EQ(p.kernels(0).theoretical_occupancy(), 0.75);
  EXPECT_EQ(p.ops(0).self_ns(), 20);
  EXPECT_EQ(p.metrics(0).unit(), "byte");
  EXPECT_EQ(p.started_unix_ms(), 10);
  EXPECT_EQ(p.finished_unix_ms(), 20);
}

TEST(Convert, CompareRoundTrip) {
  v1::CompareRequest req;
  req.set_study_id("st-1");
  req.set_baseline_preset("opt1");
  req.set_phase(v1::PHASE_SAMPLE);
  req.set_top_categories(5);
  const CompareRequest r = FromProto(req);
  EXPECT_EQ(r.study_id, "st-1");
  EXPECT_EQ(r.baseline_preset, "opt1");
  EXPECT_EQ(r.phase, v1::PHASE_SAMPLE);
  EXPECT_EQ(r.top_categories, 5);

  CompareResult out;
  out.study_id = "st-1";
  out.baseline_preset = "baseline";
  CompareCell c;
  c.gpu = "cpu";
  c.preset = "opt1";
  c.phase = v1::PHASE_TRAIN;
  c.n = 2;
  c.steps = 6;
  c.step_ms_median = 1.5;
  c.step_ms_p10 = 1.0;
  c.step_ms_p90 = 2.0;
  c.has_baseline = true;
  c.speedup_vs_baseline = 1.25;
  c.categories = {{"conv", 0.75}, {"norm", 0.25}};
  c.time_source = "ops";
  c.notes = {"metrics not collected: no GPU"};
  out.cells.push_back(c);
  const v1::CompareResponse p = ToProto(out);
  ASSERT_EQ(p.cells_size(), 1);
  const v1::CompareCell& pc = p.cells(0);
  EXPECT_EQ(pc.gpu(), "cpu");
  EXPECT_EQ(pc.n(), 2);
  EXPECT_EQ(pc.steps(), 6);
  EXPECT_DOUBLE_EQ(pc.step_ms_median(), 1.5);
  EXPECT_DOUBLE_EQ(pc.speedup_vs_baseline(), 1.25);
  ASSERT_EQ(pc.categories_size(), 2);
  EXPECT_EQ(pc.categories(0).category(), "conv");
  EXPECT_DOUBLE_EQ(pc.categories(1).share(), 0.25);
  EXPECT_EQ(pc.time_source(), "ops");
  EXPECT_THAT(pc.notes(), ElementsAre("metrics not collected: no GPU"));
}

TEST(StatusMapping, KeepsCodeAndMessage) {
  const grpc::Status g =
      ToGrpcStatus(absl::InvalidArgumentError("config.volume: 0 is out of range"), "SubmitStudy");
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(g.error_message(), "config.volume: 0 is out of range");
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus(), "x").ok());
  for (absl::StatusCode code : {absl::StatusCode::kNotFound, absl::StatusCode::kFailedPrecondition,
                                absl::StatusCode::kPermissionDenied, absl::StatusCode::kUnavailable,
                                absl::StatusCode::kDataLoss}) {
    const absl::Status back = FromGrpcStatus(ToGrpcStatus(absl::Status(code, "m"), "x"));
    EXPECT_EQ(back.code(), code);
    EXPECT_EQ(back.message(), "m");
  }
}

}  // namespace
}  // namespace medprof::server::rpc
