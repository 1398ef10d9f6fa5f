#include "agent/agent/spool.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

#include "common/file_util.h"
#include "agent/agent/work_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/unit/agent/test_files.h"

namespace medprof::agent {
namespace {

using ::medprof::agent::testing::FreshDir;
using ::medprof::agent::testing::TempRoot;
using ::medprof::agent::testing::WriteTemp;

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

v1::Assignment MakeAssignment(const std::string& run_id) {
  v1::Assignment a;
  a.set_run_id(run_id);
  a.set_job_id("job-1");
  a.set_study_id("study-1");
  a.set_attempt(2);
  a.mutable_config()->set_preset("opt1");
  a.mutable_config()->set_volume(16);
  a.set_device_index(1);
  a.set_timeout_s(60);
  return a;
}

v1::WorkerMessage Step(int i) {
  v1::WorkerMessage m;
  m.mutable_step()->set_step(i);
  m.mutable_step()->set_wall_ns(1000 + i);
  return m;
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

TEST(SpoolTest, CreateWritesTheAssignmentAndTheJob) {
  const std::string dir = FreshDir("spool-create") + "/run-1";
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunSpool> spool,
                               RunSpool::Create(dir, MakeAssignment("run-1")));
  EXPECT_EQ(spool->run_id(), "run-1");
  EXPECT_EQ(spool->last_seq(), 0u);
  EXPECT_EQ(spool->acked_seq(), 0u);
  EXPECT_FALSE(spool->outcome().has_value());
  ASSERT_TRUE(spool->assignment().has_value());
  EXPECT_EQ(spool->assignment()->attempt(), 2);
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::string job_bytes, ReadFile(spool->job_path()));
  v1::WorkloadConfig job;
  ASSERT_TRUE(job.ParseFromString(job_bytes));
  EXPECT_EQ(job.preset(), "opt1");
  EXPECT_EQ(job.volume(), 16);
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::string a_bytes, ReadFile(dir + "/assignment.pb"));
  v1::Assignment a;
  ASSERT_TRUE(a.ParseFromString(a_bytes));
  EXPECT_EQ(a.device_index(), 1);
  EXPECT_THAT(RunSpool::Create(dir, MakeAssignment("run-1")),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already exists")));
  EXPECT_THAT(RunSpool::Create(FreshDir("spool-mismatch") + "/run-2", MakeAssignment("run-1")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not match run_id 'run-1'")));
  EXPECT_THAT(RunSpool::Create(FreshDir("spool-bad") + "/..", MakeAssignment("..")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("run_id '..' is not allowed")));
}

TEST(SpoolTest, AppendedChunksAreNumberedAndReadBack) {
  const std::string dir = FreshDir("spool-append") + "/r";
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunSpool> spool, RunSpool::Create(dir, MakeAssignment("r")));
  for (int i = 0; i < 10; ++i) ASSERT_THAT(spool->Append(Step(i)), IsOk());
  EXPECT_EQ(spool->last_seq(), 10u);
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::vector<v1::ResultChunk> all, spool->ReadChunks(1, 100, 1 << 20));
  ASSERT_EQ(all.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(all[i].seq(), static_cast<uint64_t>(i + 1));
    EXPECT_EQ(all[i].run_id(), "r");
    EXPECT_EQ(all[i].agent_id(), "");
    EXPECT_EQ(all[i].message().step().step(), i);
  }
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::vector<v1::ResultChunk> some, spool->ReadChunks(4, 3, 1 << 20));
  ASSERT_EQ(some.size(), 3u);
  EXPECT_EQ(some.front().seq(), 4u);
  EXPECT_EQ(some.back().seq(), 6u);
  // A byte budget smaller than one chunk still yields that chunk, and only it.
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::vector<v1::ResultChunk> one, spool->ReadChunks(9, 100, 1));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].seq(), 9u);
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::vector<v1::ResultChunk> none, spool->ReadChunks(11, 100, 1 << 20));
  EXPECT_TRUE(none.empty());
}

