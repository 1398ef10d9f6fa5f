// Result upload: idempotency by (run_id, seq), acknowledgement of the contiguous prefix,
// ownership checks, window atomicity and storage by record type.
#include "server/domain/codec.h"
#include "server/domain/limits.h"
#include "server/domain/result_ingest.h"
#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::testing {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

class IngestTest : public DomainTest {
 protected:
  void SetUp() override {
    DomainTest::SetUp();
    agent_ = Register("node-a", {Gpu(0)});
    study_ = Submit({"baseline"});
    std::optional<Assignment> a = Acquire(agent_);
    ASSERT_TRUE(a.has_value());
    run_ = a->run_id;
    job_ = a->job_id;
  }
  std::string agent_, run_, job_;
  SubmitStudyResult study_;
};

// The result_bytes_per_run limit (1 MiB here): counted over every window of the run, refused
// with the limit and the value, and the refused window leaves nothing behind.
class IngestLimitTest : public IngestTest {
 protected:
  void SetUp() override {
    options_.max_result_bytes_per_run = int64_t{1} << 20;
    IngestTest::SetUp();
  }
  static v1::WorkerMessage Big(int kernels) {
    v1::WorkerMessage m;
    for (int i = 0; i < kernels; ++i) {
      v1::KernelStat* k = m.mutable_kernels()->add_kernels();
      k->set_name(std::string(1000, 'k') + std::to_string(i));
      k->set_count(1);
      k->set_total_ns(1);
    }
    return m;
  }
};

TEST_F(IngestLimitTest, ResultBytesPerRunAreCountedAcrossWindowsAndRefusedPastTheLimit) {
  const v1::WorkerMessage half = Big(400);  // ~0.4 MB each
  ASSERT_GT(half.ByteSizeLong(), 390000u);
  ASSERT_THAT(Upload(agent_, run_, {{1, half}}), IsOk());
  ASSERT_THAT(Upload(agent_, run_, {{2, half}}), IsOk());
  const int64_t stored = GetRun(run_).result_bytes;
  EXPECT_EQ(stored, static_cast<int64_t>(2 * half.ByteSizeLong()));
  const int64_t rows = Count("run_kernels");
  EXPECT_THAT(Upload(agent_, run_, {{3, Step(0, 5)}, {4, half}}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("limit result_bytes_per_run"), HasSubstr("seq 4"), HasSubstr("(allowed 1048576)"))));
  EXPECT_EQ(GetRun(run_).result_bytes, stored);  // the window rolled back, step row too
  EXPECT_EQ(Count("run_kernels"), rows);
  EXPECT_EQ(Count("run_steps"), 0);
  EXPECT_EQ(GetRun(run_).chunks_through, 2u);
}

TEST(DomainOptionsTest, ResultBytesPerRunRangeNamesTheFlag) {
  DomainOptions o;
  o.max_result_bytes_per_run = 1000;
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max-result-bytes-per-run: 1000")));
}

TEST_F(IngestTest, SameSeqTwiceIsStoredOnce) {
  auto ack = Upload(agent_, run_, {{1, Step(0, 1000)}});
  ASSERT_THAT(ack, IsOk());
  EXPECT_THAT(*ack, ElementsAre(Pair(run_, 1u)));
  ack = Upload(agent_, run_, {{1, Step(0, 1000)}, {1, Step(0, 1000)}});
  ASSERT_THAT(ack, IsOk());
  EXPECT_THAT(*ack, ElementsAre(Pair(run_, 1u)));
  EXPECT_EQ(Count("run_steps"), 1);
  EXPECT_EQ(Count("run_chunks"), 1);
}

TEST_F(IngestTest, AcknowledgesTheContiguousPrefix) {
  auto ack = Upload(agent_, run_, {{1, Step(0, 1)}, {2, Step(1, 1)}, {4, Step(3, 1)}});
  ASSERT_THAT(ack, IsOk());
  EXPECT_THAT(*ack, ElementsAre(Pair(run_, 2u)));
  ack = Upload(agent_, run_, {{3, Step(2, 1)}});
  ASSERT_THAT(ack, IsOk());
  EXPECT_THAT(*ack, ElementsAre(Pair(run_, 4u)));
  EXPECT_EQ(GetRun(run_).chunks_through, 4u);
}

