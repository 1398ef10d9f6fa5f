// Hardening, round two (issue 22), with the real binaries on loopback: one server per port and
// per database, TLS checked before listening, mutual TLS from the CLI and the agent, read-only
// databases refused at start-up, tokens and names that cannot reach a terminal raw.
#include <sys/stat.h>

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
using ::testing::Not;

// medprof-server with `args`, expected to refuse to start: its exit code and output.
CommandResult ServerRefusal(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BinPath("medprof-server")};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, {}, std::chrono::seconds(30));
}

// Case 1: a second server on the same port, or on the same database, is refused.
TEST(HardeningTest, OneServerPerPortAndPerDatabase) {
  const std::string dir = MakeTempDir("one-server");
  auto first = ServerFixture::Start(dir + "/a.db");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(Cli((*first)->address(), {"studies"}).exit_code, 0);

  CommandResult same_port = ServerRefusal({"--db", dir + "/b.db", "--listen", (*first)->address(),
                                           "--metrics-listen", "off"});
  EXPECT_EQ(same_port.exit_code, 2) << same_port.err;
  EXPECT_THAT(same_port.err, HasSubstr(absl::StrCat("cannot listen on ", (*first)->address())));
  EXPECT_THAT(same_port.err, Not(HasSubstr("listening on")));

  CommandResult same_db = ServerRefusal({"--db", dir + "/a.db", "--listen", "127.0.0.1:0", "--metrics-listen", "off"});
  EXPECT_EQ(same_db.exit_code, 2) << same_db.err;
  EXPECT_THAT(same_db.err, HasSubstr(absl::StrCat("is in use by another medprof-server (PID ",
                                                  (*first)->process().pid(), ", lock file ")));
  EXPECT_THAT(same_db.err, Not(HasSubstr("listening on")));

  // The lock goes with its holder, even on SIGKILL: a restart on the same database works.
  (*first)->process().Signal(SIGKILL);
  (*first)->process().Wait(std::chrono::seconds(10));
  auto again = ServerFixture::Start(dir + "/a.db");
  ASSERT_TRUE(again.ok()) << again.status();
}

std::string TlsData(const std::string& name) {
  return std::string(std::getenv("MEDPROF_SOURCE_DIR")) + "/tests/unit/server/testdata/tls/" + name;
}

// Case 2: broken TLS material refuses the start, with the cause, before anything listens.
TEST(HardeningTest, BrokenTlsRefusesTheStart) {
  const std::string dir = MakeTempDir("bad-tls");
  struct Case {
    std::string cert, key, expected;
  };
  for (const Case& c : {Case{"server.crt", "client.key", "client.key: does not match the certificate of --tls-cert"},
                        Case{"server.key", "server.key", "server.key: holds no PEM certificate (is it the key?)"}}) {
    CommandResult r = ServerRefusal({"--db", dir + "/m.db", "--listen", "127.0.0.1:0", "--metrics-listen", "off",
                                     "--tls-cert", TlsData(c.cert), "--tls-key", TlsData(c.key)});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.expected));
    EXPECT_THAT(r.err, Not(HasSubstr("listening on")));
  }
}

// chattr +i: read-only even for root (the test runs as root in CI; mode bits would not do).
// Blocks writes through descriptors already open, too.
void SetImmutable(const std::string& path, bool on) {
  ASSERT_EQ(RunCommand({"/bin/sh", "-c", absl::StrCat("chattr ", on ? "+i '" : "-i '", path, "'")}).exit_code, 0)
      << "chattr on " << path;
}

std::vector<std::string> SubmitArgs(const std::string& name) {
  std::vector<std::string> args = {"submit", "--name", name, "--presets", "baseline"};
  for (const std::string& f : TinyModelFlags()) args.push_back(f);
  return args;
}

