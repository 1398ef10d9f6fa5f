#include "agent/agent/options.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <map>

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
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// Parses a command line the way main() does; throws CLI::ParseError on CLI11-level errors.
AgentOptions Parse(std::vector<std::string> args) {
  CLI::App app;
  AgentOptions o;
  AddFlags(&app, &o);
  std::reverse(args.begin(), args.end());  // CLI11 takes the vector reversed
  app.parse(args);
  return o;
}

TEST(OptionsTest, ParsesEveryFlag) {
  AgentOptions o = Parse({"--server",
                          "127.0.0.1:50051",
                          "--work-dir",
                          "/tmp/w",
                          "--name",
                          "node-1",
                          "--worker",
                          "/opt/w",
                          "--label",
                          "rack=a",
                          "--label",
                          "row=3",
                          "--site",
                          "expanse",
                          "--max-jobs",
                          "2",
                          "--drain-timeout-s",
                          "30",
                          "--log-level",
                          "debug"});
  EXPECT_EQ(o.server, "127.0.0.1:50051");
  EXPECT_EQ(o.work_dir, "/tmp/w");
  EXPECT_EQ(o.name, "node-1");
  EXPECT_EQ(o.worker_path, "/opt/w");
  EXPECT_THAT(o.labels, ElementsAre("rack=a", "row=3"));
  EXPECT_EQ(o.site, "expanse");
  EXPECT_EQ(o.max_jobs, 2);
  EXPECT_EQ(o.drain_timeout_s, 30);
  EXPECT_EQ(o.log_level, "debug");
  EXPECT_THAT(ValidateOptions(&o, FakeEnv({})), IsOk());
}

TEST(OptionsTest, DefaultsComeFromTheEnvironment) {
  AgentOptions o = Parse({"--work-dir", "/tmp/w"});
  EXPECT_EQ(o.drain_timeout_s, 90);
  EXPECT_EQ(o.max_jobs, 0);
  ASSERT_THAT(
      ValidateOptions(&o, FakeEnv({{"MEDPROF_SERVER", "localhost:7000"}, {"MEDPROF_SITE", "stampede3"}})),
      IsOk());
  EXPECT_EQ(o.server, "localhost:7000");
  EXPECT_EQ(o.site, "stampede3");
}

TEST(OptionsTest, FlagsWinOverTheEnvironment) {
  AgentOptions o = Parse({"--work-dir", "/tmp/w", "--server", "127.0.0.1:1", "--site", "a"});
  ASSERT_THAT(ValidateOptions(&o, FakeEnv({{"MEDPROF_SERVER", "localhost:7000"}, {"MEDPROF_SITE", "b"}})),
              IsOk());
  EXPECT_EQ(o.server, "127.0.0.1:1");
  EXPECT_EQ(o.site, "a");
}

