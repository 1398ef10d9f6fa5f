// DbLock: one holder per database file; a second is refused with the holder's PID; the lock
// goes with its holder (destructor here, process exit in tests/integration/hardening_test.cc).
#include "server/store/db_lock.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::server {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

std::string TempDb() {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("medprof-dblock-", getpid());
  std::filesystem::create_directories(dir);
  return (dir / "medprof.db").string();
}

TEST(DbLock, ASecondHolderIsRefusedWithTheFirstHoldersPid) {
  const std::string db = TempDb();
  auto first = DbLock::Acquire(db);
  ASSERT_THAT(first, IsOk());
  ASSERT_NE(*first, nullptr);
  std::ifstream in(DbLockPath(db));
  std::string pid;
  in >> pid;
  EXPECT_EQ(pid, std::to_string(getpid()));

  EXPECT_THAT(DbLock::Acquire(db),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(absl::StrCat("in use by another medprof-server (PID ", getpid(), ", lock file ",
                                              DbLockPath(db)))));
  first->reset();
  EXPECT_THAT(DbLock::Acquire(db), IsOk()) << "released with its holder";
  std::filesystem::remove_all(std::filesystem::path(db).parent_path());
}

TEST(DbLock, InMemoryDatabasesNeedNone) {
  auto lock = DbLock::Acquire(":memory:");
  ASSERT_THAT(lock, IsOk());
  EXPECT_EQ(*lock, nullptr);
}

TEST(DbLock, AnUncreatableLockFileIsNamed) {
  EXPECT_THAT(DbLock::Acquire("/nonexistent-dir/medprof.db"),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("lock file /nonexistent-dir/medprof.db.lock: open failed: No such file")));
}

}  // namespace
}  // namespace medprof::server
