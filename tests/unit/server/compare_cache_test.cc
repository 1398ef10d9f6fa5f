// The compare cache (server/domain/compare_cache.h) never serves a comparison that a write has
// made stale: after a new finished run, a requeue and its rerun, an upload, an import, a write to
// the second study of a cross-study compare, and a deletion, the next compare sees the change;
// and it does serve a repeated compare of an unchanged study.
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::testing {
namespace {

using ::medprof::testing::IsOk;

constexpr int64_t kMs = 1'000'000;

class CompareCacheTest : public DomainTest {
 protected:
  // Uploads RunStarted and the steps of the assignment's run, then finishes it as succeeded.
  void Complete(const std::string& agent, const Assignment& a, const std::vector<int64_t>& step_ms) {
    std::vector<std::pair<uint64_t, v1::WorkerMessage>> msgs;
    uint64_t seq = 0;
    msgs.emplace_back(++seq, Started("NVIDIA H200", "cupti"));
    for (size_t i = 0; i < step_ms.size(); ++i) msgs.emplace_back(++seq, Step(static_cast<int>(i), step_ms[i] * kMs));
    ASSERT_THAT(Upload(agent, a.run_id, std::move(msgs)), IsOk());
    ASSERT_THAT(Finish(agent, a.run_id, RunState::kSucceeded, seq), IsOk());
  }

  void RunNext(const std::string& agent, const std::vector<int64_t>& step_ms) {
    std::optional<Assignment> a = Acquire(agent);
    ASSERT_TRUE(a.has_value());
    Complete(agent, *a, step_ms);
  }

  CompareResult CompareOf(const std::string& study_id, std::vector<std::string> more = {}) {
    CompareRequest r;
    r.study_id = study_id;
    r.more_study_ids = std::move(more);
    auto out = domain_->queries().Compare(ctx_, r);
    EXPECT_THAT(out, IsOk());
    return out.ok() ? *std::move(out) : CompareResult{};
  }

  size_t Hits() const { return domain_->queries().compare_cache().hits(); }
};

TEST_F(CompareCacheTest, ServesARepeatedCompareAndKeysItsOptions) {
  const std::string gpu = Register("node", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline", "opt1"});
  RunNext(gpu, {10, 12, 14});
  RunNext(gpu, {5, 6, 7});
  const CompareResult first = CompareOf(s.study_id);
  EXPECT_EQ(Hits(), 0u);
  const CompareResult again = CompareOf(s.study_id);
  EXPECT_EQ(Hits(), 1u);
  ASSERT_EQ(again.cells.size(), 2u);
  EXPECT_DOUBLE_EQ(again.cells[1].speedup_vs_baseline, first.cells[1].speedup_vs_baseline);
  EXPECT_DOUBLE_EQ(again.cells[1].speedup_vs_baseline, 12.0 / 6.0);
  CompareRequest other;  // other options are another question
  other.study_id = s.study_id;
  other.baseline_preset = "opt1";
  auto out = domain_->queries().Compare(ctx_, other);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(Hits(), 1u);
  EXPECT_DOUBLE_EQ(out->cells[0].speedup_vs_baseline, 6.0 / 12.0);
}

TEST_F(CompareCacheTest, ANewFinishedRunIsSeen) {
  const std::string gpu = Register("node", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline"}, {}, 2);
  RunNext(gpu, {10, 10, 10});
  CompareOf(s.study_id);
  ASSERT_EQ(CompareOf(s.study_id).cells.at(0).n, 1);
  ASSERT_EQ(Hits(), 1u);  // cached
  RunNext(gpu, {30, 30, 30});
  const CompareResult after = CompareOf(s.study_id);
  EXPECT_EQ(after.cells.at(0).n, 2);
  EXPECT_DOUBLE_EQ(after.cells.at(0).step_ms_median, 20);
}

TEST_F(CompareCacheTest, ARequeueAndItsRerunAreSeen) {
  const std::string gpu = Register("node", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline"}, {}, 2);
  RunNext(gpu, {10, 10, 10});
  ASSERT_EQ(CompareOf(s.study_id).cells.at(0).n, 1);
  // The second run uploads steps, then its lease expires: the job is requeued.
  std::optional<Assignment> lost = Acquire(gpu);
  ASSERT_TRUE(lost.has_value());
  ASSERT_THAT(Upload(gpu, lost->run_id, {{1, Started("NVIDIA H200", "cupti")}, {2, Step(0, 99 * kMs)}}), IsOk());
  clock_.AdvanceMs(options_.lease_ttl_ms + 1);
  ASSERT_THAT(domain_->scheduler().ExpireLeases(), IsOk());
  ASSERT_EQ(GetJob(lost->job_id).state, JobState::kQueued);
  const CompareResult requeued = CompareOf(s.study_id);
  EXPECT_EQ(requeued.cells.at(0).n, 1);  // a lost run is not compared
  EXPECT_DOUBLE_EQ(requeued.cells.at(0).step_ms_median, 10);
  RunNext(gpu, {20, 20, 20});  // the requeued job runs again and succeeds
  const CompareResult rerun = CompareOf(s.study_id);
  EXPECT_EQ(rerun.cells.at(0).n, 2);
  EXPECT_DOUBLE_EQ(rerun.cells.at(0).step_ms_median, 15);
}

TEST_F(CompareCacheTest, AnUploadedRunIsSeen) {
  const std::string gpu = Register("node", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline"});
  RunNext(gpu, {10, 10, 10});
  ASSERT_EQ(CompareOf(s.study_id).cells.size(), 1u);
  UploadRunRequest up;
  up.study_id = s.study_id;
  v1::WorkerMessage summary;
  summary.mutable_summary()->set_measured_steps(2);
  up.messages = {Started("", "cpu"), Step(0, 50 * kMs), Step(1, 50 * kMs), summary};
  ASSERT_THAT(domain_->uploader().Upload(ctx_, up), IsOk());
  const CompareResult after = CompareOf(s.study_id);
  ASSERT_EQ(after.cells.size(), 2u);
  EXPECT_EQ(after.cells[1].gpu, "cpu");
  EXPECT_DOUBLE_EQ(after.cells[1].step_ms_median, 50);
}

TEST_F(CompareCacheTest, AnImportedRunIsSeen) {
  const std::string gpu = Register("node", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline"});
  RunNext(gpu, {10, 10, 10});
  ASSERT_EQ(CompareOf(s.study_id).cells.size(), 1u);
  ImportRunRequest im;
  im.study_id = s.study_id;
  im.preset = "baseline";
  im.gpu = "NVIDIA H100";
  im.source = "ncu";
  v1::KernelStat k;
  k.set_name("sm90_xmma_fprop");
  k.set_count(1);
  k.set_total_ns(8 * kMs);
  im.kernels = {k};
  ASSERT_THAT(domain_->importer().Import(ctx_, im), IsOk());
  const CompareResult after = CompareOf(s.study_id);
  ASSERT_EQ(after.cells.size(), 2u);
  EXPECT_EQ(after.cells[1].gpu, "NVIDIA H200");
  EXPECT_EQ(after.cells[0].gpu, "NVIDIA H100");
  EXPECT_DOUBLE_EQ(after.cells[0].step_ms_median, 8);
}

TEST_F(CompareCacheTest, AWriteToTheSecondStudyOfACrossStudyCompareIsSeen) {
  const std::string gpu = Register("node", {Gpu(0)});
  const SubmitStudyResult a = Submit({"baseline"});
  RunNext(gpu, {10, 10, 10});
  const SubmitStudyResult b = Submit({"baseline"}, {}, 2);
  RunNext(gpu, {20, 20, 20});
  CompareOf(a.study_id, {b.study_id});
  ASSERT_DOUBLE_EQ(CompareOf(a.study_id, {b.study_id}).cells.at(1).speedup_vs_first_study, 0.5);
  ASSERT_EQ(Hits(), 1u);
  RunNext(gpu, {40, 40, 40});
  const CompareResult after = CompareOf(a.study_id, {b.study_id});
  EXPECT_EQ(after.cells.at(1).n, 2);
  EXPECT_DOUBLE_EQ(after.cells.at(1).speedup_vs_first_study, 10.0 / 30.0);
}

// No delete exists in the server yet; a run deleted in SQL (a future retention command, or an
// operator) leaves the cached comparison all the same.
TEST(CompareCacheFile, ADeletedRunIsNoLongerCompared) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / absl::StrCat("medprof-cc-", getpid());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "cc.db").string();
  {
    SqliteStoreOptions so;
    so.path = path;
    auto store = SqliteStore::Open(so);
    ASSERT_THAT(store, IsOk());
    FakeClock clock;
    auto domain = Domain::Create(store->get(), &clock, DomainOptions());
    ASSERT_THAT(domain, IsOk());
    const CallContext ctx = CallContext::Background();
    const std::string study = absl::StrCat("st-", getpid());
    std::vector<std::string> runs;
    ASSERT_THAT((*store)->Write([&](StoreTx& tx) -> absl::Status {
      StudyRecord st;
      st.study_id = study;
      st.created_unix_ms = 1;
      MEDPROF_RETURN_IF_ERROR(tx.InsertStudy(st));
      JobRecord job;
      job.job_id = "job-1";
      job.study_id = study;
      job.preset = "baseline";
      job.state = JobState::kSucceeded;
      job.config_json = "{}";
      MEDPROF_RETURN_IF_ERROR(tx.InsertJob(job));
      for (int i = 0; i < 2; ++i) {
        RunRecord run;
        run.run_id = absl::StrCat("run-", i);
        run.job_id = job.job_id;
        run.study_id = study;
        run.state = RunState::kSucceeded;
        MEDPROF_RETURN_IF_ERROR(tx.InsertRun(run));
        MEDPROF_RETURN_IF_ERROR(tx.InsertSteps(run.run_id, {StepRow{.phase = 2, .step = 0, .wall_ns = (i + 1) * 10 * kMs}}));
      }
      return absl::OkStatus();
    }), IsOk());
    CompareRequest r;
    r.study_id = study;
    ASSERT_EQ((*domain)->queries().Compare(ctx, r)->cells.at(0).n, 2);
    ASSERT_EQ((*domain)->queries().Compare(ctx, r)->cells.at(0).n, 2);
    ASSERT_EQ((*domain)->queries().compare_cache().hits(), 1u);
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(raw, "PRAGMA foreign_keys = ON; DELETE FROM runs WHERE run_id = 'run-1'", nullptr, nullptr,
                           nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(raw);
    sqlite3_close(raw);
    auto after = (*domain)->queries().Compare(ctx, r);
    ASSERT_THAT(after, IsOk());
    EXPECT_EQ(after->cells.at(0).n, 1);
    EXPECT_DOUBLE_EQ(after->cells.at(0).step_ms_median, 10);
    (*domain)->Shutdown();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace medprof::server::testing
