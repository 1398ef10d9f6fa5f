// ModelCache (agent/agent/model_cache.h): fetch once, resume a broken or interrupted fetch from
// the bytes held, refuse bytes that do not hash to the name, evict the least recently used.
#include "agent/agent/model_cache.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/unit/agent/test_files.h"

namespace medprof::agent {
namespace {

using ::medprof::agent::testing::FreshDir;
using ::medprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::ModelRef Ref(const std::string& bytes) {
  v1::ModelRef m;
  m.set_sha256(Sha256Hex(bytes));
  m.set_file_name("denoiser.pt");
  m.set_size_bytes(bytes.size());
  return m;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A server holding `bytes`: serves from the offset asked in 100-byte pieces, stopping with
// `fail` after `serve_at_most` bytes (0 = no limit). Records the offsets asked.
struct Server {
  std::string bytes;
  uint64_t serve_at_most = 0;
  absl::Status fail = absl::UnavailableError("FetchModel: connection reset");
  std::vector<uint64_t> asked;

  ModelFetch Fetch() {
    return [this](uint64_t offset, const ModelSink& sink) -> absl::Status {
      asked.push_back(offset);
      uint64_t sent = 0;
      for (uint64_t at = offset; at < bytes.size(); at += 100) {
        if (serve_at_most > 0 && sent >= serve_at_most) return fail;
        const std::string piece = bytes.substr(at, 100);
        if (absl::Status s = sink(at, piece); !s.ok()) return s;
        sent += piece.size();
      }
      return absl::OkStatus();
    };
  }
};

TEST(ModelCache, FetchesOnceAndServesTheVerifiedCopyAfterwards) {
  const std::string dir = FreshDir("model-cache");
  auto cache = ModelCache::Open(dir, 10000);
  ASSERT_TRUE(cache.ok()) << cache.status();
  Server server{std::string(750, 'a') + "end"};
  auto path = (*cache)->Get(Ref(server.bytes), server.Fetch());
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(ReadAll(*path), server.bytes);
  path = (*cache)->Get(Ref(server.bytes), server.Fetch());
  ASSERT_TRUE(path.ok());
  EXPECT_THAT(server.asked, ElementsAre(0u));
}

TEST(ModelCache, ABrokenStreamResumesWhereItStopped) {
  auto cache = ModelCache::Open(FreshDir("model-cache"), 10000);
  ASSERT_TRUE(cache.ok());
  Server server{std::string(800, 'b'), 300};
  auto path = (*cache)->Get(Ref(server.bytes), server.Fetch());
  ASSERT_TRUE(path.ok()) << path.status();
  // Each attempt serves 300 bytes before the stream breaks; the third reaches the end.
  EXPECT_THAT(server.asked, ElementsAre(0u, 300u, 600u));
}

TEST(ModelCache, GivesUpAfterTheAttemptsAndAnInterruptedFetchResumesAfterARestart) {
  const std::string dir = FreshDir("model-cache");
  Server server{std::string(1000, 'c'), 100};
  {
    auto cache = ModelCache::Open(dir, 10000);
    ASSERT_TRUE(cache.ok());
    EXPECT_THAT((*cache)->Get(Ref(server.bytes), server.Fetch()).status(),
                StatusIs(absl::StatusCode::kUnavailable, HasSubstr("connection reset")));
    EXPECT_THAT(server.asked, ElementsAre(0u, 100u, 200u));
  }
  server.serve_at_most = 0;
  server.asked.clear();
  auto cache = ModelCache::Open(dir, 10000);  // the agent restarted
  ASSERT_TRUE(cache.ok());
  auto path = (*cache)->Get(Ref(server.bytes), server.Fetch());
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_THAT(server.asked, ElementsAre(300u));
  EXPECT_EQ(ReadAll(*path), server.bytes);
}

TEST(ModelCache, ARefusalIsNotRetriedAndWrongBytesAreNotKept) {
  const std::string dir = FreshDir("model-cache");
  auto cache = ModelCache::Open(dir, 10000);
  ASSERT_TRUE(cache.ok());
  Server refusing{std::string(500, 'd'), 1, absl::NotFoundError("FetchModel: sha256: project 'p' holds no model")};
  EXPECT_THAT((*cache)->Get(Ref(refusing.bytes), refusing.Fetch()).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("holds no model")));
  EXPECT_EQ(refusing.asked.size(), 1u);

  Server lying{std::string(500, 'e')};
  v1::ModelRef claimed = Ref(std::string(500, 'f'));
  EXPECT_THAT((*cache)->Get(claimed, lying.Fetch()).status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr(claimed.sha256())));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir) / claimed.sha256()));
}

TEST(ModelCache, TheLeastRecentlyUsedModelMakesRoom) {
  auto cache = ModelCache::Open(FreshDir("model-cache"), 1000);
  ASSERT_TRUE(cache.ok());
  Server a{std::string(450, 'a')}, b{std::string(450, 'b')}, c{std::string(450, 'c')};
  ASSERT_TRUE((*cache)->Get(Ref(a.bytes), a.Fetch()).ok());
  ASSERT_TRUE((*cache)->Get(Ref(b.bytes), b.Fetch()).ok());
  ASSERT_TRUE((*cache)->Get(Ref(a.bytes), a.Fetch()).ok());  // a used again: b is the oldest
  ASSERT_TRUE((*cache)->Get(Ref(c.bytes), c.Fetch()).ok());
  EXPECT_EQ((*cache)->TotalBytes(), 900u);
  ASSERT_TRUE((*cache)->Get(Ref(a.bytes), a.Fetch()).ok());
  ASSERT_TRUE((*cache)->Get(Ref(b.bytes), b.Fetch()).ok());
  EXPECT_EQ(a.asked.size(), 1u);
  EXPECT_EQ(b.asked.size(), 2u);  // evicted, fetched again
  EXPECT_THAT((*cache)->Get(Ref(std::string(1001, 'x')), a.Fetch()).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, ::testing::_));
}

}  // namespace
}  // namespace medprof::agent