TEST(SpoolTest, AckAndOutcomeSurviveARestart) {
  const std::string dir = FreshDir("spool-ack") + "/r";
  {
    MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunSpool> spool, RunSpool::Create(dir, MakeAssignment("r")));
    for (int i = 0; i < 5; ++i) ASSERT_THAT(spool->Append(Step(i)), IsOk());
    ASSERT_THAT(spool->SetAcked(3), IsOk());
    EXPECT_THAT(spool->SetAcked(6),
                StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("exceeds the 5 chunks")));
    v1::FinishRunRequest outcome;
    outcome.set_run_id("r");
    outcome.set_state(v1::RUN_FAILED);
    outcome.set_error("oom: CUDA out of memory");
    outcome.set_last_seq(5);
    outcome.set_exit_code(1);
    ASSERT_THAT(spool->WriteOutcome(outcome), IsOk());
  }
  EXPECT_EQ(*ReadFile(dir + "/acked"), "3\n");
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunSpool> again, RunSpool::Open(dir));
  EXPECT_EQ(again->last_seq(), 5u);
  EXPECT_EQ(again->acked_seq(), 3u);
  EXPECT_EQ(again->repair_note(), "");
  ASSERT_TRUE(again->outcome().has_value());
  EXPECT_EQ(again->outcome()->state(), v1::RUN_FAILED);
  EXPECT_EQ(again->outcome()->error(), "oom: CUDA out of memory");
  // Unacknowledged chunks are the ones after the ack, as written before the restart.
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::vector<v1::ResultChunk> pending,
                               again->ReadChunks(again->acked_seq() + 1, 100, 1 << 20));
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].seq(), 4u);
  EXPECT_EQ(pending[0].message().step().step(), 3);
  EXPECT_EQ(pending[1].seq(), 5u);
  // Appends after the restart continue the sequence.
  ASSERT_THAT(again->Append(Step(5)), IsOk());
  EXPECT_EQ(again->last_seq(), 6u);
  ASSERT_THAT(again->Remove(), IsOk());
  EXPECT_FALSE(PathExists(dir));
}

TEST(SpoolTest, ATruncatedTailIsDroppedOnResume) {
  const std::string dir = FreshDir("spool-trunc") + "/r";
  uint64_t size_after_three = 0;
  {
    MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunSpool> spool, RunSpool::Create(dir, MakeAssignment("r")));
    for (int i = 0; i < 3; ++i) ASSERT_THAT(spool->Append(Step(i)), IsOk());
    size_after_three = FileSize(dir + "/results.log");
    ASSERT_THAT(spool->Append(Step(3)), IsOk());
    ASSERT_THAT(spool->SetAcked(2), IsOk());
  }
  // The agent died while writing the fourth record: only part of it reached the disk.
  const uint64_t full = FileSize(dir + "/results.log");
  ASSERT_EQ(::truncate((dir + "/results.log").c_str(), static_cast<off_t>(full - 3)), 0);
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunSpool> resumed, RunSpool::Open(dir));
  EXPECT_EQ(resumed->last_seq(), 3u);
  EXPECT_EQ(resumed->acked_seq(), 2u);
  EXPECT_THAT(resumed->repair_note(), HasSubstr("a record cut short"));
  EXPECT_THAT(resumed->repair_note(), HasSubstr("after 3 complete records"));
  EXPECT_EQ(FileSize(dir + "/results.log"), size_after_three);
  // The sequence goes on from the last complete record.
  ASSERT_THAT(resumed->Append(Step(30)), IsOk());
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::vector<v1::ResultChunk> chunks, resumed->ReadChunks(1, 100, 1 << 20));
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[3].seq(), 4u);
  EXPECT_EQ(chunks[3].message().step().step(), 30);
}

TEST(SpoolTest, GarbageAfterTheRecordsIsDroppedOnResume) {
  const std::string dir = FreshDir("spool-garbage") + "/r";
  {
    MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunSpool> spool, RunSpool::Create(dir, MakeAssignment("r")));
    for (int i = 0; i < 2; ++i) ASSERT_THAT(spool->Append(Step(i)), IsOk());
  }
  {
    std::ofstream f(dir + "/results.log", std::ios::app | std::ios::binary);
    f << '\x05' << "\xff\xff\xff\xff\xff";  // a 5-byte "record" that is not a ResultChunk
  }
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunSpool> resumed, RunSpool::Open(dir));
  EXPECT_EQ(resumed->last_seq(), 2u);
  EXPECT_THAT(resumed->repair_note(), HasSubstr("a record that does not parse"));
}

