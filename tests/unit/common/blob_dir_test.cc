// common/blob_dir: files named by their SHA-256 arrive in resumable pieces, become visible only
// once their hash checks, are read back at any offset, survive a reopen, and (bounded) leave least
// recently used first; every refusal names its cause.
#include "common/blob_dir.h"

#include <filesystem>
#include <string>

#include "common/file_util.h"
#include "common/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

class BlobDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/blob_dir_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(path_);
  }
  std::unique_ptr<BlobDir> Open(uint64_t max_file = uint64_t{2} << 30, uint64_t max_total = 0) {
    auto dir = BlobDir::Open({path_, max_file, max_total});
    EXPECT_TRUE(dir.ok()) << dir.status();
    return dir.ok() ? *std::move(dir) : nullptr;
  }
  // Stores `content` whole; returns its hash.
  static std::string Put(BlobDir& dir, const std::string& content) {
    const std::string sha = Sha256Hex(content);
    EXPECT_THAT(dir.Append(sha, content.size(), 0, content), IsOk());
    EXPECT_THAT(dir.Commit(sha, content.size()), IsOk());
    return sha;
  }
  std::string path_;
};

TEST_F(BlobDirTest, PiecesResumeAndTheFileAppearsOnlyOnceItsHashChecks) {
  auto dir = Open();
  const std::string content = "a TorchScript archive, in three pieces";
  const std::string sha = Sha256Hex(content);
  ASSERT_THAT(dir->Append(sha, content.size(), 0, content.substr(0, 10)), IsOk());
  EXPECT_EQ(dir->PartialBytes(sha), 10u);
  EXPECT_FALSE(dir->Has(sha));
  EXPECT_THAT(dir->Append(sha, content.size(), 4, content.substr(4, 6)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("resume at 10")));
  EXPECT_THAT(dir->Commit(sha, content.size()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("10 of 38 bytes received")));
  dir.reset();  // a restart between pieces keeps the .part
  dir = Open();
  EXPECT_EQ(dir->PartialBytes(sha), 10u);
  ASSERT_THAT(dir->Append(sha, content.size(), 10, content.substr(10)), IsOk());
  ASSERT_THAT(dir->Commit(sha, content.size()), IsOk());
  EXPECT_TRUE(dir->Has(sha));
  EXPECT_EQ(dir->PartialBytes(sha), 0u);
  MEDPROF_ASSERT_OK_AND_ASSIGN(const std::string file, ReadFile(dir->PathOf(sha)));
  EXPECT_EQ(file, content);
  MEDPROF_ASSERT_OK_AND_ASSIGN(const std::string tail, dir->Read(sha, 30, 100));
  EXPECT_EQ(tail, content.substr(30));
  MEDPROF_ASSERT_OK_AND_ASSIGN(const std::string end, dir->Read(sha, content.size(), 100));
  EXPECT_EQ(end, "");
  EXPECT_THAT(dir->Read(sha, content.size() + 1, 1), StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("past the end")));
  dir.reset();
  EXPECT_TRUE(Open()->Has(sha));  // complete files survive a reopen
}

TEST_F(BlobDirTest, ACorruptedFileIsRefusedNamingBothHashesAndStartsOver) {
  auto dir = Open();
  const std::string sha = Sha256Hex("the real bytes");
  ASSERT_THAT(dir->Append(sha, 14, 0, "the fake bytes"), IsOk());
  EXPECT_THAT(dir->Commit(sha, 14), StatusIs(absl::StatusCode::kDataLoss,
                                             HasSubstr("hashes to " + Sha256Hex("the fake bytes") + ", not " + sha)));
  EXPECT_FALSE(dir->Has(sha));
  EXPECT_EQ(dir->PartialBytes(sha), 0u);
}

TEST_F(BlobDirTest, RefusalsNameTheLimitAndTheField) {
  auto dir = Open(/*max_file=*/16);
  const std::string sha = Sha256Hex("x");
  EXPECT_THAT(dir->Append(sha, 17, 0, "x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("17 exceeds the limit of 16 bytes")));
  EXPECT_THAT(dir->Append(sha, 1, 0, "xy"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceed the file's 1 bytes")));
  EXPECT_THAT(dir->Append("../etc/passwd", 1, 0, "x"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sha256")));
  EXPECT_THAT(dir->Read(sha, 0, 1), StatusIs(absl::StatusCode::kNotFound, HasSubstr("not stored here")));
  EXPECT_THAT(dir->Delete(sha), StatusIs(absl::StatusCode::kNotFound, HasSubstr("not stored here")));
  const std::string kept = Put(*dir, "kept");
  EXPECT_THAT(dir->Delete(kept), IsOk());
  EXPECT_FALSE(dir->Has(kept));
  EXPECT_FALSE(PathExists(dir->PathOf(kept)));
}

TEST_F(BlobDirTest, ABoundedDirectoryEvictsTheLeastRecentlyUsedFirst) {
  auto dir = Open(/*max_file=*/100, /*max_total=*/30);
  const std::string a = Put(*dir, std::string(10, 'a'));
  const std::string b = Put(*dir, std::string(10, 'b'));
  const std::string c = Put(*dir, std::string(10, 'c'));
  dir->Touch(a);  // b is now the least recently used
  ASSERT_THAT(dir->Reserve(10), IsOk());
  EXPECT_TRUE(dir->Has(a));
  EXPECT_FALSE(dir->Has(b));
  EXPECT_TRUE(dir->Has(c));
  EXPECT_FALSE(PathExists(dir->PathOf(b)));
  EXPECT_EQ(dir->TotalBytes(), 20u);
  ASSERT_THAT(dir->Reserve(25), IsOk());  // needs both a and c out: c first (a was touched later)
  EXPECT_EQ(dir->TotalBytes(), 0u);
  EXPECT_THAT(dir->Reserve(31), StatusIs(absl::StatusCode::kResourceExhausted,
                                         HasSubstr("exceeds the cache's limit of 30 bytes")));
}

}  // namespace
}  // namespace medprof
