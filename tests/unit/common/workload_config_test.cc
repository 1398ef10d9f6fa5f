#include "common/workload_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::config {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

v1::WorkloadConfig Defaults(std::string preset = "baseline") {
  v1::WorkloadConfig c;
  c.set_preset(preset);
  ApplyDefaults(&c);
  return c;
}

TEST(WorkloadConfigTest, DefaultsArePublishedModel) {
  auto c = Defaults();
  EXPECT_EQ(c.volume(), 128);
  EXPECT_EQ(c.base_channels(), 64);
  EXPECT_THAT(c.channel_mult(), ::testing::ElementsAre(1, 1, 2, 3, 4));
  EXPECT_EQ(c.groups(), 32);
  EXPECT_EQ(c.grad_accum(), 2);
  EXPECT_EQ(c.phase(), v1::PHASE_TRAIN);
  EXPECT_THAT(Validate(c), IsOk());
}

TEST(WorkloadConfigTest, ExplicitZeroVolumeIsRefusedNotDefaulted) {
  v1::WorkloadConfig c;
  c.set_preset("opt1");
  c.set_volume(0);
  ApplyDefaults(&c);
  EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                    AllOf(HasSubstr("volume"), HasSubstr("8..512"))));
}

TEST(WorkloadConfigTest, RefusalsNameFieldAndRange) {
  auto c = Defaults();
  c.set_volume(4096);
  EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                    AllOf(HasSubstr("volume: 4096"), HasSubstr("multiple of 16"))));
  c = Defaults();
  c.set_steps(-1);
  EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                    AllOf(HasSubstr("steps: -1"), HasSubstr("1..100000"))));
  c = Defaults("opt7");
  EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                    AllOf(HasSubstr("preset: unknown preset 'opt7'"), HasSubstr("opt12"))));
  c = Defaults();
  EXPECT_EQ(c.metrics_launches(), 3);
  c.set_metrics_launches(0);
  EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument, "metrics_launches: 0 is out of range (allowed 1..9)"));
  c.set_metrics_launches(9);
  EXPECT_THAT(Validate(c), IsOk());
  c = Defaults();
  c.set_volume(24);  // not a multiple of 16 with five levels
  EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("multiple of 16")));
}

TEST(WorkloadConfigTest, TooManyLevelsIsRefusedAfterDefaults) {
  // Defaults run before validation on every request (the request fuzzer's finding: 40 levels
  // and no attention_ds made the default attention level's shift undefined).
  for (int levels : {9, 33, 40, 200}) {
    v1::WorkloadConfig c;
    c.set_preset("opt2");
    for (int i = 0; i < levels; ++i) c.add_channel_mult(1);
    ApplyDefaults(&c);
    ASSERT_EQ(c.attention_ds_size(), 1);
    EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                      AllOf(HasSubstr(absl::StrCat("channel_mult (number of levels): ", levels)),
                                            HasSubstr("1..8"))));
  }
}

TEST(WorkloadConfigTest, TinyModelDefaultsGroupsToWidth) {
  v1::WorkloadConfig c;
  c.set_preset("baseline");
  c.set_base_channels(8);
  c.add_channel_mult(1);
  c.add_channel_mult(2);
  c.set_volume(16);
  ApplyDefaults(&c);
  EXPECT_EQ(c.groups(), 8);
  EXPECT_THAT(Validate(c), IsOk());
  c.set_groups(3);
  EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("groups: 3")));
}

TEST(WorkloadConfigTest, PresetFlagsAndOverrides) {
  auto c = Defaults("opt12");
  auto f = EffectiveFlags(c);
  EXPECT_TRUE(f.tf32);
  EXPECT_TRUE(f.channels_last);
  EXPECT_FALSE(f.bf16);
  c.set_tf32(false);
  EXPECT_FALSE(EffectiveFlags(c).tf32);
  EXPECT_TRUE(EffectiveFlags(Defaults("bf16")).bf16);
  EXPECT_FALSE(EffectiveFlags(Defaults("baseline")).tf32);
}

TEST(WorkloadConfigTest, AttentionFollowsMedDdpmsSixteenWideRule) {
  EXPECT_THAT(Defaults().attention_ds(), ::testing::ElementsAre(8));  // 128 / 16
  v1::WorkloadConfig brats;
  brats.set_preset("baseline");
  brats.set_depth(144);
  brats.set_height(192);
  brats.set_width(192);
  ApplyDefaults(&brats);
  EXPECT_THAT(brats.attention_ds(), ::testing::ElementsAre(0));  // 192 / 16 = 12: middle block only
  EXPECT_THAT(Validate(brats), IsOk());
  auto c = Defaults();
  c.clear_attention_ds();
  c.add_attention_ds(0);
  c.add_attention_ds(8);
  EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                    AllOf(HasSubstr("attention_ds: 0"), HasSubstr("a single 0"))));
}

TEST(WorkloadConfigTest, NonCubicDims) {
  auto c = Defaults();
  c.set_depth(144);
  c.set_height(192);
  c.set_width(192);
  auto d = VolumeDims(c);
  EXPECT_EQ(d.d, 144);
  EXPECT_EQ(d.h, 192);
  EXPECT_EQ(d.w, 192);
  EXPECT_THAT(Validate(c), IsOk());
}

// A user model: named by a SHA-256, a base name and a size; its volume is not held to Med-DDPM's
// multiple of 16 (the worker's dry run finds what the model takes).
TEST(WorkloadConfigTest, AUserModelIsNamedByItsContentAndKeepsItsOwnVolumeRule) {
  auto c = Defaults();
  c.set_volume(24);
  EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("volume: 24")));
  v1::ModelRef* m = c.mutable_model();
  m->set_sha256(std::string(64, 'a'));
  m->set_file_name("unet.pt");
  m->set_size_bytes(1000);
  EXPECT_THAT(Validate(c), IsOk());
  c.set_volume(4);
  EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("volume: 4 is out of range")));
  c.set_volume(24);
  m->set_sha256(std::string(64, 'A'));
  EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("model.sha256: 'AAAA")));
  m->set_sha256(std::string(64, 'a'));
  m->set_file_name("dir/unet.pt");
  EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model.file_name: 'dir/unet.pt'")));
  m->set_file_name("unet.pt");
  m->set_size_bytes(0);
  EXPECT_THAT(Validate(c), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model.size_bytes: 0")));
}

}  // namespace
}  // namespace medprof::config
