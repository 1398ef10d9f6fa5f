// `medprof submit --wait` in a real pseudo-terminal: tmux runs the CLI in an 80-column window
// (60 rows, so that the end of the run stays on the screen) against a real server and agent,
// and the test reads the screen (tmux capture-pane, wrapped lines joined) every 100 ms while the
// study runs. On every screen the progress block's lines fit 80 columns, the header's columns
// stay in place, and there is no bar (80 columns leave no room for one); per job, states only
// move forward; at the end, the final block shows every job succeeded and the comparison table
// follows the jobs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/integration/harness.h"

namespace medprof::itest {
namespace {

using ::testing::HasSubstr;

// Columns of a screen line: UTF-8 code points ("\u2026" is one column, three bytes).
size_t Columns(const std::string& line) {
  size_t n = 0;
  for (unsigned char c : line) n += (c & 0xC0) != 0x80;
  return n;
}

int Rank(const std::string& state) {
  if (state == "queued") return 0;
  if (state == "running" || state == "requeued") return 1;
  return 2;  // succeeded, failed, cancelled
}

class Tmux {
 public:
  Tmux() : socket_(absl::StrCat("medprof-pty-", ::getpid())) {}
  ~Tmux() { Run({"kill-server"}); }
  CommandResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/env", "tmux", "-L", socket_, "-f", "/dev/null"});
    return RunCommand(args, {}, std::chrono::seconds(10));
  }
  std::vector<std::string> Screen() {
    CommandResult r = Run({"capture-pane", "-p", "-J", "-t", "pty"});
    return absl::StrSplit(r.out, '\n');
  }

 private:
  std::string socket_;
};

TEST(ProgressPtyTest, SubmitWaitOnAnEightyColumnTerminal) {
  if (RunCommand({"/usr/bin/env", "tmux", "-V"}, {}, std::chrono::seconds(5)).exit_code != 0) {
    GTEST_FAIL() << "tmux is not installed (scripts/install-deps.sh installs it)";
  }
  const std::string dir = MakeTempDir("pty");
  auto server = ServerFixture::Start(dir + "/medprof.db");
  ASSERT_TRUE(server.ok()) << server.status();
  auto agent = StartAgent((*server)->address(), dir + "/agent", "agent-pty");
  ASSERT_TRUE(agent.ok()) << agent.status();

  std::string cmd = absl::StrCat("'", BinPath("medprof"), "' --server ", (*server)->address(),
                                 " submit --presets baseline,opt1 --repeats 2 --steps 5 --warmup 1 --grad-accum 1 "
                                 "--wait");
  for (const std::string& f : TinyModelFlags()) absl::StrAppend(&cmd, " ", f);
  absl::StrAppend(&cmd, "; echo EXIT=$?; sleep 600");
  Tmux tmux;
  ASSERT_EQ(tmux.Run({"new-session", "-d", "-s", "pty", "-x", "80", "-y", "60", cmd}).exit_code, 0);

  std::map<std::string, std::string> last_state;  // job row key -> state
  std::vector<std::string> final_screen;
  size_t header_state_col = std::string::npos;
  int frames = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<std::string> screen = tmux.Screen();
    ++frames;
    bool in_block = false;
    for (std::string line : screen) {
      while (!line.empty() && line.back() == ' ') line.pop_back();  // -J keeps trailing blanks
      if (line.rfind("PRESET   TARGET", 0) == 0) {
        if (header_state_col == std::string::npos) header_state_col = line.find("STATE");
        EXPECT_EQ(line.find("STATE"), header_state_col) << "the columns moved: " << line;
        in_block = true;
        continue;
      }
      if (!in_block) continue;
      if (line.empty() || line.rfind("study ", 0) == 0 || line.rfind("JOB", 0) == 0) {
        in_block = false;
        continue;
      }
      ASSERT_LE(Columns(line), 80u) << line;
      EXPECT_EQ(line.find("[#"), std::string::npos) << "a bar at 80 columns: " << line;
      // "baseline device=cpu r1 running ..." -> key "baseline device=cpu r1", the state after it.
      const std::string key = line.substr(0, header_state_col);
      const std::string rest = line.substr(header_state_col);
      const std::string state = rest.substr(0, rest.find(' '));
      auto [it, fresh] = last_state.try_emplace(key, state);
      if (!fresh) {
        EXPECT_GE(Rank(state), Rank(it->second)) << key << ": " << it->second << " -> " << state;
        it->second = state;
      }
    }
    final_screen = screen;
    bool done = false;
    for (const std::string& line : screen) done = done || line.rfind("EXIT=", 0) == 0;
    if (done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::string text;
  for (const std::string& line : final_screen) absl::StrAppend(&text, line, "\n");
  EXPECT_THAT(text, HasSubstr("EXIT=0")) << text;
  EXPECT_THAT(text, HasSubstr("SPEEDUP (95% CI)")) << text;  // the comparison ends the wait
  EXPECT_EQ(last_state.size(), 4u) << text;
  for (const auto& [key, state] : last_state) EXPECT_EQ(state, "succeeded") << key;
  EXPECT_GT(frames, 3);
}

}  // namespace
}  // namespace medprof::itest
