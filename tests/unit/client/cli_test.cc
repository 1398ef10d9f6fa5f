#include "client/cli.h"

#include <map>
#include <string>
#include <vector>

#include "common/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::client {
namespace {

using ::medprof::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

EnvLookup Env(std::map<std::string, std::string> vars = {}) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

absl::StatusOr<Command> Parse(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), "medprof");
  return ParseCommandLine(args, Env(std::move(env)));
}

template <typename T>
T Body(const absl::StatusOr<Command>& c) {
  EXPECT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(std::holds_alternative<T>(c->body));
  return std::get<T>(c->body);
}

absl::Status UsageError(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  auto c = Parse(std::move(args), std::move(env));
  return c.ok() ? absl::OkStatus() : c.status();
}

// ------------------------------------------------------------------ submit

TEST(CliSubmit, OnlyTypedFieldsAreSet) {
  auto s = Body<SubmitCommand>(Parse({"submit", "--presets", "baseline,opt1"}));
  EXPECT_THAT(s.request.presets(), ElementsAre("baseline", "opt1"));
  // Nothing else was typed: the config is empty on the wire and the server fills defaults.
  EXPECT_EQ(s.request.config().ByteSizeLong(), 0u);
  EXPECT_FALSE(s.request.config().has_volume());
  EXPECT_FALSE(s.request.config().has_tf32());
  EXPECT_EQ(s.request.targets_size(), 0);
  EXPECT_EQ(s.request.repeats(), 0);
  EXPECT_EQ(s.request.max_attempts(), 0);
  EXPECT_EQ(s.request.timeout_s(), 0);
  EXPECT_EQ(s.request.name(), "");
  EXPECT_FALSE(s.wait);
  EXPECT_EQ(s.format, OutputFormat::kTable);
}

TEST(CliSubmit, EveryFlagReachesItsField) {
  auto s = Body<SubmitCommand>(Parse(
      {"submit", "--presets", "opt2", "--presets", "opt12", "--volume", "32", "--depth", "16", "--height", "32",
       "--width", "48", "--steps", "3", "--warmup", "0", "--phase", "forward", "--target", "gpu=h100",
       "--repeats", "4", "--batch", "2", "--base-channels", "8", "--channel-mult", "1,2", "--res-blocks", "2",
       "--groups", "4", "--grad-accum", "1", "--seed", "7", "--sample-steps", "5", "--no-tf32",
       "--channels-last", "--bf16", "--no-fused", "--device", "cpu", "--max-attempts", "2",
       "--timeout-s", "600", "--name", "tf32 study", "--attention-ds", "2", "--in-channels", "3",
       "--out-channels", "1", "--learning-rate", "0.001", "--cpu-threads", "4", "--metrics",
       "--metrics-top-k", "5", "--metrics-launches", "1", "--wait", "--format", "json"}));
  const v1::SubmitStudyRequest& r = s.request;
  const v1::WorkloadConfig& c = r.config();
  EXPECT_THAT(r.presets(), ElementsAre("opt2", "opt12"));
  EXPECT_THAT(r.targets(), ElementsAre("gpu=h100"));
  EXPECT_EQ(r.repeats(), 4);
  EXPECT_EQ(r.max_attempts(), 2);
  EXPECT_EQ(r.timeout_s(), 600);
  EXPECT_EQ(r.name(), "tf32 study");
  EXPECT_EQ(c.volume(), 32);
  EXPECT_EQ(c.depth(), 16);
  EXPECT_EQ(c.height(), 32);
  EXPECT_EQ(c.width(), 48);
  EXPECT_EQ(c.steps(), 3);
  EXPECT_TRUE(c.has_warmup());
  EXPECT_EQ(c.warmup(), 0);
  EXPECT_EQ(c.phase(), v1::PHASE_FORWARD);
  EXPECT_EQ(c.batch(), 2);
  EXPECT_EQ(c.base_channels(), 8);
  EXPECT_THAT(c.channel_mult(), ElementsAre(1, 2));
  EXPECT_EQ(c.res_blocks(), 2);
  EXPECT_EQ(c.groups(), 4);
  EXPECT_EQ(c.grad_accum(), 1);
  EXPECT_EQ(c.seed(), 7u);
  EXPECT_EQ(c.sample_steps(), 5);
  ASSERT_TRUE(c.has_tf32());
  EXPECT_FALSE(c.tf32());
  ASSERT_TRUE(c.has_channels_last());
  EXPECT_TRUE(c.channels_last());
  ASSERT_TRUE(c.has_bf16());
  EXPECT_TRUE(c.bf16());
  ASSERT_TRUE(c.has_fused());
  EXPECT_FALSE(c.fused());
  EXPECT_EQ(c.device(), v1::DEVICE_KIND_CPU);
  EXPECT_THAT(c.attention_ds(), ElementsAre(2));
  EXPECT_EQ(c.in_channels(), 3);
  EXPECT_EQ(c.out_channels(), 1);
  EXPECT_DOUBLE_EQ(c.learning_rate(), 0.001);
  EXPECT_EQ(c.cpu_threads(), 4);
  EXPECT_TRUE(c.metrics());
  EXPECT_EQ(c.metrics_top_k(), 5);
  EXPECT_EQ(c.metrics_launches(), 1);
  EXPECT_EQ(c.preset(), "");  // the preset travels in `presets`, never in the shared config
  EXPECT_TRUE(s.wait);
  EXPECT_EQ(s.format, OutputFormat::kJson);
}

