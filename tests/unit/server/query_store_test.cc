// The store side of the queries (schema version 3): findings, timeline parts, jobs by state, and
// the migration of a version-2 database that already holds results.
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/sqlite_store.h"
#include "tests/testing/status_matchers.h"

namespace medprof::server {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "medprof-qstore-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::unique_ptr<SqliteStore> Open(const std::string& path, int version = 0) {
  SqliteStoreOptions o;
  o.path = path;
  o.schema_version = version;
  auto s = SqliteStore::Open(o);
  EXPECT_THAT(s, IsOk());
  return s.ok() ? std::move(s).value() : nullptr;
}

absl::Status Seed(StoreTx& tx) {
  StudyRecord s;
  s.study_id = "st-1";
  s.created_unix_ms = 1;
  MEDPROF_RETURN_IF_ERROR(tx.InsertStudy(s));
  for (int i = 0; i < 3; ++i) {
    JobRecord j;
    j.job_id = "job-" + std::to_string(i);
    j.study_id = "st-1";
    j.preset = "baseline";
    j.config_json = "{}";
    j.state = i == 0 ? JobState::kRunning : JobState::kQueued;
    MEDPROF_RETURN_IF_ERROR(tx.InsertJob(j));
  }
  RunRecord r;
  r.run_id = "run-1";
  r.job_id = "job-0";
  r.study_id = "st-1";
  r.agent_id = "agent-1";
  MEDPROF_RETURN_IF_ERROR(tx.InsertRun(r));
  return tx.InsertKernels("run-1", {KernelRow{.name = "k", .count = 1, .total_ns = 5, .grid = {4, 1, 1}}});
}

TEST(QueryStore, FindingsTimelinesAndJobCounts) {
  TempDir dir;
  auto store = Open(dir.File("q.db"));
  ASSERT_NE(store, nullptr);
  ASSERT_THAT(store->Write([](StoreTx& tx) -> absl::Status {
    MEDPROF_RETURN_IF_ERROR(Seed(tx));
    MEDPROF_RETURN_IF_ERROR(tx.InsertFindings(
        "run-1", {FindingRow{"k_small", "aten::add", "fwd", "elementwise", 0.1, 0.5, 0.05, "small_grid", "few blocks"},
                  FindingRow{"k_big", "aten::conv3d", "fwd", "conv", 0.8, 0.5, 0.4, "tensor_cores_idle", "FP32"}}));
    MEDPROF_RETURN_IF_ERROR(tx.AppendTimelinePart("run-1", TimelinePart{"timeline", 0, 3, R"({"steps":1})"}));
    MEDPROF_RETURN_IF_ERROR(tx.AppendTimelinePart("run-1", TimelinePart{"timeline", 0, 1, R"({"steps":2})"}));
    return tx.AppendTimelinePart("run-1", TimelinePart{"utilization", 0, 9, "{}"});
  }), IsOk());
  ASSERT_THAT(store->Read([](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(auto findings, tx.ListFindings("run-1"));
    EXPECT_EQ(findings.size(), 2u);
    EXPECT_EQ(findings[0].kernel, "k_big");  // highest priority first
    EXPECT_DOUBLE_EQ(findings[0].priority, 0.4);
    EXPECT_EQ(findings[1].rule, "small_grid");
    MEDPROF_ASSIGN_OR_RETURN(auto parts, tx.ListTimelineParts("run-1", "timeline"));
    EXPECT_EQ(parts.size(), 2u);
    EXPECT_EQ(parts[0].part, 0);
    EXPECT_EQ(parts[1].part, 1);  // numbered in upload order by the store
    EXPECT_EQ(parts[1].events, 1);
    EXPECT_EQ(parts[1].body_json, R"({"steps":2})");
    MEDPROF_ASSIGN_OR_RETURN(auto util, tx.ListTimelineParts("run-1", "utilization"));
    EXPECT_EQ(util.size(), 1u);
    MEDPROF_ASSIGN_OR_RETURN(auto none, tx.ListTimelineParts("run-2", "timeline"));
    EXPECT_TRUE(none.empty());
    MEDPROF_ASSIGN_OR_RETURN(auto times, tx.ListKernelTimes("run-1"));
    EXPECT_EQ(times.size(), 1u);
    EXPECT_EQ(times[0].name, "k");
    EXPECT_EQ(times[0].count, 1);
    EXPECT_EQ(times[0].total_ns, 5);
    EXPECT_TRUE(times[0].grid.empty());  // compare's narrow read leaves the launch shape out
    MEDPROF_ASSIGN_OR_RETURN(auto counts, tx.CountJobsByState());
    EXPECT_THAT(counts, ElementsAre(Pair("queued", 2), Pair("running", 1)));
    MEDPROF_ASSIGN_OR_RETURN(int64_t n, tx.CountRows("run_timelines"));
    EXPECT_EQ(n, 3);
    return absl::OkStatus();
  }), IsOk());
  // Only the two kinds exist.
  EXPECT_THAT(store->Write([](StoreTx& tx) {
    return tx.AppendTimelinePart("run-1", TimelinePart{"flamegraph", 0, 1, "{}"});
  }), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("CHECK constraint failed")));
}

TEST(QueryStore, Version2DatabaseWithResultsMigrates) {
  TempDir dir;
  const std::string path = dir.File("v2.db");
  {
    auto v2 = Open(path, 2);
    ASSERT_NE(v2, nullptr);
    ASSERT_THAT(v2->Write(Seed), IsOk());
    EXPECT_THAT(v2->Read([](StoreTx& tx) { return tx.CountRows("run_findings").status(); }),
                StatusIs(absl::StatusCode::kInternal, HasSubstr("internal database error: SQL logic error")));
  }
  auto store = Open(path, 3);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), 3);
  ASSERT_THAT(store->Write([](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(auto kernels, tx.ListKernels("run-1"));
    EXPECT_EQ(kernels.size(), 1u);  // version-2 rows kept
    return tx.InsertFindings("run-1", {FindingRow{.kernel = "k", .priority = 0.1}});
  }), IsOk());
  ASSERT_THAT(store->Read([](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(int64_t n, tx.CountRows("run_findings"));
    EXPECT_EQ(n, 1);
    return absl::OkStatus();
  }), IsOk());
}

}  // namespace
}  // namespace medprof::server
