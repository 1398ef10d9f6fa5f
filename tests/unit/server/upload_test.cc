// RunUploader: a worker's record stream stored as a run of a study through the agent's ingest
// path; malformed streams refused before anything is written.
#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::testing {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kMs = 1'000'000;

class UploadTest : public DomainTest {
 protected:
  // started (opt1 on the CPU), five steps, op times, a summary.
  static std::vector<v1::WorkerMessage> CpuRun(int64_t step_ms) {
    std::vector<v1::WorkerMessage> m = {Started("", "cpu")};
    for (int i = 0; i < 5; ++i) m.push_back(Step(i, step_ms * kMs));
    v1::WorkerMessage ops;
    auto* o = ops.mutable_ops()->add_ops();
    o->set_name("aten::conv3d");
    o->set_count(5);
    o->set_self_ns(4 * kMs);
    o->set_total_ns(4 * kMs);
    m.push_back(ops);
    v1::WorkerMessage summary;
    summary.mutable_summary()->set_measured_steps(5);
    m.push_back(summary);
    return m;
  }
};

TEST_F(UploadTest, StoresASucceededRunThatCompareSees) {
  const SubmitStudyResult s = Submit({"baseline"}, {}, 1);
  UploadRunRequest r;
  r.study_id = s.study_id;
  r.messages = CpuRun(20);
  auto out = domain_->uploader().Upload(ctx_, r);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->study_id, s.study_id);
  EXPECT_EQ(out->preset, "opt1");
  EXPECT_EQ(out->gpu, "cpu");
  EXPECT_EQ(out->steps, 5);
  // The upload's run held a lease like a leased run's, so the lease reaper could not call it lost
  // while its windows were ingested.
  const RunRecord run = GetRun(out->run_id);
  EXPECT_EQ(run.lease_expires_unix_ms, run.started_unix_ms + options_.lease_ttl_ms);

  CompareRequest c;
  c.study_id = s.study_id;
  auto cmp = domain_->queries().Compare(ctx_, c);
  ASSERT_THAT(cmp, IsOk());
  ASSERT_EQ(cmp->cells.size(), 1u);  // the queued baseline job has no run yet
  EXPECT_EQ(cmp->cells[0].preset, "opt1");
  EXPECT_EQ(cmp->cells[0].gpu, "cpu");
  EXPECT_DOUBLE_EQ(cmp->cells[0].step_ms_median, 20.0);
  EXPECT_EQ(cmp->cells[0].time_source, "ops");
}

TEST_F(UploadTest, RefusesMalformedStreamsNamingTheRecord) {
  const SubmitStudyResult s = Submit({"baseline"}, {}, 1);
  UploadRunRequest r;
  r.study_id = s.study_id;
  r.messages = CpuRun(20);
  r.messages.erase(r.messages.begin());
  EXPECT_THAT(domain_->uploader().Upload(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("messages[0]: is 'step', expected 'started'")));

  r.messages = CpuRun(20);
  r.messages.pop_back();
  EXPECT_THAT(domain_->uploader().Upload(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no 'summary' record")));

  r.messages = CpuRun(20);
  v1::WorkerMessage err;
  err.mutable_error()->set_kind("oom");
  err.mutable_error()->set_message("CUDA out of memory");
  r.messages.insert(r.messages.begin() + 2, err);
  EXPECT_THAT(domain_->uploader().Upload(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("messages[2]: the run failed (oom: CUDA out of memory)")));

  r.messages = CpuRun(20);
  r.messages[0].mutable_started()->mutable_effective()->set_preset("fp64");
  EXPECT_THAT(domain_->uploader().Upload(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("messages[0].started.effective.preset: 'fp64' is not a preset (allowed: ")));

  r.messages = CpuRun(20);
  r.study_id = "st-000000000000";
  EXPECT_THAT(domain_->uploader().Upload(ctx_, r), StatusIs(absl::StatusCode::kNotFound, HasSubstr("study_id")));
  // Nothing was written by any refusal: the study's one submitted job, no run.
  EXPECT_EQ(Count("jobs"), 1);
  EXPECT_EQ(Count("runs"), 0);
}

}  // namespace
}  // namespace medprof::server::testing