TEST(CliSubmit, SelectorsPassThroughUnparsed) {
  auto s = Body<SubmitCommand>(Parse({"submit", "--presets", "baseline", "--target", "gpu=h100,arch=9.0",
                                      "--target", "label.rack=a b", "--target", "", "--target=not a selector!"}));
  EXPECT_THAT(s.request.targets(), ElementsAre("gpu=h100,arch=9.0", "label.rack=a b", "", "not a selector!"));
}

TEST(CliSubmit, ThreadsIsTheWorkersNameForCpuThreads) {
  auto s = Body<SubmitCommand>(Parse({"submit", "--presets", "baseline", "--threads", "1"}));
  EXPECT_EQ(s.request.config().cpu_threads(), 1);
  EXPECT_THAT(UsageError({"submit", "--presets", "baseline", "--threads", "2000"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--cpu-threads: 2000 is out of range (allowed 0..1024)"));
  EXPECT_THAT(UsageError({"submit", "--presets", "baseline", "--metrics-launches", "10"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--metrics-launches: 10 is out of range (allowed 1..9)"));
}

TEST(CliSubmit, DeviceAutoIsUnspecified) {
  auto s = Body<SubmitCommand>(Parse({"submit", "--presets", "baseline", "--device", "auto"}));
  EXPECT_EQ(s.request.config().device(), v1::DEVICE_KIND_UNSPECIFIED);
  s = Body<SubmitCommand>(Parse({"submit", "--presets", "baseline", "--device", "cuda"}));
  EXPECT_EQ(s.request.config().device(), v1::DEVICE_KIND_CUDA);
}

TEST(CliSubmit, PresetListIsValidated) {
  EXPECT_THAT(UsageError({"submit", "--presets", "baseline,opt9"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--presets: unknown preset 'opt9' (allowed: baseline|opt1|opt2|opt12|bf16|opt3)"));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1,opt1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--presets: 'opt1' is listed twice"));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1,,opt2"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--presets: empty preset name")));
  EXPECT_THAT(UsageError({"submit"}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--presets is required")));
  // Every preset common/workload_config.h knows is accepted.
  auto s = Body<SubmitCommand>(Parse({"submit", "--presets", "baseline,opt1,opt2,opt12,bf16,opt3"}));
  EXPECT_EQ(s.request.presets_size(), 6);
}

TEST(CliSubmit, BadValuesNameTheFlagAndTheAllowedValues) {
  using absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--volume", "abc"}),
              StatusIs(kInvalidArgument, "--volume: 'abc' is not an integer (allowed 8..512)"));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--volume", "4"}),
              StatusIs(kInvalidArgument, AllOf(HasSubstr("--volume: 4 is out of range"), HasSubstr("8..512"))));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--volume", "24"}),
              StatusIs(kInvalidArgument, AllOf(HasSubstr("--volume: 24"), HasSubstr("a multiple of 16"))));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--steps", "0"}),
              StatusIs(kInvalidArgument, "--steps: 0 is out of range (allowed 1..100000)"));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--phase", "backward"}),
              StatusIs(kInvalidArgument, "--phase: unknown phase 'backward' (allowed: forward|train|sample)"));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--device", "gpu"}),
              StatusIs(kInvalidArgument, "--device: 'gpu' is not a device (allowed: auto|cpu|cuda)"));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--repeats", "0"}),
              StatusIs(kInvalidArgument, "--repeats: 0 is out of range (allowed 1..100)"));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--max-attempts", "11"}),
              StatusIs(kInvalidArgument, "--max-attempts: 11 is out of range (allowed 1..10)"));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--timeout-s", "-5"}),
              StatusIs(kInvalidArgument, "--run-timeout-s: -5 is out of range (allowed 1..604800)"));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--channel-mult", "1,x"}),
              StatusIs(kInvalidArgument, HasSubstr("--channel-mult: 'x' is not an integer")));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--base-channels", "8", "--channel-mult", "1,2", "--groups", "3"}),
              StatusIs(kInvalidArgument, HasSubstr("--groups: 3 does not divide")));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--learning-rate", "fast"}),
              StatusIs(kInvalidArgument, HasSubstr("--learning-rate: 'fast' is not a number")));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--learning-rate", "2"}),
              StatusIs(kInvalidArgument, HasSubstr("--learning-rate: 2 is out of range")));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--sample-steps", "251"}),
              StatusIs(kInvalidArgument, "--sample-steps: 251 is out of range (allowed 1..250)"));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--seed", "-1"}),
              StatusIs(kInvalidArgument, HasSubstr("--seed: '-1' is not a non-negative integer")));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--tf32", "--no-tf32"}),
              StatusIs(kInvalidArgument, "--tf32 excludes --no-tf32"));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--name", std::string(201, 'x')}),
              StatusIs(kInvalidArgument, "--name: 201 characters (allowed at most 200)"));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "--bogus"}),
              StatusIs(kInvalidArgument, HasSubstr("--bogus")));
  EXPECT_THAT(UsageError({"submit", "--presets", "opt1", "stray"}),
              StatusIs(kInvalidArgument, HasSubstr("stray")));
}

