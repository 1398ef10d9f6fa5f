// The workload flags are one definition (common/workload_flags.h): `medprof submit --help` and
// `medprof-worker --help` list the same flags with the same names, defaults and ranges; every
// WorkloadConfig field has one; the same words give the same config on both; old spellings
// still work and say they are old.
#include "common/workload_flags.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/worker/worker_args.h"
#include "client/cli.h"
#include "common/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::string SubmitHelp() {
  absl::StatusOr<client::Command> c = client::ParseCommandLine({"medprof", "submit", "--help"}, ProcessEnv());
  EXPECT_TRUE(c.ok()) << c.status();
  return std::get<client::PrintCommand>(c->body).text;
}

std::string WorkerHelp() {
  absl::StatusOr<worker::WorkerArgs> a = worker::ParseArgs({"--help"});
  EXPECT_TRUE(a.ok()) << a.status();
  return a->help;
}

// The lines of the workload-flag section of a help text: from its title to the next blank line.
std::vector<std::string> WorkloadSection(const std::string& help) {
  std::vector<std::string> lines = absl::StrSplit(help, '\n');
  std::vector<std::string> section;
  bool in = false;
  for (const std::string& line : lines) {
    if (line == std::string(config::kWorkloadFlagGroup) + ":") {
      in = true;
      continue;
    }
    if (in && line.empty()) break;
    if (in) section.push_back(line);
  }
  return section;
}

TEST(WorkloadFlagsTest, SubmitAndWorkerHelpListTheSameFlags) {
  const std::vector<std::string> submit = WorkloadSection(SubmitHelp());
  const std::vector<std::string> worker = WorkloadSection(WorkerHelp());
  ASSERT_THAT(submit, Not(IsEmpty()));
  EXPECT_EQ(submit, worker);
}

TEST(WorkloadFlagsTest, EveryConfigFieldButThePresetHasAFlagWithItsDefault) {
  std::string section;
  for (const std::string& line : WorkloadSection(WorkerHelp())) section += line + "\n";
  const google::protobuf::Descriptor* d = v1::WorkloadConfig::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const std::string name = d->field(i)->name();
    if (name == "preset") continue;  // submit takes --presets P,P.., the worker --preset P
    const std::string flag = "--" + absl::StrReplaceAll(name, {{"_", "-"}});
    // Switches on by default are turned off by --no-NAME.
    EXPECT_TRUE(absl::StrContains(section, flag + " ") || absl::StrContains(section, flag + ",") ||
                absl::StrContains(section, "--no-" + flag.substr(2) + " "))
        << name << " has no flag in:\n" << section;
  }
  EXPECT_THAT(section, HasSubstr("(default 128; allowed 8..512"));
  EXPECT_THAT(section, HasSubstr("(default 98; allowed 50..100)"));
  EXPECT_THAT(section, HasSubstr("(default 32; allowed 1..64)"));
}

TEST(WorkloadFlagsTest, TheSameWordsGiveTheSameConfigOnBoth) {
  const std::vector<std::string> words = {
      "--phase", "sample", "--volume", "32", "--depth", "48", "--steps", "4", "--warmup", "0", "--batch", "2",
      "--base-channels", "16", "--channel-mult", "1,2,4", "--res-blocks", "2", "--attention-ds", "2,4",
      "--in-channels", "8", "--out-channels", "4", "--groups", "8", "--grad-accum", "1", "--lr", "0.001",
      "--seed", "12345678901", "--sample-steps", "5", "--no-tf32", "--fused", "--device", "cpu", "--threads", "2",
      "--metrics", "--metrics-top-k", "12", "--metrics-launches", "5", "--metrics-coverage-pct", "60",
      "--metrics-max-signatures", "4", "--overhead-pairs", "0", "--no-sampling", "--no-trace",
      "--counter-api", "legacy"};
  std::vector<std::string> submit_argv = {"medprof", "submit", "--presets", "opt1"};
  submit_argv.insert(submit_argv.end(), words.begin(), words.end());
  absl::StatusOr<client::Command> submit = client::ParseCommandLine(submit_argv, ProcessEnv());
  ASSERT_TRUE(submit.ok()) << submit.status();
  std::vector<std::string> worker_argv = {"--preset", "opt1", "--out", "r.pb"};
  worker_argv.insert(worker_argv.end(), words.begin(), words.end());
  absl::StatusOr<worker::WorkerArgs> worker = worker::ParseArgs(worker_argv);
  ASSERT_TRUE(worker.ok()) << worker.status();

  const v1::WorkloadConfig& from_submit = std::get<client::SubmitCommand>(submit->body).request.config();
  v1::WorkloadConfig from_worker = worker->config;
  EXPECT_EQ(from_worker.preset(), "opt1");
  from_worker.clear_preset();  // submit's presets travel beside the config
  EXPECT_EQ(from_submit.SerializeAsString(), from_worker.SerializeAsString())
      << "submit: " << from_submit.ShortDebugString() << "\nworker: " << from_worker.ShortDebugString();
  EXPECT_EQ(from_submit.counter_api(), "legacy");
  EXPECT_FALSE(from_submit.trace());
  EXPECT_EQ(from_submit.metrics_max_signatures(), 4);
}