TEST_F(IngestTest, RefusesOtherAgentsAndUnknownRuns) {
  const std::string other = Register("node-b", {Gpu(0)});
  EXPECT_THAT(Upload(other, run_, {{1, Step(0, 1)}}),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("may not upload its results")));
  EXPECT_THAT(Upload(agent_, "run-000000000000", {{1, Step(0, 1)}}),
              StatusIs(absl::StatusCode::kNotFound, "run_id: no run 'run-000000000000'"));
  EXPECT_THAT(Upload(agent_, run_, {{0, Step(0, 1)}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("seq: 0 (seqs start at 1)")));
  EXPECT_THAT(Upload(agent_, run_, {{1, v1::WorkerMessage()}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("message: empty")));
  EXPECT_EQ(Count("run_chunks"), 0);
}

TEST_F(IngestTest, AWindowIsStoredWholeOrNotAtAll) {
  const std::string other = Register("node-b", {Gpu(0)});
  std::vector<ResultChunk> chunks = {ResultChunk{run_, agent_, 1, Step(0, 1)},
                                     ResultChunk{run_, agent_, 2, Step(1, 1)},
                                     ResultChunk{run_, other, 3, Step(2, 1)}};
  EXPECT_THAT(domain_->ingestor().Ingest(ctx_, chunks), StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("")));
  EXPECT_EQ(Count("run_chunks"), 0);
  EXPECT_EQ(Count("run_steps"), 0);
  EXPECT_EQ(GetRun(run_).chunks_through, 0u);
}

TEST_F(IngestTest, StoresEachRecordByType) {
  v1::WorkerMessage ops;
  auto* op = ops.mutable_ops()->add_ops();
  op->set_name("aten::conv3d");
  op->set_count(3);
  op->set_self_ns(900);
  v1::WorkerMessage kernels;
  auto* k = kernels.mutable_kernels()->add_kernels();
  k->set_name("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>(...)");
  k->set_op("aten::conv3d");
  k->set_total_ns(400);
  kernels.mutable_kernels()->set_dropped_records(7);
  v1::WorkerMessage metrics;
  auto* mv = metrics.mutable_metrics()->add_values();
  mv->set_scope("run");
  mv->set_name("sm__cycles_elapsed.avg");
  mv->set_value(12345);
  v1::WorkerMessage summary;
  summary.mutable_summary()->set_measured_steps(3);
  summary.mutable_summary()->set_step_ms_median(12.5);
  v1::WorkerMessage progress;
  progress.mutable_progress()->set_stage("warmup");
  progress.mutable_progress()->set_step(1);
  progress.mutable_progress()->set_total(1);

  auto ack = Upload(agent_, run_, {{1, Started("NVIDIA H200", "cupti")}, {2, progress}, {3, Step(0, 2000000)},
                                   {4, ops}, {5, kernels}, {6, metrics}, {7, summary}});
  ASSERT_THAT(ack, IsOk());
  EXPECT_THAT(*ack, ElementsAre(Pair(run_, 7u)));

  const RunRecord run = GetRun(run_);
  EXPECT_EQ(run.gpu_name, "NVIDIA H200");
  EXPECT_EQ(run.backend, "cupti");
  EXPECT_EQ(run.parameters, 40226433u);
  EXPECT_EQ(run.kernels_dropped, 7);
  v1::RunSummary s;
  ASSERT_THAT(FromJson(run.summary_json, &s, "summary"), IsOk());
  EXPECT_EQ(s.measured_steps(), 3);
  EXPECT_DOUBLE_EQ(s.step_ms_median(), 12.5);

  auto view = domain_->studies().GetRun(ctx_, run_);
  ASSERT_THAT(view, IsOk());
  ASSERT_EQ(view->steps.size(), 1u);
  EXPECT_EQ(view->steps[0].wall_ns, 2000000);
  ASSERT_EQ(view->ops.size(), 1u);
  EXPECT_EQ(view->ops[0].category, "conv");  // classified: the worker left it empty
  ASSERT_EQ(view->kernels.size(), 1u);
  EXPECT_EQ(view->kernels[0].category, "layout");  // the name decides over the op
  ASSERT_EQ(view->metrics.size(), 1u);
  EXPECT_DOUBLE_EQ(view->metrics[0].value, 12345);
  EXPECT_EQ(view->environment.gpu_name(), "NVIDIA H200");
  EXPECT_EQ(view->preset, "baseline");

  const JobRecord job = GetJob(job_);
  v1::Progress p;
  ASSERT_THAT(FromJson(job.progress_json, &p, "progress"), IsOk());
  EXPECT_EQ(p.stage(), "warmup");
  EXPECT_THAT(Events(study_.study_id).back().progress_json, HasSubstr(R"("stage":"warmup")"));
}

