#include "server/store/sqlite_store.h"
#include "server/store/migrations.h"
#include "server/store/sqlite_db.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <future>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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
    std::string tmpl = (std::filesystem::temp_directory_path() / "medprof-store-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::unique_ptr<SqliteStore> OpenOrDie(const std::string& path, int version = 0) {
  SqliteStoreOptions o;
  o.path = path;
  o.schema_version = version;
  auto s = SqliteStore::Open(o);
  EXPECT_THAT(s, IsOk());
  return s.ok() ? std::move(s).value() : nullptr;
}

int64_t Count(Store& store, std::string_view table) {
  int64_t n = -1;
  EXPECT_THAT(store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(n, tx.CountRows(table));
    return absl::OkStatus();
  }), IsOk());
  return n;
}

StudyRecord MakeStudy(const std::string& id) {
  StudyRecord s;
  s.study_id = id;
  s.name = "tf32 on h200";
  s.project = "lab";
  s.created_unix_ms = 1000;
  return s;
}

JobRecord MakeJob(const std::string& id, const std::string& study) {
  JobRecord j;
  j.job_id = id;
  j.study_id = study;
  j.preset = "opt1";
  j.target = "gpu=h200";
  j.config_json = R"({"preset":"opt1"})";
  j.created_unix_ms = j.updated_unix_ms = 1000;
  return j;
}

AgentRecord MakeAgent(const std::string& id, const std::string& name) {
  AgentRecord a;
  a.agent_id = id;
  a.name = name;
  a.host = "c001";
  a.version = "0.1.0";
  a.devices = {DeviceRecord{.index = 0, .kind = "cuda", .name = "NVIDIA H200", .compute_capability = "9.0",
                            .memory_bytes = 150'000'000'000ULL, .sm_count = 132}};
  a.labels = {{"site", "tacc"}};
  a.registered_unix_ms = a.last_seen_unix_ms = 1000;
  return a;
}

RunRecord MakeRun(const std::string& id, const std::string& job, const std::string& study) {
  RunRecord r;
  r.run_id = id;
  r.job_id = job;
  r.study_id = study;
  r.agent_id = "agent-1";
  r.device_index = 0;
  r.lease_expires_unix_ms = 5000;
  r.started_unix_ms = 1000;
  return r;
}

TEST(SqliteStore, EmptyFileGetsEveryMigration) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("m.db"));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), LatestSchemaVersion());
  EXPECT_EQ(store->journal_mode(), "wal");
  EXPECT_EQ(Count(*store, "schema_version"), LatestSchemaVersion());
  for (const char* t : {"agents", "studies", "jobs", "runs", "events", "run_chunks", "run_steps", "run_ops",
                        "run_kernels", "run_metrics", "run_findings", "run_timelines"}) {
    EXPECT_EQ(Count(*store, t), 0) << t;
  }
  // Opening again applies nothing.
  store.reset();
  store = OpenOrDie(dir.File("m.db"));
  EXPECT_EQ(Count(*store, "schema_version"), LatestSchemaVersion());
}