// Case 4: a read-only database refuses the start; a write that fails later reaches the client
// as UNAVAILABLE with the cause and no SQL (the statement goes to the server log).
TEST(HardeningTest, ReadOnlyDatabasesAndStoreErrors) {
  const std::string dir = MakeTempDir("read-only");
  const std::string db = dir + "/ro.db";
  {
    auto server = ServerFixture::Start(db);
    ASSERT_TRUE(server.ok()) << server.status();
  }
  SetImmutable(db, true);
  CommandResult r = ServerRefusal({"--db", db, "--listen", "127.0.0.1:0", "--metrics-listen", "off"});
  SetImmutable(db, false);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr(db + " is not writable (Operation not permitted)"));
  EXPECT_THAT(r.err, Not(HasSubstr("listening on")));

  auto server = ServerFixture::Start(db);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_EQ(Cli((*server)->address(), SubmitArgs("before")).exit_code, 0);
  SetImmutable(db + "-wal", true);
  CommandResult refused = Cli((*server)->address(), SubmitArgs("during"));
  SetImmutable(db + "-wal", false);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("(UNAVAILABLE): database: the server cannot write its database: disk I/O error"));
  EXPECT_THAT(refused.err, Not(HasSubstr("INSERT")));
  EXPECT_THAT(refused.err, Not(HasSubstr("sqlite3_")));
  EXPECT_TRUE((*server)->process().WaitForLine("sqlite: sqlite3_step(", std::chrono::seconds(5)).has_value())
      << "the statement goes to the server log";
}

// Cases 5 and 8 with the real binaries: a token with a control byte is refused (no abort), and
// a token typed on the command line is refused by the CLI and the agent without being echoed.
TEST(HardeningTest, TokensAreCheckedAndNeverEchoed) {
  const std::string secret = "mpt_0123456789ab_" + std::string(64, 'e');
  CommandResult cli = RunCommand({BinPath("medprof"), "--server", "127.0.0.1:1", "studies"},
                                 {{"MEDPROF_TOKEN", "mpt_x\x01"}});
  EXPECT_EQ(cli.exit_code, 1) << cli.err;
  EXPECT_THAT(cli.err, HasSubstr("MEDPROF_TOKEN: byte 6 is a control character"));
  for (const std::string& bin : {std::string("medprof"), std::string("medprof-agent")}) {
    CommandResult r = RunCommand({BinPath(bin), "--server", "127.0.0.1:1", "--token", secret, "studies"});
    EXPECT_NE(r.exit_code, 0) << bin;
    EXPECT_THAT(r.err, HasSubstr("--token: tokens are not taken on the command line")) << bin;
    EXPECT_THAT(r.err + r.out, Not(HasSubstr("eeeeeeee"))) << bin;
  }
}

// Case 6: a name with terminal escapes or a newline is refused at submission (exit 1), so
// `studies` never prints one raw.
TEST(HardeningTest, TerminalEscapesInNamesAreRefused) {
  const std::string dir = MakeTempDir("escapes");
  auto server = ServerFixture::Start(dir + "/m.db");
  ASSERT_TRUE(server.ok()) << server.status();
  for (const std::string& name : {std::string("\x1b[31mRED\x1b[0m\x07"), std::string("two\nlines")}) {
    CommandResult r = Cli((*server)->address(), SubmitArgs(name));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr("name: character "));
    EXPECT_THAT(r.err, Not(HasSubstr("\x1b"))) << "the refusal does not echo the escape";
  }
  CommandResult list = Cli((*server)->address(), {"studies"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, Not(HasSubstr("\x1b")));
  EXPECT_THAT(list.out, Not(HasSubstr("RED")));
}

