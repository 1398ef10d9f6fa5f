// User models end to end (issue 21) with the real binaries and tokens: the CLI uploads a scripted
// tiny denoiser once per content hash, the server keeps it next to its database, the CPU agent
// fetches it for each run, the worker runs forward/train/sample under baseline and opt2, and
// compare keeps the model in its cells; bad models fail their runs with the cause; roles and
// projects are checked per call. The example models come from the ctest fixture
// torchscript_models (workloads/examples/make_denoisers.py).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace medprof::itest {
namespace {

using ::testing::HasSubstr;

constexpr int kMaxModelBytes = 200000;  // tiny_unet.pt is ~197 kB

class UserModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    models_ = MEDPROF_TEST_MODELS_DIR;
    ASSERT_TRUE(std::filesystem::exists(models_ + "/tiny_unet.pt"))
        << "no example models in " << models_ << ": run this test through ctest (fixture torchscript_models)";
    dir_ = MakeTempDir("user-model");
    db_ = dir_ + "/medprof.db";
    CreateToken(db_, {"--role", "admin", "--project", "lab-a"}, dir_ + "/admin.token");
    CreateToken(db_, {"--role", "submit", "--project", "lab-a"}, dir_ + "/submit.token");
    CreateToken(db_, {"--role", "read", "--project", "lab-a"}, dir_ + "/read.token");
    CreateToken(db_, {"--role", "admin", "--project", "lab-b"}, dir_ + "/other.token");
    CreateToken(db_, {"--role", "agent", "--project", "lab-a", "--agent", "cpu-agent"}, dir_ + "/agent.token");
    auto server = ServerFixture::Start(db_, {"--auth", "tokens", "--max-model-bytes", std::to_string(kMaxModelBytes)});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto agent = StartAgent(server_->address(), dir_ + "/agent", "cpu-agent", {"--token-file", dir_ + "/agent.token"});
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
  }

  // The CLI as the holder of `token` ("admin", "submit", "read", "other").
  CommandResult As(const std::string& token, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {BinPath("medprof"), "--server", server_->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, {{"MEDPROF_TOKEN_FILE", dir_ + "/" + token + ".token"}}, std::chrono::seconds(120));
  }

  // `submit --model` of one phase at a tiny volume; the CLI's result.
  CommandResult Submit(const std::string& token, const std::string& model, const std::string& presets,
                       const std::string& phase) {
    return As(token, {"submit", "--presets", presets, "--model", models_ + "/" + model, "--phase", phase,
                      "--volume", "16", "--steps", "2", "--warmup", "1", "--sample-steps", "2", "--device", "cpu",
                      "--threads", "1", "--format", "json"});
  }

  static std::string StudyOf(const CommandResult& r) {
    return nlohmann::json::parse(r.out).at("study_id").get<std::string>();
  }

  std::string models_, dir_, db_;
  std::unique_ptr<ServerFixture> server_;
  std::unique_ptr<Process> agent_;
};