TEST(SqliteStore, MigratesAVersion1DatabaseAndKeepsItsData) {
  TempDir dir;
  const std::string path = dir.File("old.db");
  {
    auto v1 = OpenOrDie(path, 1);
    ASSERT_NE(v1, nullptr);
    EXPECT_EQ(v1->schema_version(), 1);
    ASSERT_THAT(v1->Write([](StoreTx& tx) -> absl::Status {
      MEDPROF_RETURN_IF_ERROR(tx.PutAgent(MakeAgent("agent-1", "node-a")));
      MEDPROF_RETURN_IF_ERROR(tx.InsertStudy(MakeStudy("st-1")));
      MEDPROF_RETURN_IF_ERROR(tx.InsertJob(MakeJob("job-1", "st-1")));
      return tx.InsertRun(MakeRun("run-1", "job-1", "st-1"));
    }), IsOk());
    // Version 1 has no result tables ("no such table: run_chunks" goes to the log, not to callers).
    EXPECT_THAT(v1->Read([](StoreTx& tx) { return tx.CountRows("run_chunks").status(); }),
                StatusIs(absl::StatusCode::kInternal, HasSubstr("internal database error: SQL logic error")));
  }
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), LatestSchemaVersion());
  ASSERT_THAT(store->Write([](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(auto study, tx.GetStudy("st-1"));
    EXPECT_TRUE(study.has_value());
    EXPECT_EQ(study->name, "tf32 on h200");
    MEDPROF_ASSIGN_OR_RETURN(auto jobs, tx.ListJobs("st-1"));
    EXPECT_EQ(jobs.size(), 1u);
    EXPECT_EQ(jobs[0].target, "gpu=h200");
    MEDPROF_ASSIGN_OR_RETURN(auto agent, tx.FindAgentByName("node-a"));
    EXPECT_TRUE(agent.has_value());
    EXPECT_EQ(agent->devices.size(), 1u);
    // The old run got the new columns with their defaults, and they can be written.
    MEDPROF_ASSIGN_OR_RETURN(auto run, tx.GetRun("run-1"));
    EXPECT_TRUE(run.has_value());
    EXPECT_EQ(run->chunks_through, 0u);
    EXPECT_EQ(run->gpu_name, "");
    run->gpu_name = "NVIDIA H200";
    run->chunks_through = 3;
    MEDPROF_RETURN_IF_ERROR(tx.UpdateRunResults(*run));
    MEDPROF_ASSIGN_OR_RETURN(bool inserted, tx.InsertChunk("run-1", 1, "started", 2000));
    EXPECT_TRUE(inserted);
    return absl::OkStatus();
  }), IsOk());
  EXPECT_EQ(Count(*store, "run_chunks"), 1);
  EXPECT_EQ(Count(*store, "studies"), 1);
  EXPECT_EQ(Count(*store, "jobs"), 1);
}

