#include "common/result_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof {
namespace {

using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

std::string TempPath(const char* name) {
  return std::string(::testing::TempDir()) + "/" + name + std::to_string(::getpid());
}

TEST(ResultStreamTest, RoundTripsRecordsInOrder) {
  const std::string path = TempPath("rt");
  {
    auto w = ResultWriter::OpenFile(path);
    ASSERT_TRUE(w.ok()) << w.status();
    for (int i = 0; i < 3; ++i) {
      v1::WorkerMessage m;
      m.mutable_step()->set_step(i);
      m.mutable_step()->set_wall_ns(1000 + i);
      ASSERT_TRUE((*w)->Write(m).ok());
    }
  }
  auto r = ResultReader::OpenFile(path);
  ASSERT_TRUE(r.ok());
  v1::WorkerMessage m;
  for (int i = 0; i < 3; ++i) {
    auto more = (*r)->Next(&m);
    ASSERT_TRUE(more.ok() && *more);
    EXPECT_EQ(m.step().step(), i);
    EXPECT_EQ(m.step().wall_ns(), 1000 + i);
  }
  auto end = (*r)->Next(&m);
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(*end);
  std::remove(path.c_str());
}

TEST(ResultStreamTest, TruncatedRecordIsDataLoss) {
  const std::string path = TempPath("trunc");
  v1::WorkerMessage m;
  m.mutable_progress()->set_message("hello world");
  std::string rec = EncodeDelimited(m);
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(rec.data(), 1, rec.size() - 3, f);
  std::fclose(f);
  auto r = ResultReader::OpenFile(path);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT((*r)->Next(&m), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("cut short")));
  std::remove(path.c_str());
}

TEST(ResultStreamTest, GarbageIsRefused) {
  const std::string path = TempPath("garbage");
  FILE* f = std::fopen(path.c_str(), "wb");
  const unsigned char bytes[] = {0x03, 0xff, 0xff, 0xff};
  std::fwrite(bytes, 1, sizeof(bytes), f);
  std::fclose(f);
  auto r = ResultReader::OpenFile(path);
  v1::WorkerMessage m;
  EXPECT_THAT((*r)->Next(&m), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("record 1")));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace medprof