// An upload stream is ingested a window at a time: nothing is stored until the window holds
// kUploadWindowChunks chunks or kUploadWindowBytes bytes; Finish stores the rest and answers
// the highest committed seq per run over all windows.
TEST_F(IngestTest, UploadWindowIngestsWhenFullAndTheRestAtFinish) {
  UploadWindow window(domain_->ingestor(), ctx_);
  const uint64_t full = limits::kUploadWindowChunks;
  for (uint64_t seq = 1; seq < full; ++seq) {
    ASSERT_THAT(window.Add(ResultChunk{run_, agent_, seq, Step(static_cast<int>(seq), 1)}, 10), IsOk());
  }
  EXPECT_EQ(Count("run_chunks"), 0);
  ASSERT_THAT(window.Add(ResultChunk{run_, agent_, full, Step(static_cast<int>(full), 1)}, 10), IsOk());
  EXPECT_EQ(Count("run_chunks"), static_cast<int64_t>(full));
  // One chunk as large as the byte bound is a window of its own.
  ASSERT_THAT(window.Add(ResultChunk{run_, agent_, full + 1, Step(static_cast<int>(full + 1), 1)}, limits::kUploadWindowBytes), IsOk());
  EXPECT_EQ(Count("run_chunks"), static_cast<int64_t>(full + 1));
  ASSERT_THAT(window.Add(ResultChunk{run_, agent_, full + 2, Step(static_cast<int>(full + 2), 1)}, 10), IsOk());
  EXPECT_EQ(Count("run_chunks"), static_cast<int64_t>(full + 1));
  auto acked = window.Finish();
  ASSERT_THAT(acked, IsOk());
  EXPECT_THAT(*acked, ElementsAre(Pair(run_, full + 2)));
  EXPECT_EQ(GetRun(run_).chunks_through, full + 2);
}

TEST_F(IngestTest, UploadWindowReturnsTheErrorOfTheWindowItIngests) {
  const std::string other = Register("node-b", {Gpu(0)});
  UploadWindow window(domain_->ingestor(), ctx_);
  ASSERT_THAT(window.Add(ResultChunk{run_, agent_, 1, Step(0, 1)}, 10), IsOk());
  EXPECT_THAT(window.Add(ResultChunk{run_, other, 2, Step(1, 1)}, limits::kUploadWindowBytes),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("may not upload its results")));
  EXPECT_EQ(Count("run_chunks"), 0);
}

TEST_F(IngestTest, AfterFinishResendsAreAcknowledgedAndNewChunksRefused) {
  ASSERT_THAT(Upload(agent_, run_, {{1, Started("NVIDIA H200", "cupti")}, {2, Step(0, 1)}}), IsOk());
  ASSERT_THAT(Finish(agent_, run_, RunState::kSucceeded, 2), IsOk());
  auto ack = Upload(agent_, run_, {{2, Step(0, 1)}});
  ASSERT_THAT(ack, IsOk());
  EXPECT_THAT(*ack, ElementsAre(Pair(run_, 2u)));
  EXPECT_THAT(Upload(agent_, run_, {{3, Step(1, 1)}}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is succeeded: seq 3 was never stored and results are accepted only while")));
  EXPECT_EQ(Count("run_steps"), 1);
}

TEST_F(IngestTest, AgentEnvironmentCompletesTheWorkers) {
  v1::WorkerMessage started = Started("NVIDIA H200", "cupti");
  started.mutable_started()->mutable_environment()->set_host("worker-host");
  ASSERT_THAT(Upload(agent_, run_, {{1, started}}), IsOk());
  FinishRunRequest r;
  r.agent_id = agent_;
  r.run_id = run_;
  r.state = RunState::kSucceeded;
  r.last_seq = 1;
  v1::Environment env;
  env.set_host("agent-host");
  env.set_slurm_job_id("12345");
  r.agent_environment = env;
  ASSERT_THAT(domain_->scheduler().FinishRun(ctx_, r), IsOk());
  auto view = domain_->studies().GetRun(ctx_, run_);
  ASSERT_THAT(view, IsOk());
  EXPECT_EQ(view->environment.host(), "worker-host");
  EXPECT_EQ(view->environment.slurm_job_id(), "12345");
  EXPECT_EQ(view->environment.gpu_name(), "NVIDIA H200");
}

}  // namespace
}  // namespace medprof::server::testing
