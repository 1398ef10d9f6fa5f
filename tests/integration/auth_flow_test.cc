// Tokens end to end with the real binaries: `medprof-server token create|list|revoke` on the
// database, a server with --auth tokens, an agent with --token-file, the CLI with
// MEDPROF_TOKEN_FILE; a study runs; the CLI without a token, and with a revoked one, is refused.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace medprof::itest {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

CommandResult CliWith(const std::string& address, const std::map<std::string, std::string>& env,
                      const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BinPath("medprof"), "--server", address};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, env);
}

TEST(AuthFlowTest, TokensFromFilesRunAStudyAndARevokedTokenIsRefused) {
  const std::string dir = MakeTempDir("auth");
  const std::string db = dir + "/medprof.db";
  const std::string submit_id = CreateToken(db, {"--role", "submit", "--project", "lab-a"}, dir + "/submit.token");
  CreateToken(db, {"--role", "agent", "--project", "lab-a", "--agent", "agent-auth"}, dir + "/agent.token");
  {
    CommandResult bad = RunCommand({BinPath("medprof-server"), "token", "create", "--db", db, "--role", "read",
                                    "--project", "*"});
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_THAT(bad.err, HasSubstr("project: '*' (every project) is for admin tokens only"));
  }
  CommandResult list = RunCommand({BinPath("medprof-server"), "token", "list", "--db", db});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr(submit_id));
  EXPECT_THAT(list.out, HasSubstr("agent-auth"));
  EXPECT_EQ(list.out.find("mpt_"), std::string::npos) << "list never shows secrets";

  auto server = ServerFixture::Start(db, {"--auth", "tokens"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_GE((*server)->process().CountLines("bearer tokens required"), 1);
  auto agent = StartAgent((*server)->address(), dir + "/agent", "agent-auth", {"--token-file", dir + "/agent.token"});
  ASSERT_TRUE(agent.ok());

  std::vector<std::string> submit = {"submit", "--presets", "baseline", "--steps", "1", "--warmup", "0",
                                     "--format", "json"};
  for (const auto& f : TinyModelFlags()) submit.push_back(f);
  CommandResult none = CliWith((*server)->address(), {}, submit);
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("no bearer token"));

  const std::map<std::string, std::string> env = {{"MEDPROF_TOKEN_FILE", dir + "/submit.token"}};
  CommandResult submitted = CliWith((*server)->address(), env, submit);
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string study = nlohmann::json::parse(submitted.out).at("study_id").get<std::string>();
  CommandResult watched = CliWith((*server)->address(), env, {"watch", study});
  EXPECT_EQ(watched.exit_code, 0) << watched.err << (*agent)->AllOutput();
  auto probe = DbProbe::Open(db);
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ((*probe)->Int(absl::StrCat("SELECT COUNT(*) FROM jobs WHERE study_id = '", study,
                                       "' AND state = 'succeeded'"))
                .value_or(-1),
            1);
  EXPECT_EQ((*probe)->Int(absl::StrCat("SELECT COUNT(*) FROM studies WHERE study_id = '", study,
                                       "' AND project = 'lab-a'"))
                .value_or(-1),
            1);

  CommandResult revoked = RunCommand({BinPath("medprof-server"), "token", "revoke", "--db", db, submit_id});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  // A running server trusts a verified token for 5 s.
  std::this_thread::sleep_for(std::chrono::milliseconds(5200));
  CommandResult after = CliWith((*server)->address(), env, {"studies"});
  EXPECT_EQ(after.exit_code, 2);
  EXPECT_THAT(after.err, HasSubstr("was revoked"));
}

}  // namespace
}  // namespace medprof::itest
