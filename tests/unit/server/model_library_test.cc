// ModelLibrary (server/domain/model_library.h): uploads resume and verify, projects stay apart,
// the size limit names itself, agents fetch only for their leased runs, deletes free the file.
#include "server/domain/model_library.h"

#include <filesystem>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::testing {
namespace {

using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

class ModelLibraryTest : public DomainTest {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("models-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    options_.model_dir = dir_.string();
    options_.max_model_bytes = 1000;
    DomainTest::SetUp();
    file_ = std::string(700, 'x') + "model";
    sha_ = Sha256Hex(file_);
  }

  static CallContext InProject(const std::string& project) {
    CallContext c;
    c.project = project;
    c.all_projects = false;
    return c;
  }

  // Sends `bytes` of the file from `from` in pieces of `piece` bytes.
  absl::StatusOr<UploadModelResult> Send(const CallContext& ctx, const std::string& file, uint64_t from, uint64_t to,
                                         size_t piece = 100) {
    const std::string sha = Sha256Hex(file);
    uint64_t at = from;
    bool sent_one = false;
    return domain_->models().Upload(ctx, [&](ModelPiece& p) {
      if (at >= to && sent_one) return false;
      sent_one = true;
      p = ModelPiece{sha, "denoiser.pt", file.size(), at, file.substr(at, std::min<uint64_t>(piece, to - at))};
      at += p.data.size();
      return true;
    });
  }

  absl::StatusOr<std::string> Fetch(const std::string& agent_id, const std::string& run_id, const std::string& sha,
                                    uint64_t offset) {
    std::string got;
    absl::Status s = domain_->models().Fetch(ctx_, FetchModelRequest{agent_id, run_id, sha, offset},
                                             [&](uint64_t at, absl::string_view data, uint64_t) {
                                               EXPECT_EQ(at, offset + got.size());
                                               got.append(data.data(), data.size());
                                               return true;
                                             });
    if (!s.ok()) return s;
    return got;
  }

  std::filesystem::path dir_;
  std::string file_;
  std::string sha_;
};

TEST_F(ModelLibraryTest, UploadStoresTheFileOutsideTheDatabaseAndSaysSoNextTime) {
  const CallContext lab = InProject("lab-a");
  auto before = domain_->models().Has(lab, sha_);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_FALSE(before->present);
  auto up = Send(lab, file_, 0, file_.size());
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->bytes_received, file_.size());
  EXPECT_EQ(up->model.project, "lab-a");
  EXPECT_EQ(up->model.file_name, "denoiser.pt");
  EXPECT_TRUE(std::filesystem::exists(dir_ / sha_));
  auto after = domain_->models().Has(lab, sha_);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->present);
  auto list = domain_->models().List(lab);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].sha256, sha_);
  EXPECT_EQ((*list)[0].size_bytes, static_cast<int64_t>(file_.size()));
}

TEST_F(ModelLibraryTest, AnInterruptedUploadResumesAtTheOffsetTheServerHolds) {
  const CallContext lab = InProject("lab-a");
  EXPECT_THAT(Send(lab, file_, 0, 300).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("resume at offset 300")));
  auto has = domain_->models().Has(lab, sha_);
  ASSERT_TRUE(has.ok());
  EXPECT_FALSE(has->present);
  EXPECT_EQ(has->resume_offset, 300u);
  // Resuming anywhere else is refused, naming where to resume.
  EXPECT_THAT(Send(lab, file_, 200, file_.size()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("300")));
  auto up = Send(lab, file_, 300, file_.size());
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->bytes_received, file_.size() - 300);
  EXPECT_TRUE(domain_->models().Has(lab, sha_)->present);
}