TEST(OptionsTest, MissingRequiredFlagsAreNamed) {
  AgentOptions no_server = Parse({"--work-dir", "/tmp/w"});
  EXPECT_THAT(ValidateOptions(&no_server, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--server: required")));
  AgentOptions no_dir = Parse({"--server", "127.0.0.1:1"});
  EXPECT_THAT(ValidateOptions(&no_dir, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--work-dir: required")));
}

TEST(OptionsTest, PlainTextIsRefusedOffLoopback) {
  AgentOptions o = Parse({"--work-dir", "/tmp/w", "--server", "medprof.example.org:443"});
  EXPECT_THAT(ValidateOptions(&o, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--tls-ca: required for the non-loopback server medprof.example.org:443")));
  for (const char* loopback : {"127.0.0.1:1", "127.9.8.7:1", "localhost:1", "[::1]:50051"}) {
    AgentOptions ok = Parse({"--work-dir", "/tmp/w", "--server", loopback});
    EXPECT_THAT(ValidateOptions(&ok, FakeEnv({})), IsOk()) << loopback;
  }
  AgentOptions v6 = Parse({"--work-dir", "/tmp/w", "--server", "[2001:db8::1]:443"});
  EXPECT_THAT(ValidateOptions(&v6, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls-ca")));
}

TEST(OptionsTest, TlsCaMustBeAReadablePemFile) {
  AgentOptions missing =
      Parse({"--work-dir", "/tmp/w", "--server", "m.example.org:443", "--tls-ca", "/nonexistent/ca.pem"});
  EXPECT_THAT(
      ValidateOptions(&missing, FakeEnv({})),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls-ca: opening /nonexistent/ca.pem")));
  const std::string junk = WriteTemp("junk.pem", "hello\n");
  AgentOptions not_pem = Parse({"--work-dir", "/tmp/w", "--server", "m.example.org:443", "--tls-ca", junk});
  EXPECT_THAT(ValidateOptions(&not_pem, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds no PEM certificate")));
  const std::string garbled =
      WriteTemp("ca.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
  AgentOptions bad = Parse({"--work-dir", "/tmp/w", "--server", "m.example.org:443", "--tls-ca", garbled});
  EXPECT_THAT(ValidateOptions(&bad, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls-ca " + garbled + ": holds no PEM certificate")));
  const std::string pem = std::string(MEDPROF_AGENT_TESTDATA) + "/tls/ca.crt";
  AgentOptions good = Parse({"--work-dir", "/tmp/w", "--server", "m.example.org:443", "--tls-ca", pem});
  EXPECT_THAT(ValidateOptions(&good, FakeEnv({})), IsOk());
}

TEST(OptionsTest, ClientCertificatesComeAsAPairWithTls) {
  const std::string ca = std::string(MEDPROF_AGENT_TESTDATA) + "/tls/ca.crt";
  const std::string cert = std::string(MEDPROF_AGENT_TESTDATA) + "/tls/client.crt";
  const std::string key = std::string(MEDPROF_AGENT_TESTDATA) + "/tls/client.key";
  AgentOptions only_cert =
      Parse({"--work-dir", "/w", "--server", "m.example.org:443", "--tls-ca", ca, "--tls-cert", cert});
  EXPECT_THAT(ValidateOptions(&only_cert, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls-cert and --tls-key: give both")));
  AgentOptions no_ca =
      Parse({"--work-dir", "/w", "--server", "127.0.0.1:1", "--tls-cert", cert, "--tls-key", key});
  EXPECT_THAT(ValidateOptions(&no_ca, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pass --tls-ca as well")));
  AgentOptions swapped = Parse({"--work-dir", "/w", "--server", "m.example.org:443", "--tls-ca", ca,
                                "--tls-cert", cert, "--tls-key", cert});
  EXPECT_THAT(ValidateOptions(&swapped, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--tls-key: " + cert + " holds no PEM private key")));
  // A key of another certificate: refused before the agent dials (it would fail every handshake).
  AgentOptions mismatched = Parse({"--work-dir", "/w", "--server", "m.example.org:443", "--tls-ca", ca,
                                   "--tls-cert", cert, "--tls-key", std::string(MEDPROF_AGENT_TESTDATA) + "/tls/server.key"});
  EXPECT_THAT(ValidateOptions(&mismatched, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("server.key: does not match the certificate")));
  AgentOptions good = Parse({"--work-dir", "/w", "--server", "m.example.org:443", "--tls-ca", ca,
                             "--tls-cert", cert, "--tls-key", key});
  EXPECT_THAT(ValidateOptions(&good, FakeEnv({})), IsOk());
}

TEST(OptionsTest, ServerAddressesAreParsed) {
  auto a = ParseServerAddress("10.0.0.5:8443");
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->host, "10.0.0.5");
  EXPECT_EQ(a->port, 8443);
  EXPECT_FALSE(a->loopback);
  EXPECT_EQ(a->Target(), "10.0.0.5:8443");
  auto v6 = ParseServerAddress("[::1]:50051");
  ASSERT_THAT(v6, IsOk());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_TRUE(v6->loopback);
  EXPECT_EQ(v6->Target(), "[::1]:50051");
  EXPECT_THAT(ParseServerAddress("host"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected HOST:PORT")));
  EXPECT_THAT(
      ParseServerAddress("host:0"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("port '0' is out of range (allowed 1..65535)")));
  EXPECT_THAT(ParseServerAddress("host:70000"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1..65535")));
  EXPECT_THAT(ParseServerAddress(":80"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has no host")));
  EXPECT_THAT(ParseServerAddress("a b:80"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("contains ' '")));
  EXPECT_THAT(ParseServerAddress("::1:80"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("IPv6 as [::1]")));
}

TEST(OptionsTest, LoopbackHosts) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.255.0.3"));
  EXPECT_TRUE(IsLoopbackHost("LOCALHOST"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("::ffff:127.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("128.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("localhost.example.org"));
  EXPECT_FALSE(IsLoopbackHost("::2"));
}

TEST(OptionsTest, LabelsAreCheckedAndLaterOnesWin) {
  auto labels = ParseLabels({"rack=a", "empty=", "rack=b", "img=docker://x/y:1.0"});
  ASSERT_THAT(labels, IsOk());
  EXPECT_THAT(*labels, ElementsAre(Pair("empty", ""), Pair("img", "docker://x/y:1.0"), Pair("rack", "b")));
  EXPECT_THAT(ParseLabels({"novalue"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'novalue' is not key=value")));
  EXPECT_THAT(ParseLabels({"bad key=1"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("key 'bad key' is not allowed (1..64 characters")));
  EXPECT_THAT(ParseLabels({"=1"}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("key ''")));
  EXPECT_THAT(ParseLabels({"k=a,b"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("contains a comma")));
  EXPECT_THAT(ParseLabels({"k=" + std::string(257, 'x')}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("257 characters (allowed 0..256)")));
  AgentOptions o = Parse({"--work-dir", "/w", "--server", "127.0.0.1:1", "--label", "x"});
  EXPECT_THAT(ValidateOptions(&o, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--label")));
}

TEST(OptionsTest, RangesAreEnforced) {
  AgentOptions drain = Parse({"--work-dir", "/w", "--server", "127.0.0.1:1", "--drain-timeout-s", "0"});
  EXPECT_THAT(ValidateOptions(&drain, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--drain-timeout-s: 0 is out of range (allowed 1..3600)")));
  AgentOptions jobs = Parse({"--work-dir", "/w", "--server", "127.0.0.1:1", "--max-jobs", "-1"});
  EXPECT_THAT(ValidateOptions(&jobs, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max-jobs: -1 is out of range")));
  // Issue 22 item 10: an explicit 0 is out of the documented range too (unset = one per device).
  AgentOptions zero = Parse({"--work-dir", "/w", "--server", "127.0.0.1:1", "--max-jobs", "0"});
  EXPECT_THAT(ValidateOptions(&zero, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--max-jobs: 0 is out of range (allowed 1..number of devices, at most 64; "
                                 "leave it out for one job per device)")));
  AgentOptions unset = Parse({"--work-dir", "/w", "--server", "127.0.0.1:1"});
  EXPECT_THAT(ValidateOptions(&unset, FakeEnv({})), IsOk());
  EXPECT_EQ(unset.max_jobs, 0);
  AgentOptions level = Parse({"--work-dir", "/w", "--server", "127.0.0.1:1", "--log-level", "loud"});
  EXPECT_THAT(ValidateOptions(&level, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--log-level: 'loud' is not one of debug, info, warn, error, off")));
  AgentOptions name = Parse({"--work-dir", "/w", "--server", "127.0.0.1:1", "--name", "has space"});
  EXPECT_THAT(ValidateOptions(&name, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--name: 'has space' is not allowed")));
  EXPECT_THROW(Parse({"--max-jobs", "two"}), CLI::ParseError);
  EXPECT_THROW(Parse({"--no-such-flag"}), CLI::ParseError);
}

TEST(OptionsTest, MaxJobsIsCheckedAgainstTheDevices) {
  EXPECT_EQ(*ValidateMaxJobs(0, 4), 4);
  EXPECT_EQ(*ValidateMaxJobs(2, 4), 2);
  EXPECT_EQ(*ValidateMaxJobs(1, 1), 1);
  EXPECT_THAT(
      ValidateMaxJobs(5, 4),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr(
                   "--max-jobs: 5 is out of range (allowed 1..4, the number of devices this agent offers)")));
}

TEST(OptionsTest, TokenComesFromAFileOrTheEnvironment) {
  const std::string env_token = "mpt_0123456789ab_cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
  const std::string file_token = "mpt_ba9876543210_dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd";
  AgentOptions o;
  EXPECT_EQ(*LoadToken(o, FakeEnv({})), "");
  EXPECT_EQ(*LoadToken(o, FakeEnv({{"MEDPROF_TOKEN", "  " + env_token + "\n"}})), env_token);
  o.token_file = WriteTemp("token", file_token + "\nsecond line ignored\n");
  EXPECT_EQ(*LoadToken(o, FakeEnv({{"MEDPROF_TOKEN", env_token}})), file_token);
  o.token_file = WriteTemp("empty-token", "\n");
  EXPECT_THAT(LoadToken(o, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds no token on its first line")));
  o.token_file = "/nonexistent/token";
  EXPECT_THAT(LoadToken(o, FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--token-file /nonexistent/token: cannot read")));
  o.token_file.clear();
  EXPECT_THAT(LoadToken(o, FakeEnv({{"MEDPROF_TOKEN", "a b"}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MEDPROF_TOKEN: byte 2 is a space")));
}

TEST(OptionsTest, PrintInventoryNeedsNoServerOrWorkDir) {
  AgentOptions o = Parse({"--print-inventory"});
  EXPECT_THAT(ValidateOptions(&o, FakeEnv({})), IsOk());
}

}  // namespace
}  // namespace medprof::agent
