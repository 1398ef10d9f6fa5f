// agent/nvml: Library::Load where libnvidia-ml is absent, where the file is not NVML, and on the
// fake NVML of the Slurm tests (inventory entry points only, no clocks); Session's Init and
// Shutdown; and that agent/nvml is the only place in agent/ that opens a library.
#include "agent/nvml/nvml.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::nvml {
namespace {

using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

constexpr const char* kFake = MEDPROF_FAKE_NVML;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(NvmlLibraryTest, AbsentLibraryIsNotFoundWithItsName) {
  absl::StatusOr<std::unique_ptr<Library>> lib =
      Library::Load(kInventory, "libnvidia-ml-medprof-absent.so.1");
  EXPECT_THAT(lib, StatusIs(absl::StatusCode::kNotFound,
                            HasSubstr("no NVIDIA driver: cannot load libnvidia-ml-medprof-absent.so.1 (")));
}

TEST(NvmlLibraryTest, LibraryWithoutNvmlNamesEveryMissingEntryPoint) {
  // libz is present wherever this builds (protobuf needs it) and has no NVML entry points.
  absl::StatusOr<std::unique_ptr<Library>> lib = Library::Load(kInventory, "libz.so.1");
  EXPECT_THAT(lib, StatusIs(absl::StatusCode::kUnavailable,
                            HasSubstr("libz.so.1 lacks the inventory entry points (driver too old?): "
                                      "nvmlInit_v2, nvmlShutdown, nvmlErrorString, ")));
  EXPECT_THAT(lib, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("nvmlDeviceGetMemoryInfo")));
  EXPECT_THAT(lib,
              StatusIs(absl::StatusCode::kUnavailable, ::testing::Not(HasSubstr("nvmlDeviceGetEccMode"))));
}

TEST(NvmlLibraryTest, FakeNvmlServesTheInventoryButNotTheClocks) {
  absl::StatusOr<std::unique_ptr<Library>> inventory = Library::Load(kInventory, kFake);
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  EXPECT_NE((*inventory)->api().GetCount, nullptr);
  EXPECT_EQ((*inventory)->api().GetMigMode, nullptr);  // optional, absent from the fake
  EXPECT_EQ((*inventory)->api().GetClockInfo, nullptr);
  EXPECT_THAT(Library::Load(kClocks, kFake),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr(std::string(kFake) +
                                 " lacks the clock entry points (driver too old?): nvmlDeviceGetClockInfo")));
}

TEST(NvmlSessionTest, InitFailureNamesNvmlsError) {
  ::unsetenv("MEDPROF_FAKE_NVML_GPUS");  // the fake then answers like a machine without a driver
  absl::StatusOr<std::unique_ptr<Library>> lib = Library::Load(kInventory, kFake);
  ASSERT_TRUE(lib.ok()) << lib.status();
  EXPECT_THAT(Session::Start((*lib)->api()),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("NVML Init() failed: Driver Not Loaded")));
}

TEST(NvmlSessionTest, StartedSessionReadsTheFakeGpus) {
  ::setenv("MEDPROF_FAKE_NVML_GPUS", "2", 1);
  absl::StatusOr<std::unique_ptr<Library>> lib = Library::Load(kInventory, kFake);
  ASSERT_TRUE(lib.ok()) << lib.status();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Start((*lib)->api());
  ASSERT_TRUE(session.ok()) << session.status();
  unsigned count = 0;
  EXPECT_EQ((*lib)->api().GetCount(&count), kSuccess);
  EXPECT_EQ(count, 2u);
  ::unsetenv("MEDPROF_FAKE_NVML_GPUS");
}

// The agent's inventory and the worker's clock sampling both go through agent/nvml: no other
// source in agent/ opens a library or names an NVML symbol (a "nvml..." string literal, as
// dlsym takes), and both users include agent/nvml/nvml.h.
TEST(NvmlUsersTest, OnlyAgentNvmlLoadsNvml) {
  namespace fs = std::filesystem;
  const std::regex source(R"(\.(h|cc)$)");
  const std::regex symbol_literal(R"("nvml[A-Z]\w*")");
  const fs::path root = fs::path(MEDPROF_SOURCE_DIR) / "agent";
  int sources = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(entry.path(), root).generic_string();
    if (!entry.is_regular_file() || !std::regex_search(rel, source) || rel.rfind("nvml/", 0) == 0) continue;
    ++sources;
    const std::string text = ReadFile(entry.path());
    EXPECT_EQ(text.find("dlopen("), std::string::npos) << "agent/" << rel;
    EXPECT_FALSE(std::regex_search(text, symbol_literal)) << "agent/" << rel;
  }
  EXPECT_GT(sources, 20);
  for (const char* user : {"agent/nvml_probe.h", "worker/gpu_clocks.h"}) {
    EXPECT_NE(ReadFile(root / user).find("#include \"agent/nvml/nvml.h\""), std::string::npos) << user;
  }
}

}  // namespace
}  // namespace medprof::nvml