TEST(SqliteStore, RefusesADatabaseFromANewerServer) {
  TempDir dir;
  const std::string path = dir.File("new.db");
  OpenOrDie(path).reset();
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  const int future = LatestSchemaVersion() + 1;
  const std::string insert = absl::StrCat("INSERT INTO schema_version VALUES (", future, ", 'future', 0)");
  ASSERT_EQ(sqlite3_exec(raw, insert.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  SqliteStoreOptions o;
  o.path = path;
  EXPECT_THAT(SqliteStore::Open(o),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(absl::StrCat("schema version ", future, " but this medprof-server knows versions up to ",
                                                LatestSchemaVersion()))));
}

TEST(SqliteStore, MissingDirectoryNamesThePath) {
  SqliteStoreOptions o;
  o.path = "/nonexistent-medprof-dir/x.db";
  EXPECT_THAT(SqliteStore::Open(o), StatusIs(absl::StatusCode::kFailedPrecondition,
                                             HasSubstr("opening database /nonexistent-medprof-dir/x.db")));
}

// Read-only for this process even as root: chattr +i (root ignores mode bits), chmod 0444 else.
bool MakeReadOnly(const std::string& path, bool read_only) {
  if (geteuid() == 0) {
    return std::system(absl::StrCat("chattr ", read_only ? "+i '" : "-i '", path, "'").c_str()) == 0;
  }
  std::filesystem::permissions(path, read_only ? std::filesystem::perms::owner_read
                                               : std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return true;
}

// Issue 22 case 4: a database the server could open but not write is refused at start-up, not
// at the first submission.
TEST(SqliteStore, RefusesAReadOnlyDatabaseAtOpen) {
  TempDir dir;
  const std::string path = dir.File("ro.db");
  OpenOrDie(path).reset();
  ASSERT_TRUE(MakeReadOnly(path, true));
  SqliteStoreOptions o;
  o.path = path;
  EXPECT_THAT(SqliteStore::Open(o), StatusIs(absl::StatusCode::kFailedPrecondition,
                                             HasSubstr(absl::StrCat(path, " is not writable ("))));
  ASSERT_TRUE(MakeReadOnly(path, false));
}

TEST(SqliteStore, RefusesAWalFileItCannotCreate) {
  TempDir dir;
  const std::string path = dir.File("nowal.db");
  std::filesystem::create_directory(path + "-wal");
  SqliteStoreOptions o;
  o.path = path;
  EXPECT_THAT(SqliteStore::Open(o), StatusIs(absl::StatusCode::kFailedPrecondition,
                                             HasSubstr(absl::StrCat(path, "-wal is not a regular file"))));
}

// Store errors reach clients with a code that says what to do and the cause, never SQL.
TEST(SqliteError, MapsCodesAndKeepsStatementsOut) {
  const std::string call = "sqlite3_step(INSERT INTO studies (seq, study_id) VALUES (?1, ?2))";
  struct Case {
    int rc;
    absl::StatusCode code;
    std::string cause;
  };
  for (const Case& c : {Case{SQLITE_READONLY, absl::StatusCode::kUnavailable,
                             "database: the server cannot write its database: attempt to write a readonly database"},
                        Case{SQLITE_IOERR_WRITE, absl::StatusCode::kUnavailable, "cannot write its database: disk I/O error"},
                        Case{SQLITE_BUSY, absl::StatusCode::kUnavailable, "locked by another process"},
                        Case{SQLITE_FULL, absl::StatusCode::kResourceExhausted, "the database or its disk is full"},
                        Case{SQLITE_NOMEM, absl::StatusCode::kResourceExhausted, "out of memory"},
                        Case{SQLITE_CORRUPT, absl::StatusCode::kInternal, "internal database error"},
                        Case{SQLITE_ERROR, absl::StatusCode::kInternal, "internal database error: SQL logic error"}}) {
    const absl::Status s = SqliteError(nullptr, c.rc, call);
    EXPECT_THAT(s, StatusIs(c.code, HasSubstr(c.cause))) << c.rc;
    EXPECT_THAT(std::string(s.message()), ::testing::Not(HasSubstr("INSERT"))) << c.rc;
  }
}

// Issue 22 case 9: reads run on their own connections, beside a write in progress and beside
// another read in progress (with one connection behind one mutex, both waited).
TEST(SqliteStore, ReadsRunBesideAWriteAndBesideEachOther) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("concurrent.db"));
  ASSERT_NE(store, nullptr);
  ASSERT_THAT(store->Write([](StoreTx& tx) { return tx.InsertStudy(MakeStudy("st-1")); }), IsOk());

  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  auto hold = [&](bool write) {
    return std::async(std::launch::async, [&, write] {
      auto body = [&](StoreTx& tx) -> absl::Status {
        if (write) MEDPROF_RETURN_IF_ERROR(tx.InsertStudy(MakeStudy("st-2")));
        entered.set_value();
        released.wait();
        return absl::OkStatus();
      };
      return write ? store->Write(body) : store->Read(body);
    });
  };
  for (bool write : {true, false}) {
    entered = std::promise<void>();
    release = std::promise<void>();
    released = release.get_future().share();
    auto holder = hold(write);
    entered.get_future().wait();
    auto reader = std::async(std::launch::async, [&] { return Count(*store, "studies"); });
    ASSERT_EQ(reader.wait_for(std::chrono::seconds(5)), std::future_status::ready)
        << (write ? "a read waited behind a write" : "a read waited behind another read");
    // During the write, its row is not visible yet; during the read, the committed rows are.
    EXPECT_EQ(reader.get(), write ? 1 : 2);
    release.set_value();
    EXPECT_THAT(holder.get(), IsOk());
  }
  EXPECT_EQ(Count(*store, "studies"), 2) << "visible once committed";
  EXPECT_GE(store->readers_opened(), 2);
  EXPECT_LE(store->readers_opened(), 32);
}

TEST(SqliteStore, ReaderConnectionsAreReadOnly) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("ro-readers.db"));
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(store->Read([](StoreTx& tx) { return tx.InsertStudy(MakeStudy("st-x")); }),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("write inside a read transaction")));
  EXPECT_EQ(Count(*store, "studies"), 0);
}