// Case 3: a server that requires client certificates serves the CLI (flags or MEDPROF_TLS_*)
// and the agent when they present one, and refuses them when they do not.
TEST(HardeningTest, MutualTlsFromTheCliAndTheAgent) {
  const std::string dir = MakeTempDir("mtls");
  auto server = ServerFixture::Start(dir + "/m.db", {"--tls-cert", TlsData("server.crt"), "--tls-key",
                                                     TlsData("server.key"), "--tls-client-ca", TlsData("ca.crt")});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->address();
  auto cli = [&](std::vector<std::string> args, const std::map<std::string, std::string>& env) {
    std::vector<std::string> argv = {BinPath("medprof"), "--server", address, "--timeout-s", "10"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, env);
  };
  CommandResult without = cli({"--tls-ca", TlsData("ca.crt"), "studies"}, {});
  EXPECT_EQ(without.exit_code, 2) << "no client certificate: refused in the handshake\n" << without.err;

  CommandResult flags = cli({"--tls-ca", TlsData("ca.crt"), "--tls-cert", TlsData("client.crt"), "--tls-key",
                             TlsData("client.key"), "studies"}, {});
  EXPECT_EQ(flags.exit_code, 0) << flags.err;
  CommandResult env = cli({"studies"}, {{"MEDPROF_TLS_CA", TlsData("ca.crt")},
                                        {"MEDPROF_TLS_CERT", TlsData("client.crt")},
                                        {"MEDPROF_TLS_KEY", TlsData("client.key")}});
  EXPECT_EQ(env.exit_code, 0) << env.err;
  CommandResult mismatched = cli({"--tls-ca", TlsData("ca.crt"), "--tls-cert", TlsData("client.crt"), "--tls-key",
                                  TlsData("server.key"), "studies"}, {});
  EXPECT_EQ(mismatched.exit_code, 1) << mismatched.err;
  EXPECT_THAT(mismatched.err, HasSubstr("server.key: does not match the certificate of --tls-cert"));

  auto agent = StartAgent(address, dir + "/agent", "mtls-agent",
                          {"--tls-ca", TlsData("ca.crt"), "--tls-cert", TlsData("client.crt"), "--tls-key",
                           TlsData("client.key")});
  ASSERT_TRUE(agent.ok()) << agent.status();
  const bool listed = Eventually(
      [&] {
        CommandResult r = cli({"agents"}, {{"MEDPROF_TLS_CA", TlsData("ca.crt")},
                                           {"MEDPROF_TLS_CERT", TlsData("client.crt")},
                                           {"MEDPROF_TLS_KEY", TlsData("client.key")}});
        return r.exit_code == 0 && r.out.find("mtls-agent") != std::string::npos;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(300));
  EXPECT_TRUE(listed) << (*agent)->AllOutput();
}

// Item 10: option ranges and exit codes made consistent, with the real binaries.
TEST(HardeningTest, OptionRangesAndExitCodes) {
  const std::string dir = MakeTempDir("options");
  // /metrics off loopback only when asked for: it is plain HTTP without authentication.
  CommandResult metrics = ServerRefusal({"--db", dir + "/m.db", "--listen", "127.0.0.1:0", "--metrics-listen",
                                         "0.0.0.0:0"});
  EXPECT_EQ(metrics.exit_code, 1) << metrics.err;
  EXPECT_THAT(metrics.err, HasSubstr("--metrics-listen 0.0.0.0:0: /metrics is plain HTTP without authentication, "
                                     "so it listens off loopback only with --metrics-insecure"));
  auto insecure = ServerFixture::Start(dir + "/m.db", {"--metrics-listen", "0.0.0.0:0", "--metrics-insecure"});
  ASSERT_TRUE(insecure.ok()) << insecure.status();
  EXPECT_GE((*insecure)->process().CountLines("Prometheus metrics on http://0.0.0.0:"), 1);

  // --max-jobs 0 is outside 1..N (leaving the flag out means one job per device): exit 1.
  CommandResult agent = RunCommand({BinPath("medprof-agent"), "--server", (*insecure)->address(), "--work-dir",
                                    dir + "/agent", "--max-jobs", "0"});
  EXPECT_EQ(agent.exit_code, 1) << agent.err;
  EXPECT_THAT(agent.err, HasSubstr("--max-jobs: 0 is out of range (allowed 1..number of devices"));

  // A target selector the server refuses is a field error: exit 1, like the CLI's own checks.
  std::vector<std::string> submit = SubmitArgs("bad target");
  submit.insert(submit.end(), {"--target", "gpu="});
  CommandResult target = Cli((*insecure)->address(), submit);
  EXPECT_EQ(target.exit_code, 1) << target.err;
  EXPECT_THAT(target.err, HasSubstr("(INVALID_ARGUMENT): targets[0]"));

  // A token file others may read is used, with a warning naming the file and the fix.
  const std::string token_file = dir + "/shared.token";
  std::ofstream(token_file) << "mpt_0123456789ab_" << std::string(64, 'f') << "\n";
  ::chmod(token_file.c_str(), 0644);
  CommandResult warned = RunCommand({BinPath("medprof"), "--server", (*insecure)->address(), "studies"},
                                    {{"MEDPROF_TOKEN_FILE", token_file}});
  EXPECT_EQ(warned.exit_code, 0) << warned.err;
  EXPECT_THAT(warned.err, HasSubstr("warning: token file " + token_file + " is readable by every user (mode 644)"));
}

}  // namespace
}  // namespace medprof::itest
