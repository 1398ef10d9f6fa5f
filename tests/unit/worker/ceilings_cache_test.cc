// CeilingsCache (agent/worker/ceilings_cache.h): one measurement per node and GPU, reused while the
// driver, clocks and power cap stay the same, measured again when any changes or the file is corrupt.
#include "agent/worker/ceilings_cache.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::worker {
namespace {

using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

class CeilingsCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "medprof-ceilings-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static CeilingsKey Key() { return CeilingsKey{"GPU-0a1b2c3d-0000-1111-2222-333344445555", "580.95", 1980, 3201, 700}; }

  // A measurement that counts its calls and returns DRAM = 4.1e12 * call number.
  CeilingsMeasurement Measure() {
    return [this]() -> absl::StatusOr<v1::Ceilings> {
      ++measured_;
      v1::Ceilings c;
      v1::Ceiling* dram = c.add_ceilings();
      dram->set_name("dram");
      dram->set_measured(4.1e12 * measured_);
      dram->set_method("device-to-device copy");
      return c;
    };
  }

  std::string dir_;
  int measured_ = 0;
};

TEST_F(CeilingsCacheTest, MeasuresOnceThenHitsWhileTheKeyStaysTheSame) {
  const CeilingsCache cache(dir_ + "/cache");  // created on the first store
  std::string why;
  auto first = cache.GetOrMeasure(Key(), Measure(), &why);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(measured_, 1);
  EXPECT_THAT(why, HasSubstr("no cached ceilings"));
  EXPECT_FALSE(first->from_cache());
  EXPECT_EQ(first->driver_version(), "580.95");
  EXPECT_EQ(first->power_limit_w(), 700u);
  auto second = cache.GetOrMeasure(Key(), Measure(), &why);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(measured_, 1) << "not measured again";
  EXPECT_EQ(why, "");
  EXPECT_TRUE(second->from_cache());
  EXPECT_EQ(second->measure_ms(), 0);
  ASSERT_EQ(second->ceilings_size(), 1);
  EXPECT_DOUBLE_EQ(second->ceilings(0).measured(), 4.1e12);
  EXPECT_EQ(second->ceilings(0).method(), "device-to-device copy");
}

TEST_F(CeilingsCacheTest, ADriverClockOrPowerChangeMeasuresAgain) {
  const CeilingsCache cache(dir_);
  std::string why;
  ASSERT_TRUE(cache.GetOrMeasure(Key(), Measure(), &why).ok());
  struct Change {
    std::function<void(CeilingsKey*)> apply;
    const char* says;
  };
  const std::vector<Change> changes = {
      {[](CeilingsKey* k) { k->driver_version = "590.10"; }, "driver 580.95 -> 590.10"},
      {[](CeilingsKey* k) { k->sm_clock_mhz = 1755; }, "SM clock 1980 -> 1755 MHz"},
      {[](CeilingsKey* k) { k->mem_clock_mhz = 2619; }, "memory clock 3201 -> 2619 MHz"},
      {[](CeilingsKey* k) { k->power_limit_w = 500; }, "power cap 700 -> 500 W"}};
  int expected_measurements = 1;
  for (const Change& c : changes) {
    CeilingsKey changed = Key();
    c.apply(&changed);
    EXPECT_THAT(cache.Load(changed).status(), StatusIs(absl::StatusCode::kNotFound, HasSubstr(c.says)));
    auto again = cache.GetOrMeasure(changed, Measure(), &why);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(measured_, ++expected_measurements) << c.says;
    EXPECT_THAT(why, HasSubstr(c.says));
    // The new setting is what the file now holds: the next run hits, the old setting misses.
    EXPECT_TRUE(cache.Load(changed).ok()) << c.says;
    ASSERT_TRUE(cache.GetOrMeasure(Key(), Measure(), &why).ok());
    EXPECT_EQ(measured_, ++expected_measurements) << c.says;
  }
}

TEST_F(CeilingsCacheTest, ACorruptFileIsMeasuredAgainAndReplaced) {
  const CeilingsCache cache(dir_);
  auto path = cache.PathFor(Key());
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(*path, dir_ + "/ceilings-v2-GPU-0a1b2c3d-0000-1111-2222-333344445555.pb");
  std::ofstream(*path) << "\xff\xff\xff not a protobuf";
  EXPECT_THAT(cache.Load(Key()).status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr(*path)));
  std::string why;
  auto m = cache.GetOrMeasure(Key(), Measure(), &why);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(measured_, 1);
  EXPECT_THAT(why, HasSubstr("not a Ceilings message"));
  auto hit = cache.Load(Key());
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_DOUBLE_EQ(hit->ceilings(0).measured(), 4.1e12);
  // An empty file parses as an empty message: no ceilings is corrupt too.
  std::ofstream(*path, std::ios::trunc).flush();
  EXPECT_THAT(cache.Load(Key()).status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("0 bytes")));
}

TEST_F(CeilingsCacheTest, AFailedMeasurementIsReturnedAndNothingIsCached) {
  const CeilingsCache cache(dir_);
  std::string why;
  auto failed = cache.GetOrMeasure(
      Key(), []() -> absl::StatusOr<v1::Ceilings> { return absl::ResourceExhaustedError("cudaMalloc: out of memory"); },
      &why);
  EXPECT_THAT(failed.status(), StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("out of memory")));
  EXPECT_THAT(cache.Load(Key()).status(), StatusIs(absl::StatusCode::kNotFound, HasSubstr("no cached ceilings")));
}

TEST_F(CeilingsCacheTest, AUuidThatIsNoFileNameIsRefused) {
  const CeilingsCache cache(dir_);
  for (const char* uuid : {"", "../../etc/passwd", "GPU a"}) {
    CeilingsKey k = Key();
    k.gpu_uuid = uuid;
    EXPECT_THAT(cache.PathFor(k).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gpu_uuid"))) << uuid;
    std::string why;
    EXPECT_THAT(cache.GetOrMeasure(k, Measure(), &why).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gpu_uuid")));
  }
  EXPECT_EQ(measured_, 0);
}

// A file of the previous format (kFormat 1: the L2 roof measured as a read+write copy) sits in the
// directory with the same key: it is not read, the ceilings are measured again under the new name.
TEST_F(CeilingsCacheTest, AFileOfAnOlderFormatIsNotRead) {
  const CeilingsCache cache(dir_);
  std::string why;
  ASSERT_TRUE(cache.GetOrMeasure(Key(), Measure(), &why).ok());
  auto path = cache.PathFor(Key());
  ASSERT_TRUE(path.ok());
  std::filesystem::rename(*path, dir_ + "/ceilings-v1-GPU-0a1b2c3d-0000-1111-2222-333344445555.pb");
  auto again = cache.GetOrMeasure(Key(), Measure(), &why);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(measured_, 2);
  EXPECT_FALSE(again->from_cache());
}

}  // namespace
}  // namespace medprof::worker