TEST(SqliteStore, FailedWriteRollsBackEverything) {
  auto store = OpenOrDie(":memory:");
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->journal_mode(), "memory");
  EXPECT_THAT(store->Write([](StoreTx& tx) -> absl::Status {
    MEDPROF_RETURN_IF_ERROR(tx.InsertStudy(MakeStudy("st-1")));
    MEDPROF_RETURN_IF_ERROR(tx.InsertJob(MakeJob("job-1", "st-1")));
    return absl::InvalidArgumentError("repeats: 0 is out of range");
  }), StatusIs(absl::StatusCode::kInvalidArgument, "repeats: 0 is out of range"));
  EXPECT_EQ(Count(*store, "studies"), 0);
  EXPECT_EQ(Count(*store, "jobs"), 0);
  // A constraint failure (duplicate id) rolls back too.
  EXPECT_THAT(store->Write([](StoreTx& tx) -> absl::Status {
    MEDPROF_RETURN_IF_ERROR(tx.InsertStudy(MakeStudy("st-1")));
    return tx.InsertStudy(MakeStudy("st-1"));
  }), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("UNIQUE constraint failed: studies.study_id")));
  EXPECT_EQ(Count(*store, "studies"), 0);
}

TEST(SqliteStore, ReadTransactionsRefuseWrites) {
  auto store = OpenOrDie(":memory:");
  EXPECT_THAT(store->Read([](StoreTx& tx) { return tx.InsertStudy(MakeStudy("st-1")); }),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("write inside a read transaction")));
  EXPECT_EQ(Count(*store, "studies"), 0);
}

TEST(SqliteStore, ChunksAreRecordedOnce) {
  auto store = OpenOrDie(":memory:");
  ASSERT_THAT(store->Write([](StoreTx& tx) -> absl::Status {
    MEDPROF_RETURN_IF_ERROR(tx.InsertStudy(MakeStudy("st-1")));
    MEDPROF_RETURN_IF_ERROR(tx.InsertJob(MakeJob("job-1", "st-1")));
    MEDPROF_RETURN_IF_ERROR(tx.InsertRun(MakeRun("run-1", "job-1", "st-1")));
    MEDPROF_ASSIGN_OR_RETURN(bool first, tx.InsertChunk("run-1", 1, "step", 1));
    MEDPROF_ASSIGN_OR_RETURN(bool again, tx.InsertChunk("run-1", 1, "step", 2));
    MEDPROF_ASSIGN_OR_RETURN(bool third, tx.InsertChunk("run-1", 3, "step", 2));
    EXPECT_TRUE(first);
    EXPECT_FALSE(again);
    EXPECT_TRUE(third);
    MEDPROF_ASSIGN_OR_RETURN(auto seqs, tx.ListChunkSeqs("run-1", 0, 10));
    EXPECT_THAT(seqs, ElementsAre(1u, 3u));
    MEDPROF_ASSIGN_OR_RETURN(bool has2, tx.HasChunk("run-1", 2));
    EXPECT_FALSE(has2);
    return absl::OkStatus();
  }), IsOk());
  EXPECT_EQ(Count(*store, "run_chunks"), 2);
}

