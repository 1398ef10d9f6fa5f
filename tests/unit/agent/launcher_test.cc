// The real-process WorkerLauncher, driven with /bin/sh scripts instead of medprof-worker.
#include "agent/agent/launcher.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include "common/file_util.h"
#include "common/result_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/unit/agent/test_files.h"

namespace medprof::agent {
namespace {

using ::medprof::agent::testing::FreshDir;
using ::medprof::agent::testing::TempRoot;
using ::medprof::agent::testing::WriteTemp;

using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

std::string TestDir() { return FreshDir("launcher"); }

std::string WriteScript(const std::string& dir, const std::string& body) {
  const std::string path = dir + "/worker.sh";
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

LaunchSpec Spec(const std::string& dir, const std::string& script) {
  LaunchSpec spec;
  spec.executable = script;
  spec.argv = {script, "--job", dir + "/job.pb", "--result-fd", "3"};
  spec.working_dir = dir;
  spec.stdout_path = dir + "/worker.stdout";
  spec.stderr_path = dir + "/worker.stderr";
  return spec;
}

WorkerExit WaitExit(WorkerProcess& p, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto e = p.TryWait(); e.has_value()) return *e;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "process did not exit";
  return {};
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool Alive(pid_t pid) { return ::kill(pid, 0) == 0; }

TEST(LauncherTest, RecordsArriveOnFd3AndTheExitCodeIsReported) {
  const std::string dir = TestDir();
  v1::WorkerMessage a;
  a.mutable_progress()->set_stage("setup");
  v1::WorkerMessage b;
  b.mutable_step()->set_step(4);
  const std::string records = EncodeDelimited(a) + EncodeDelimited(b);
  std::ofstream(dir + "/records.bin", std::ios::binary) << records;
  const std::string script =
      WriteScript(dir,
                  "cat \"$RECORDS\" >&3\n"
                  "echo \"args=$*\" >&2\n"
                  "echo \"cwd=$(pwd) cvd=$CUDA_VISIBLE_DEVICES idx=$MEDPROF_DEVICE_INDEX\" >&2\n"
                  "echo to-stdout\n"
                  "read line; echo \"stdin=[$line]\" >&2\n"
                  "exit 3\n");
  LaunchSpec spec = Spec(dir, script);
  spec.env = {
      {"RECORDS", dir + "/records.bin"}, {"CUDA_VISIBLE_DEVICES", "2"}, {"MEDPROF_DEVICE_INDEX", "1"}};
  std::unique_ptr<WorkerLauncher> launcher = MakeProcessLauncher();
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerProcess> p, launcher->Launch(spec));
  EXPECT_GT(p->pid(), 0);
  EXPECT_EQ(ReadAll(p->result_fd()), records);
  const WorkerExit e = WaitExit(*p);
  EXPECT_FALSE(e.signaled);
  EXPECT_EQ(e.code, 3);
  const std::string err = *ReadFile(dir + "/worker.stderr");
  EXPECT_THAT(err, HasSubstr("args=--job " + dir + "/job.pb --result-fd 3\n"));
  EXPECT_THAT(err, HasSubstr("cwd=" + dir + " cvd=2 idx=1\n"));
  EXPECT_THAT(err, HasSubstr("stdin=[]"));
  EXPECT_EQ(*ReadFile(dir + "/worker.stdout"), "to-stdout\n");
}

TEST(LauncherTest, ASignalDeathIsReported) {
  const std::string dir = TestDir();
  const std::string script = WriteScript(dir, "kill -SEGV $$\nsleep 5\n");
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerProcess> p,
                               MakeProcessLauncher()->Launch(Spec(dir, script)));
  const WorkerExit e = WaitExit(*p);
  EXPECT_TRUE(e.signaled);
  EXPECT_EQ(e.signal, SIGSEGV);
  EXPECT_EQ(e.ReportedCode(), -SIGSEGV);
}

TEST(LauncherTest, AMissingExecutableIsALaunchError) {
  const std::string dir = TestDir();
  EXPECT_THAT(MakeProcessLauncher()->Launch(Spec(dir, dir + "/no-such-worker")),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("starting worker " + dir + "/no-such-worker: No such file or directory")));
  const std::string not_exec = dir + "/not-executable";
  std::ofstream(not_exec) << "#!/bin/sh\n";
  EXPECT_THAT(MakeProcessLauncher()->Launch(Spec(dir, not_exec)),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("Permission denied")));
}

TEST(LauncherTest, SignalsReachTheWholeProcessGroup) {
  const std::string dir = TestDir();
  // The "worker" starts a child of its own and waits; SIGTERM to the group ends both.
  const std::string script = WriteScript(dir, "sleep 60 &\necho $! > child.pid\nwait\n");
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerProcess> p,
                               MakeProcessLauncher()->Launch(Spec(dir, script)));
  pid_t child = 0;
  for (int i = 0; i < 500 && child == 0; ++i) {
    if (auto text = ReadFile(dir + "/child.pid"); text.ok() && !text->empty()) child = std::stoi(*text);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(child, 0);
  EXPECT_EQ(::getpgid(child), p->pid()) << "the worker leads its own process group";
  EXPECT_TRUE(p->Signal(SIGTERM).ok());
  const WorkerExit e = WaitExit(*p);
  EXPECT_TRUE(e.signaled);
  EXPECT_EQ(e.signal, SIGTERM);
  for (int i = 0; i < 500 && Alive(child); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(Alive(child)) << "the worker's child outlived SIGTERM to the group";
}

TEST(LauncherTest, TheWorkerDiesWhenTheThreadThatStartedItEnds) {
  // PR_SET_PDEATHSIG(SIGKILL) fires when the launching thread exits, as when the agent dies.
  const std::string dir = TestDir();
  const std::string script = WriteScript(dir, "trap '' TERM\nexec sleep 60\n");
  std::unique_ptr<WorkerProcess> p;
  std::thread([&] {
    auto launched = MakeProcessLauncher()->Launch(Spec(dir, script));
    ASSERT_TRUE(launched.ok()) << launched.status();
    p = *std::move(launched);
  }).join();
  ASSERT_NE(p, nullptr);
  const WorkerExit e = WaitExit(*p);
  EXPECT_TRUE(e.signaled);
  EXPECT_EQ(e.signal, SIGKILL);
}

TEST(LauncherTest, AgentSignalMaskIsNotInherited) {
  // The agent blocks SIGTERM in every thread (for sigwait); the worker must still get it.
  const std::string dir = TestDir();
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &old), 0);
  const std::string script = WriteScript(dir, "exec sleep 60\n");
  auto launched = MakeProcessLauncher()->Launch(Spec(dir, script));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(launched.ok()) << launched.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE((*launched)->Signal(SIGTERM).ok());
  const WorkerExit e = WaitExit(**launched);
  EXPECT_TRUE(e.signaled);
  EXPECT_EQ(e.signal, SIGTERM);
}

TEST(LauncherTest, DestroyingALiveProcessKillsAndReapsIt) {
  const std::string dir = TestDir();
  const std::string script = WriteScript(dir, "trap '' TERM\nexec sleep 60\n");
  pid_t pid = 0;
  {
    MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerProcess> p,
                                 MakeProcessLauncher()->Launch(Spec(dir, script)));
    pid = p->pid();
    EXPECT_FALSE(p->TryWait().has_value());
  }
  EXPECT_FALSE(Alive(pid));
}

}  // namespace
}  // namespace medprof::agent