TEST_F(ModelLibraryTest, RefusalsNameTheLimitAndTheField) {
  const CallContext lab = InProject("lab-a");
  const std::string big(1001, 'y');
  EXPECT_THAT(Send(lab, big, 0, big.size()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("allowed 1..1000")));
  EXPECT_THAT(domain_->models().Has(lab, "ABC").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sha256")));
  // Bytes that do not hash to the name are not kept.
  int n = 0;
  auto lie = domain_->models().Upload(lab, [&n](ModelPiece& p) {
    if (n++ > 0) return false;
    p = ModelPiece{std::string(64, 'a'), "x.pt", 4, 0, "abcd"};
    return true;
  });
  EXPECT_THAT(lie.status(), StatusIs(absl::StatusCode::kDataLoss, ::testing::_));
  EXPECT_FALSE(std::filesystem::exists(dir_ / std::string(64, 'a')));
}

TEST_F(ModelLibraryTest, AnotherProjectNeitherSeesNorReusesWithoutTheBytes) {
  ASSERT_TRUE(Send(InProject("lab-a"), file_, 0, file_.size()).ok());
  const CallContext other = InProject("lab-b");
  EXPECT_FALSE(domain_->models().Has(other, sha_)->present);
  EXPECT_EQ(domain_->models().Has(other, sha_)->resume_offset, 0u);
  EXPECT_TRUE(domain_->models().List(other)->empty());
  // Knowing the hash is not enough: the bytes are compared with the stored file.
  std::string forged = file_;
  forged[650] = 'z';
  uint64_t at = 0;
  auto up = domain_->models().Upload(other, [&](ModelPiece& p) {
    if (at >= forged.size()) return false;
    p = ModelPiece{sha_, "copy.pt", forged.size(), at, forged.substr(at, 100)};
    at += p.data.size();
    return true;
  });
  EXPECT_THAT(up.status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("offset 600")));
  EXPECT_FALSE(domain_->models().Has(other, sha_)->present);
  ASSERT_TRUE(Send(other, file_, 0, file_.size()).ok());
  EXPECT_TRUE(domain_->models().Has(other, sha_)->present);
  // Deleting it from one project keeps the file the other still names.
  auto removed = domain_->models().Delete(InProject("lab-a"), sha_);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_FALSE(*removed);
  EXPECT_TRUE(std::filesystem::exists(dir_ / sha_));
  EXPECT_THAT(domain_->models().Delete(InProject("lab-a"), sha_).status(), StatusIs(absl::StatusCode::kNotFound, ::testing::_));
  removed = domain_->models().Delete(other, sha_);
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(*removed);
  EXPECT_FALSE(std::filesystem::exists(dir_ / sha_));
}

TEST_F(ModelLibraryTest, SubmissionsNameOnlyTheirProjectsModels) {
  v1::ModelRef ref;
  ref.set_sha256(sha_);
  ref.set_file_name("denoiser.pt");
  ref.set_size_bytes(file_.size());
  EXPECT_THAT(domain_->models().CheckReference(InProject("lab-a"), ref),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("upload it first")));
  ASSERT_TRUE(Send(InProject("lab-a"), file_, 0, file_.size()).ok());
  EXPECT_TRUE(domain_->models().CheckReference(InProject("lab-a"), ref).ok());
  EXPECT_THAT(domain_->models().CheckReference(InProject("lab-b"), ref), StatusIs(absl::StatusCode::kNotFound, ::testing::_));
  ref.set_local_path("/tmp/x.pt");
  EXPECT_THAT(domain_->models().CheckReference(InProject("lab-a"), ref),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model.local_path")));
}

TEST_F(ModelLibraryTest, AgentsFetchOnlyForTheirRunningRunsFromAnOffset) {
  ASSERT_TRUE(Send(ctx_, file_, 0, file_.size()).ok());
  const std::string other_file = std::string(10, 'q');
  ASSERT_TRUE(Send(InProject("lab-b"), other_file, 0, other_file.size()).ok());
  const std::string agent = Register("cpu-node", {Cpu()});
  const std::string stranger = Register("other-node", {Cpu()});
  Submit({"baseline"}, {"agent=cpu-node"});
  std::optional<Assignment> a = Acquire(agent);
  ASSERT_TRUE(a.has_value());
  auto whole = Fetch(agent, a->run_id, sha_, 0);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(*whole, file_);
  auto tail = Fetch(agent, a->run_id, sha_, 650);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(*tail, file_.substr(650));
  EXPECT_THAT(Fetch(agent, a->run_id, sha_, file_.size() + 1).status(), StatusIs(absl::StatusCode::kOutOfRange, ::testing::_));
  EXPECT_THAT(Fetch(stranger, a->run_id, sha_, 0).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not a running run")));
  // A model of another project is not the run's to fetch.
  EXPECT_THAT(Fetch(agent, a->run_id, Sha256Hex(other_file), 0).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("project 'default' holds no model")));
  ASSERT_TRUE(Finish(agent, a->run_id, RunState::kSucceeded, 0).ok());
  EXPECT_THAT(Fetch(agent, a->run_id, sha_, 0).status(), StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
}

TEST(ModelLibraryOff, WithoutAModelDirectoryEveryCallSaysSo) {
  SqliteStoreOptions so;
  so.path = ":memory:";
  auto store = SqliteStore::Open(so);
  ASSERT_TRUE(store.ok());
  FakeClock clock;
  auto domain = Domain::Create(store->get(), &clock, DomainOptions{});
  ASSERT_TRUE(domain.ok());
  EXPECT_THAT((*domain)->models().List(CallContext::Background()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("--model-dir")));
}

}  // namespace
}  // namespace medprof::server::testing