TEST(SpoolTest, AnAckBeyondTheRecordsIsClampedOnResume) {
  const std::string dir = FreshDir("spool-clamp") + "/r";
  {
    MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunSpool> spool, RunSpool::Create(dir, MakeAssignment("r")));
    ASSERT_THAT(spool->Append(Step(0)), IsOk());
  }
  ASSERT_THAT(WriteFileDurably(dir + "/acked", "9\n"), IsOk());
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunSpool> resumed, RunSpool::Open(dir));
  EXPECT_EQ(resumed->acked_seq(), 1u);
}

TEST(SpoolTest, AWriteErrorAppendsNothingAndNamesTheCause) {
  const std::string dir = FreshDir("spool-efbig") + "/r";
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunSpool> spool, RunSpool::Create(dir, MakeAssignment("r")));
  ASSERT_THAT(spool->Append(Step(0)), IsOk());
  const uint64_t before = FileSize(dir + "/results.log");
  // A file size limit makes the next write fail the way a full disk does (EFBIG, no SIGXFSZ).
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto previous = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = before + 4;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  v1::WorkerMessage big;
  big.mutable_progress()->set_message(std::string(100, 'x'));
  const absl::Status s = spool->Append(big);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  std::signal(SIGXFSZ, previous);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal,
                          HasSubstr("appending result 2 to " + dir + "/results.log: File too large")));
  EXPECT_EQ(spool->last_seq(), 1u);
  EXPECT_EQ(FileSize(dir + "/results.log"), before) << "the partial record must be cut off";
  // Once space is back, appending goes on with the same seq.
  ASSERT_THAT(spool->Append(Step(1)), IsOk());
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RunSpool> reopened, RunSpool::Open(dir));
  EXPECT_EQ(reopened->last_seq(), 2u);
  EXPECT_EQ(reopened->repair_note(), "");
}

TEST(SpoolTest, RunDirsAreListed) {
  const std::string root = FreshDir("spool-list");
  for (const char* id : {"b", "a", "c"})
    ASSERT_THAT(RunSpool::Create(root + "/" + id, MakeAssignment(id)), IsOk());
  std::ofstream(root + "/stray-file") << "x";
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::vector<std::string> dirs, ListRunDirs(root));
  EXPECT_THAT(dirs, ::testing::ElementsAre(root + "/a", root + "/b", root + "/c"));
}

TEST(WorkDirTest, LockAndStableName) {
  const std::string path = FreshDir("spool-workdir");
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkDir> wd, WorkDir::Open(path));
  EXPECT_TRUE(PathExists(path + "/spool"));
  EXPECT_TRUE(PathExists(path + "/cache"));  // the workers' per-node cache (roofline ceilings)
  EXPECT_EQ(wd->cache_dir(), wd->path() + "/cache");
  // A second agent on the same work dir is refused, naming the holder.
  EXPECT_THAT(WorkDir::Open(path),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(absl::StrCat("in use by another medprof-agent (pid ", ::getpid()))));
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::string name, wd->AgentName("", "gpu-node-7.cluster.example.org"));
  EXPECT_THAT(name, ::testing::MatchesRegex("gpu-node-7-[0-9a-f]{8}"));
  EXPECT_EQ(*ReadFile(path + "/agent-name"), name + "\n");
  EXPECT_EQ(*wd->AgentName("", "another-host"), name) << "the stored name is stable";
  EXPECT_EQ(*wd->AgentName("explicit", "h"), "explicit");
  EXPECT_THAT(wd->AgentName("bad name", "h"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad name")));
  wd.reset();
  EXPECT_THAT(WorkDir::Open(path), IsOk()) << "the lock is released with the object";
}

}  // namespace
}  // namespace medprof::agent