TEST(CliSubmit, JobTimeoutAndCallTimeoutAreDistinct) {
  auto c = Parse({"--timeout-s", "5", "submit", "--presets", "baseline", "--timeout-s", "600"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->connection.timeout_s, 5);
  EXPECT_EQ(std::get<SubmitCommand>(c->body).request.timeout_s(), 600);
}

// ------------------------------------------------------------------ global options

TEST(CliGlobal, ServerFromFlagEnvOrDefault) {
  auto c = Parse({"studies"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->connection.server, "127.0.0.1:7000");
  EXPECT_EQ(c->connection.timeout_s, 30);

  c = Parse({"studies"}, {{"MEDPROF_SERVER", "medprof.example.org:443"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->connection.server, "medprof.example.org:443");

  c = Parse({"--server", "[::1]:7001", "studies"}, {{"MEDPROF_SERVER", "medprof.example.org:443"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->connection.server, "[::1]:7001");  // the flag wins

  c = Parse({"studies", "--server", "10.0.0.2:7000"});  // global flags after the command too
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->connection.server, "10.0.0.2:7000");
}

TEST(CliGlobal, BadAddressesNameTheirSource) {
  EXPECT_THAT(UsageError({"--server", "localhost", "studies"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--server: 'localhost' is not HOST:PORT")));
  EXPECT_THAT(UsageError({"--server", "h:70000", "studies"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--server: 'h:70000' has no valid port (allowed 1..65535)"));
  EXPECT_THAT(UsageError({"--server", "::1:7000", "studies"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[addr]:port")));
  EXPECT_THAT(UsageError({"studies"}, {{"MEDPROF_SERVER", "nohost"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MEDPROF_SERVER: 'nohost' is not HOST:PORT")));
  EXPECT_TRUE(ValidateServerAddress("unix:/run/medprof.sock", "--server").ok());
}

TEST(CliGlobal, TimeoutTlsAndToken) {
  const std::string secret = "mpt_0123456789ab_cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
  auto c = Parse({"--timeout-s", "12", "--tls-ca", "/etc/ca.pem", "agents"}, {{"MEDPROF_TOKEN", secret}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->connection.timeout_s, 12);
  EXPECT_EQ(c->connection.tls_ca_file, "/etc/ca.pem");
  EXPECT_EQ(c->connection.token, secret);

  c = Parse({"agents"}, {{"MEDPROF_TOKEN_FILE", "/run/token"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->connection.token, "");
  EXPECT_EQ(c->connection.token_file, "/run/token");

  EXPECT_THAT(UsageError({"--timeout-s", "0", "agents"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--timeout-s: 0 is out of range (allowed 1..3600)"));
  EXPECT_THAT(UsageError({"--timeout-s", "soon", "agents"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--timeout-s: 'soon' is not an integer (allowed 1..3600)"));
}

TEST(CliGlobal, VersionAndHelpPrintWithoutAServer) {
  auto p = Body<PrintCommand>(Parse({"--version"}));
  EXPECT_EQ(p.text, std::string("medprof ") + kVersionLine + "\n");
  p = Body<PrintCommand>(Parse({"--help"}));
  EXPECT_THAT(p.text, AllOf(HasSubstr("submit"), HasSubstr("compare"), HasSubstr("Exit codes")));
  p = Body<PrintCommand>(Parse({"submit", "--help"}));
  EXPECT_THAT(p.text, AllOf(HasSubstr("--presets"), HasSubstr("--wait")));
}

TEST(CliGlobal, MissingOrUnknownCommand) {
  EXPECT_THAT(UsageError({}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("missing command (allowed: submit|watch|studies|runs|run|agents|models|cancel|compare|"),
                             HasSubstr("|kernels|diff|export"))));
  EXPECT_THAT(UsageError({"explode"}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("explode")));
  EXPECT_THAT(UsageError({"kernels"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "kernels: give a RUN id (medprof kernels RUN) or a command (allowed: classify)"));
}

// ------------------------------------------------------------------ --format

TEST(CliFormat, EveryListingCommandTakesTableJsonCsv) {
  const std::vector<std::vector<std::string>> commands = {
      {"submit", "--presets", "baseline"}, {"watch", "s1"}, {"studies"}, {"runs"}, {"agents"}, {"compare", "s1"}};
  for (const auto& base : commands) {
    for (const auto& [text, want] : std::vector<std::pair<std::string, OutputFormat>>{
             {"table", OutputFormat::kTable}, {"json", OutputFormat::kJson}, {"csv", OutputFormat::kCsv}}) {
      auto args = base;
      args.push_back("--format");
      args.push_back(text);
      auto c = Parse(args);
      ASSERT_TRUE(c.ok()) << base[0] << " " << text << ": " << c.status();
      OutputFormat got = std::visit(
          [](const auto& b) -> OutputFormat {
            if constexpr (requires { b.format; }) {
              return b.format;
            } else {
              return OutputFormat::kTable;
            }
          },
          c->body);
      EXPECT_EQ(got, want) << base[0] << " " << text;
    }
    auto args = base;
    args.push_back("--format");
    args.push_back("xml");
    EXPECT_THAT(UsageError(args), StatusIs(absl::StatusCode::kInvalidArgument,
                                           AllOf(HasSubstr("--format: 'xml' is not a format of '" + base[0] + "'"),
                                                 HasSubstr("(allowed: table|json|csv)"))));
  }
}

TEST(CliFormat, RunTakesTableOrJson) {
  EXPECT_EQ(Body<RunCommand>(Parse({"run", "r1", "--format", "json"})).format, OutputFormat::kJson);
  EXPECT_THAT(UsageError({"run", "r1", "--format", "csv"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--format: 'csv' is not a format of 'run' (allowed: table|json)"));
}

// ------------------------------------------------------------------ other commands

TEST(CliCommands, WatchStudiesRunsRunAgentsCancel) {
  EXPECT_EQ(Body<WatchCommand>(Parse({"watch", "st-1"})).study_id, "st-1");

  auto studies = Body<StudiesCommand>(Parse({"studies", "--limit", "5"}));
  EXPECT_EQ(studies.request.limit(), 5);
  EXPECT_EQ(Body<StudiesCommand>(Parse({"studies"})).request.limit(), 0);  // server default
  EXPECT_THAT(UsageError({"studies", "--limit", "0"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--limit: 0 is out of range (allowed 1..1000)"));

  auto runs = Body<RunsCommand>(Parse({"runs", "--study", "st-1", "--job", "j-2", "--limit", "10000"}));
  EXPECT_EQ(runs.request.study_id(), "st-1");
  EXPECT_EQ(runs.request.job_id(), "j-2");
  EXPECT_EQ(runs.request.limit(), 10000);
  EXPECT_THAT(UsageError({"runs", "--limit", "10001"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--limit: 10001 is out of range (allowed 1..10000)"));

  EXPECT_EQ(Body<RunCommand>(Parse({"run", "r-9"})).run_id, "r-9");
  EXPECT_EQ(Body<AgentsCommand>(Parse({"agents"})).format, OutputFormat::kTable);

  auto cancel = Body<CancelCommand>(Parse({"cancel", "st-1", "--reason", "wrong volume"}));
  EXPECT_EQ(cancel.request.study_id(), "st-1");
  EXPECT_EQ(cancel.request.reason(), "wrong volume");

  EXPECT_THAT(UsageError({"watch"}), StatusIs(absl::StatusCode::kInvalidArgument, "STUDY is required"));
  EXPECT_THAT(UsageError({"run", ""}), StatusIs(absl::StatusCode::kInvalidArgument, "run: RUN_ID must not be empty"));
}

TEST(CliCommands, Compare) {
  auto c = Body<CompareCommand>(Parse({"compare", "st-1"}));
  EXPECT_EQ(c.request.study_id(), "st-1");
  EXPECT_EQ(c.request.baseline_preset(), "");  // server default: baseline
  EXPECT_EQ(c.request.phase(), v1::PHASE_UNSPECIFIED);
  EXPECT_EQ(c.request.top_categories(), 0);

  c = Body<CompareCommand>(Parse({"compare", "st-1", "--baseline", "opt1", "--phase", "sample",
                                  "--top-categories", "5", "--format", "csv"}));
  EXPECT_EQ(c.request.baseline_preset(), "opt1");
  EXPECT_EQ(c.request.phase(), v1::PHASE_SAMPLE);
  EXPECT_EQ(c.request.top_categories(), 5);
  EXPECT_EQ(c.format, OutputFormat::kCsv);

  EXPECT_THAT(UsageError({"compare", "st-1", "--baseline", "fp64"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--baseline: unknown preset 'fp64' (allowed: baseline|opt1|opt2|opt12|bf16|opt3)"));
  EXPECT_THAT(UsageError({"compare", "st-1", "--phase", "eval"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--phase: unknown phase 'eval'")));
  EXPECT_THAT(UsageError({"compare", "st-1", "--top-categories", "13"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--top-categories: 13 is out of range (allowed 1..12)"));

  // Across studies: the first is study_id, the rest more_study_ids.
  c = Body<CompareCommand>(Parse({"compare", "st-1", "st-2", "st-3"}));
  EXPECT_EQ(c.request.study_id(), "st-1");
  EXPECT_THAT(c.request.more_study_ids(), ElementsAre("st-2", "st-3"));
  EXPECT_THAT(UsageError({"compare", "st-1", "st-2", "--runs", "r-1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "compare: several STUDY ids or --runs, not both"));
  EXPECT_THAT(UsageError({"compare", "a", "b", "c", "d", "e", "f", "g", "h", "i"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "compare: 9 studies (allowed at most 8)"));
}

TEST(CliCommands, KernelsClassify) {
  EXPECT_TRUE(Body<ClassifyCommand>(Parse({"kernels", "classify"})).names.empty());
  EXPECT_THAT(Body<ClassifyCommand>(Parse({"kernels", "classify", "a", "b c"})).names, ElementsAre("a", "b c"));
}

}  // namespace
}  // namespace medprof::client