TEST(SqliteStore, ResultRowsRoundTrip) {
  auto store = OpenOrDie(":memory:");
  ASSERT_THAT(store->Write([](StoreTx& tx) -> absl::Status {
    MEDPROF_RETURN_IF_ERROR(tx.InsertStudy(MakeStudy("st-1")));
    MEDPROF_RETURN_IF_ERROR(tx.InsertJob(MakeJob("job-1", "st-1")));
    MEDPROF_RETURN_IF_ERROR(tx.InsertRun(MakeRun("run-1", "job-1", "st-1")));
    StepRow s{.phase = 2, .step = 0, .wall_ns = 1500, .device_ns = 1400, .loss = 0.25,
              .phase_ns = {{"bwd", 700}, {"fwd", 600}}};
    MEDPROF_RETURN_IF_ERROR(tx.InsertSteps("run-1", {s}));
    KernelRow k;
    k.name = "sm90_xmma_fprop";
    k.op = "aten::conv3d";
    k.phase = "fwd";
    k.category = "conv";
    k.count = 4;
    k.total_ns = 4000;
    k.grid = {16, 2, 1};
    k.block = {128, 1, 1};
    k.theoretical_occupancy = 0.5;
    MEDPROF_RETURN_IF_ERROR(tx.InsertKernels("run-1", {k}));
    MEDPROF_RETURN_IF_ERROR(tx.InsertOps("run-1", {OpRow{"aten::conv3d", "fwd", "conv", 4, 9000, 8000}}));
    MEDPROF_RETURN_IF_ERROR(tx.InsertMetrics("run-1", {MetricRow{"run", "sm__cycles_elapsed.avg", 1e9, "cycle"}}));
    return absl::OkStatus();
  }), IsOk());
  ASSERT_THAT(store->Read([](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(auto steps, tx.ListSteps("run-1"));
    EXPECT_EQ(steps.size(), 1u);
    EXPECT_EQ(steps[0].wall_ns, 1500);
    EXPECT_DOUBLE_EQ(steps[0].loss, 0.25);
    EXPECT_THAT(steps[0].phase_ns, ElementsAre(Pair("bwd", 700), Pair("fwd", 600)));
    MEDPROF_ASSIGN_OR_RETURN(auto kernels, tx.ListKernels("run-1"));
    EXPECT_EQ(kernels.size(), 1u);
    EXPECT_THAT(kernels[0].grid, ElementsAre(16, 2, 1));
    EXPECT_THAT(kernels[0].block, ElementsAre(128, 1, 1));
    EXPECT_DOUBLE_EQ(kernels[0].theoretical_occupancy, 0.5);
    MEDPROF_ASSIGN_OR_RETURN(auto ops, tx.ListOps("run-1"));
    EXPECT_EQ(ops.size(), 1u);
    EXPECT_EQ(ops[0].self_ns, 8000);
    MEDPROF_ASSIGN_OR_RETURN(auto metrics, tx.ListMetrics("run-1"));
    EXPECT_EQ(metrics.size(), 1u);
    EXPECT_DOUBLE_EQ(metrics[0].value, 1e9);
    return absl::OkStatus();
  }), IsOk());
}

TEST(SqliteStore, PutAgentReplacesDevicesAndLabels) {
  auto store = OpenOrDie(":memory:");
  AgentRecord a = MakeAgent("agent-1", "node-a");
  ASSERT_THAT(store->Write([&](StoreTx& tx) { return tx.PutAgent(a); }), IsOk());
  a.devices.push_back(DeviceRecord{.index = 1, .kind = "cuda", .name = "NVIDIA H200", .compute_capability = "9.0"});
  a.labels = {{"partition", "gh"}};
  ASSERT_THAT(store->Write([&](StoreTx& tx) { return tx.PutAgent(a); }), IsOk());
  EXPECT_EQ(Count(*store, "agents"), 1);
  EXPECT_EQ(Count(*store, "agent_devices"), 2);
  EXPECT_EQ(Count(*store, "agent_labels"), 1);
  ASSERT_THAT(store->Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(auto got, tx.GetAgent("agent-1"));
    EXPECT_TRUE(got.has_value());
    EXPECT_EQ(got->devices, a.devices);
    EXPECT_EQ(got->labels, a.labels);
    return absl::OkStatus();
  }), IsOk());
}