TEST(WorkloadFlagsTest, ModelNamesTheFileByItsContentOnBoth) {
  const std::string path = ::testing::TempDir() + "/flags_model.pt";
  std::ofstream(path, std::ios::binary) << "model bytes";
  absl::StatusOr<worker::WorkerArgs> w = worker::ParseArgs({"--preset", "opt1", "--out", "r.pb", "--model", path});
  ASSERT_TRUE(w.ok()) << w.status();
  const v1::ModelRef& m = w->config.model();
  EXPECT_EQ(m.sha256(), Sha256Hex("model bytes"));
  EXPECT_EQ(m.file_name(), "flags_model.pt");
  EXPECT_EQ(m.size_bytes(), 11u);
  EXPECT_EQ(std::filesystem::path(m.local_path()), std::filesystem::absolute(path));
  absl::StatusOr<client::Command> s =
      client::ParseCommandLine({"medprof", "submit", "--presets", "opt1", "--model", path}, ProcessEnv());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(std::get<client::SubmitCommand>(s->body).request.config().model().sha256(), m.sha256());
  EXPECT_THAT(worker::ParseArgs({"--preset", "opt1", "--out", "r.pb", "--model", path + ".missing"}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--model: cannot read '")));
}

TEST(WorkloadFlagsTest, OldSpellingsWorkAndSayTheyAreOld) {
  for (const std::string& help : {SubmitHelp(), WorkerHelp()}) {
    EXPECT_THAT(help, HasSubstr("--learning-rate,--lr"));
    EXPECT_THAT(help, HasSubstr("--lr is the old spelling, accepted for one release"));
    EXPECT_THAT(help, HasSubstr("--threads is the old spelling, accepted for one release"));
  }
  absl::StatusOr<worker::WorkerArgs> w =
      worker::ParseArgs({"--preset", "opt1", "--out", "r.pb", "--learning-rate", "0.01", "--cpu-threads", "3"});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_DOUBLE_EQ(w->config.learning_rate(), 0.01);
  EXPECT_EQ(w->config.cpu_threads(), 3);
  // A value of the wrong type names the canonical flag on both commands.
  EXPECT_THAT(worker::ParseArgs({"--preset", "opt1", "--out", "r.pb", "--lr", "fast"}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                "--learning-rate: 'fast' is not a number (allowed: greater than 0, at most 1)"));
}

TEST(WorkloadFlagsTest, SubmitRunTimeoutAndTopKeepTheirOldSpellings) {
  const std::string help = SubmitHelp();
  EXPECT_THAT(help, HasSubstr("--run-timeout-s,--timeout-s"));
  EXPECT_THAT(help, HasSubstr("--timeout-s is the old spelling"));
  for (const char* spelling : {"--run-timeout-s", "--timeout-s"}) {
    absl::StatusOr<client::Command> c =
        client::ParseCommandLine({"medprof", "submit", "--presets", "opt1", spelling, "60"}, ProcessEnv());
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(std::get<client::SubmitCommand>(c->body).request.timeout_s(), 60) << spelling;
  }
  for (const char* spelling : {"--top", "--top-kernels"}) {
    absl::StatusOr<client::Command> c =
        client::ParseCommandLine({"medprof", "compare", "st-1", spelling, "7"}, ProcessEnv());
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(std::get<client::CompareCommand>(c->body).request.top_kernels(), 7) << spelling;
    c = client::ParseCommandLine({"medprof", "report", "st-1", "-o", "r.html", spelling, "7"}, ProcessEnv());
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(std::get<client::ReportCommand>(c->body).top_kernels, 7) << spelling;
  }
}

}  // namespace
}  // namespace medprof