TEST_F(UserModelTest, UploadedOnceRunEveryPhaseAndCompareKeepsTheModel) {
  const std::string unet = models_ + "/tiny_unet.pt";
  const std::string sha = *Sha256OfFile(unet);
  // A read token cannot upload: the CLI stops at the server's first answer.
  CommandResult read = Submit("read", "tiny_unet.pt", "baseline", "forward");
  EXPECT_EQ(read.exit_code, 2);
  EXPECT_THAT(read.err, HasSubstr("HasModel: a read token"));

  std::vector<std::string> studies;
  for (const char* phase : {"forward", "train", "sample"}) {
    CommandResult r = Submit("submit", "tiny_unet.pt", "baseline,opt2", phase);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The first study uploads the file; the others only ask.
    EXPECT_THAT(r.err, HasSubstr(studies.empty() ? "uploaded 197" : "is already on the server: nothing uploaded"))
        << phase;
    studies.push_back(StudyOf(r));
  }
  EXPECT_TRUE(std::filesystem::exists(db_ + ".models/" + sha));
  for (const std::string& study : studies) {
    CommandResult w = As("read", {"watch", study});
    EXPECT_EQ(w.exit_code, 0) << w.err << agent_->AllOutput();
  }
  auto probe = DbProbe::Open(db_);
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ((*probe)->Int("SELECT COUNT(*) FROM models").value_or(-1), 1);
  EXPECT_EQ((*probe)->Int("SELECT COUNT(*) FROM runs WHERE state = 'succeeded'").value_or(-1), 6);
  // Fetched once into the agent's cache, then linked into each of the six runs.
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/agent/models/" + sha));
  EXPECT_EQ(agent_->CountLines("ready at"), 6) << agent_->AllOutput();

  CommandResult compare = As("read", {"compare", studies[0], studies[1], studies[2], "--format", "json"});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  const nlohmann::json cells = nlohmann::json::parse(compare.out).at("cells");
  ASSERT_EQ(cells.size(), 6u) << compare.out;
  for (const auto& c : cells) {
    EXPECT_EQ(c["model"]["sha256"], sha);
    EXPECT_EQ(c["model"]["file_name"], "tiny_unet.pt");
  }
  CommandResult table = As("read", {"compare", studies[1]});
  EXPECT_THAT(table.out, HasSubstr("opt2 [tiny_unet.pt]"));

  // Listing: the project sees it, another project does not; only an admin of lab-a deletes it.
  CommandResult listed = As("read", {"models", "--format", "json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(nlohmann::json::parse(listed.out)["models"][0]["file_name"], "tiny_unet.pt");
  EXPECT_THAT(As("other", {"models"}).out, HasSubstr("no models"));
  EXPECT_THAT(As("submit", {"models", "delete", sha}).err, HasSubstr("DeleteModel: a submit token"));
  EXPECT_THAT(As("other", {"models", "delete", sha}).err, HasSubstr("project 'lab-b' holds no model"));
  CommandResult deleted = As("admin", {"models", "delete", sha});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_THAT(deleted.out, HasSubstr("the file is gone"));
  EXPECT_FALSE(std::filesystem::exists(db_ + ".models/" + sha));
}

TEST_F(UserModelTest, BadModelsFailTheirRunsWithTheCause) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"not_torchscript.pt", "is not a TorchScript module"},
      {"wrong_signature.pt", "forward has the wrong signature"},
      {"wrong_shape.pt", "output shape [1, 2, 16, 16, 16] differs"},
      {"nan_output.pt", "NaN/Inf values"},
      {"ignores_t.pt", "the output does not depend on t"},
      {"out_of_memory.pt", "out of memory in the dry run"},
  };
  for (const auto& [file, cause] : bad) {
    CommandResult r = Submit("submit", file, "baseline", "forward");
    ASSERT_EQ(r.exit_code, 0) << file << ": " << r.err;
    CommandResult w = As("submit", {"watch", StudyOf(r)});
    EXPECT_EQ(w.exit_code, 3) << file << ": " << w.err;
    EXPECT_THAT(w.err, HasSubstr(cause)) << file;
  }
  EXPECT_TRUE(agent_->Running()) << "a bad model never takes the agent down";

  // A model deleted between the submission and the run: the agent's fetch is refused and the run
  // fails naming the model and the cause; the agent carries on.
  CreateToken(db_, {"--role", "agent", "--project", "lab-a", "--agent", "late-agent"}, dir_ + "/late.token");
  const std::string resnet = models_ + "/tiny_resnet.pt";
  CommandResult queued = As("submit", {"submit", "--presets", "baseline", "--model", resnet, "--target",
                                       "agent=late-agent", "--max-attempts", "1", "--format", "json"});
  ASSERT_EQ(queued.exit_code, 0) << queued.err;
  ASSERT_EQ(As("admin", {"models", "delete", *Sha256OfFile(resnet)}).exit_code, 0);
  auto late = StartAgent(server_->address(), dir_ + "/late", "late-agent", {"--token-file", dir_ + "/late.token"});
  ASSERT_TRUE(late.ok()) << late.status();
  CommandResult failed = As("submit", {"watch", StudyOf(queued)});
  EXPECT_EQ(failed.exit_code, 3) << failed.err;
  EXPECT_THAT(failed.err, HasSubstr("model tiny_resnet.pt ("));
  EXPECT_THAT(failed.err, HasSubstr("project 'lab-a' holds no model"));
  EXPECT_TRUE((*late)->Running());

  // Larger than the server's limit: refused before any byte is stored, naming the limit.
  const std::string big = dir_ + "/big.pt";
  std::ofstream(big, std::ios::binary) << std::string(kMaxModelBytes + 1, 'x');
  CommandResult r = As("submit", {"submit", "--presets", "baseline", "--model", big});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("allowed 1..", kMaxModelBytes, ", the server's limit --max-model-bytes")));
}

}  // namespace
}  // namespace medprof::itest