TEST(SqliteStore, CountRowsRefusesUnknownTables) {
  auto store = OpenOrDie(":memory:");
  EXPECT_THAT(store->Read([](StoreTx& tx) { return tx.CountRows("sqlite_master; DROP TABLE x").status(); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown table")));
}

int64_t Revision(Store& store, const std::string& study_id) {
  int64_t revision = -1;
  EXPECT_THAT(store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(std::optional<StudyRecord> s, tx.GetStudy(study_id));
    if (s.has_value()) revision = s->revision;
    return absl::OkStatus();
  }), IsOk());
  return revision;
}

// studies.revision (migration 7) moves with every change that compare can see, whatever writes
// it, and stays put for the writes compare cannot see (a running run's rows, leases, job states).
TEST(SqliteStore, StudyRevisionMovesWithWhatCompareReads) {
  TempDir dir;
  const std::string path = dir.File("rev.db");
  auto store = OpenOrDie(path);
  RunRecord run = MakeRun("run-1", "job-1", "st-1");
  KernelRow k;
  k.name = "sm90_xmma_fprop";
  k.total_ns = 4000;
  auto write = [&](auto fn) { ASSERT_THAT(store->Write([&](StoreTx& tx) -> absl::Status { return fn(tx); }), IsOk()); };
  write([&](StoreTx& tx) -> absl::Status {
    MEDPROF_RETURN_IF_ERROR(tx.InsertStudy(MakeStudy("st-1")));
    MEDPROF_RETURN_IF_ERROR(tx.InsertStudy(MakeStudy("st-2")));
    MEDPROF_RETURN_IF_ERROR(tx.InsertJob(MakeJob("job-1", "st-1")));
    return tx.InsertRun(run);
  });
  int64_t r = Revision(*store, "st-1");
  write([&](StoreTx& tx) -> absl::Status {  // a running run: nothing compare reads
    MEDPROF_RETURN_IF_ERROR(tx.InsertKernels("run-1", {k}));
    MEDPROF_RETURN_IF_ERROR(tx.InsertSteps("run-1", {StepRow{.phase = 2, .step = 0, .wall_ns = 1500}}));
    MEDPROF_RETURN_IF_ERROR(tx.ExtendLease("run-1", 9000));
    JobRecord job = MakeJob("job-1", "st-1");
    job.state = JobState::kRunning;
    return tx.UpdateJob(job);
  });
  EXPECT_EQ(Revision(*store, "st-1"), r);
  run.state = RunState::kSucceeded;  // the run succeeds
  write([&](StoreTx& tx) { return tx.UpdateRunState(run); });
  EXPECT_GT(Revision(*store, "st-1"), r);
  for (const char* what : {"a kernel row", "a metric row", "an op row", "a finding", "run results"}) {
    r = Revision(*store, "st-1");
    write([&](StoreTx& tx) -> absl::Status {  // rows of a succeeded run, as an import writes them
      const std::string w = what;
      if (w == "a kernel row") return tx.InsertKernels("run-1", {k});
      if (w == "a metric row") return tx.InsertMetrics("run-1", {MetricRow{"run", "sm_cycles", 1, ""}});
      if (w == "an op row") return tx.InsertOps("run-1", {OpRow{"aten::add", "fwd", "elementwise", 1, 2, 2}});
      if (w == "a finding") return tx.InsertFindings("run-1", {FindingRow{.kernel = k.name, .rule = "r"}});
      return tx.UpdateRunResults(run);
    });
    EXPECT_GT(Revision(*store, "st-1"), r) << what;
  }
  r = Revision(*store, "st-1");
  RunRecord imported = MakeRun("run-2", "job-1", "st-1");
  imported.state = RunState::kSucceeded;
  write([&](StoreTx& tx) { return tx.InsertRun(imported); });  // a run stored as succeeded
  EXPECT_GT(Revision(*store, "st-1"), r);
  // No delete exists in the store yet; one written as plain SQL is seen all the same.
  r = Revision(*store, "st-1");
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(raw, "PRAGMA foreign_keys = ON; DELETE FROM runs WHERE run_id = 'run-1'", nullptr,
                         nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(raw);
  sqlite3_close(raw);
  EXPECT_GT(Revision(*store, "st-1"), r);
  EXPECT_EQ(Revision(*store, "st-2"), 0);  // another study's writes never move it
}

TEST(SqliteStore, DataSurvivesReopening) {
  TempDir dir;
  const std::string path = dir.File("keep.db");
  {
    auto store = OpenOrDie(path);
    ASSERT_THAT(store->Write([](StoreTx& tx) { return tx.InsertStudy(MakeStudy("st-9")); }), IsOk());
  }
  auto store = OpenOrDie(path);
  EXPECT_EQ(Count(*store, "studies"), 1);
}

}  // namespace
}  // namespace medprof::server
