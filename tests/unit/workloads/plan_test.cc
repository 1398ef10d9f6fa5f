// Torch-free parts of the Med-DDPM workload: the architecture plan and its parameter counts
// (spec/meddpm.md §3.1), the memory estimate (§3.3), the cosine schedule (§2.1), the option
// rules, and the deterministic generator behind every synthetic input (checksums pinned here).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "workloads/meddpm/architecture.h"
#include "workloads/ddpm/schedule.h"
#include "workloads/ddpm/synthetic.h"
#include "workloads/meddpm/workload.h"

namespace medprof::meddpm {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;
using ddpm::CosineSchedule;
using ddpm::Fnv1a64;
using ddpm::MakeSubject;
using ddpm::NormalVolume;
using ddpm::Rng;
using ddpm::Schedule;
using ddpm::SplitMix64;
using ddpm::Stream;
using ddpm::Subject;
using ddpm::Timesteps;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

ModelOptions BratsModel() {
  ModelOptions m;
  m.in_channels = 8;
  m.out_channels = 4;
  m.res_blocks = 2;
  m.attention_ds = {};  // ds = 192/16 = 12 never occurs: attention only in the middle block
  return m;
}

// ---------------------------------------------------------------- parameters

TEST(PlanTest, ParameterCountAtDefaultsIsThePublishedModel) {
  EXPECT_EQ(CountParameters(ModelOptions{}), 40226433);
}

TEST(PlanTest, ParameterCountOfTheBratsVariant) { EXPECT_EQ(CountParameters(BratsModel()), 57562564); }

TEST(PlanTest, BreakdownMatchesSpecTable) {
  const std::vector<ParameterGroup> groups = ParameterBreakdown(MakePlan(ModelOptions{}));
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"time MLP", 82432},  {"input conv", 5248}, {"enc L0", 348672},  {"enc L1", 348672},
      {"enc L2", 1147904},  {"enc L3", 2878144},  {"enc L4", 3213184}, {"middle", 7476224},
      {"dec L4", 12326016}, {"dec L3", 7514304},  {"dec L2", 3230336}, {"dec L1", 939456},
      {"dec L0", 713984},   {"head", 1857}};
  ASSERT_EQ(groups.size(), expected.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    EXPECT_EQ(groups[i].name, expected[i].first);
    EXPECT_EQ(groups[i].parameters, expected[i].second) << groups[i].name;
  }
}

TEST(PlanTest, LayoutMatchesSpecLayerList) {
  const UNetPlan p = MakePlan(ModelOptions{});
  // §1.3: 10 input blocks (conv, 5 ResBlocks, 4 downsamples), 10 output blocks.
  ASSERT_EQ(p.input_blocks.size(), 10u);
  ASSERT_EQ(p.output_blocks.size(), 10u);
  EXPECT_EQ(p.time_embed_dim, 256);
  // Input block 7: ResBlock 128 -> 192 + attention at 16^3 (level 3).
  ASSERT_EQ(p.input_blocks[7].layers.size(), 2u);
  EXPECT_EQ(p.input_blocks[7].layers[0].in_channels, 128);
  EXPECT_EQ(p.input_blocks[7].layers[0].out_channels, 192);
  EXPECT_EQ(p.input_blocks[7].layers[1].kind, LayerKind::kAttention);
  EXPECT_EQ(p.input_blocks[7].level, 3);
  // Decoder: (in -> out) of every first layer, and the upsample positions.
  const std::vector<std::pair<int, int>> io = {{512, 256}, {448, 256}, {448, 192}, {320, 192}, {320, 128},
                                               {192, 128}, {192, 64},  {128, 64},  {128, 64},  {128, 64}};
  const std::set<size_t> with_upsample = {1, 3, 5, 7};
  const std::set<size_t> with_attention = {2, 3};
  for (size_t i = 0; i < io.size(); ++i) {
    const Block& b = p.output_blocks[i];
    EXPECT_EQ(b.layers[0].in_channels, io[i].first) << "O." << i;
    EXPECT_EQ(b.layers[0].out_channels, io[i].second) << "O." << i;
    const bool up = b.layers.back().kind == LayerKind::kUpsample;
    EXPECT_EQ(up, with_upsample.count(i) == 1) << "O." << i;
    const bool attn = b.layers.size() > 1 && b.layers[1].kind == LayerKind::kAttention;
    EXPECT_EQ(attn, with_attention.count(i) == 1) << "O." << i;
  }
  EXPECT_EQ(p.head_channels, 64);
}

// ---------------------------------------------------------------- schedule

TEST(ScheduleTest, CosineBetasMatchStoredReferenceBetas) {
  const Schedule s = CosineSchedule();
  ASSERT_EQ(s.betas.size(), 250u);
  const std::map<int, double> expected = {
      {0, 1.9427e-4}, {1, 2.7199e-4}, {247, 0.55553}, {248, 0.74999}, {249, 0.999}};
  for (const auto& [i, beta] : expected) {
    EXPECT_LE(std::abs(s.betas[i] - beta) / beta, 1e-4) << "beta_" << i << " = " << s.betas[i];
  }
  EXPECT_EQ(s.betas[249], 0.999);  // clipped exactly
}

TEST(ScheduleTest, DerivedBuffersFollowTheirDefinitions) {
  const Schedule s = CosineSchedule();
  EXPECT_EQ(s.alphas_cumprod_prev[0], 1.0);
  EXPECT_DOUBLE_EQ(s.alphas_cumprod[0], 1.0 - s.betas[0]);
  EXPECT_DOUBLE_EQ(s.alphas_cumprod_prev[10], s.alphas_cumprod[9]);
  // t = 0: x0 is returned exactly (coef1 = 1, coef2 = 0) and the variance is 0 (log clipped).
  EXPECT_DOUBLE_EQ(s.posterior_mean_coef1[0], 1.0);
  EXPECT_EQ(s.posterior_mean_coef2[0], 0.0);
  EXPECT_EQ(s.posterior_variance[0], 0.0);
  EXPECT_DOUBLE_EQ(s.posterior_log_variance_clipped[0], std::log(1e-20));
  const int t = 123;
  const double abar = s.alphas_cumprod[t], prev = s.alphas_cumprod[t - 1];
  EXPECT_DOUBLE_EQ(s.posterior_variance[t], s.betas[t] * (1 - prev) / (1 - abar));
  EXPECT_DOUBLE_EQ(s.sqrt_recipm1_alphas_cumprod[t], std::sqrt(1 / abar - 1));
  EXPECT_NEAR(s.sqrt_alphas_cumprod[t] * s.sqrt_alphas_cumprod[t] +
                  s.sqrt_one_minus_alphas_cumprod[t] * s.sqrt_one_minus_alphas_cumprod[t],
              1.0, 1e-15);
}

// ---------------------------------------------------------------- memory estimate

TEST(EstimateTest, TrainingAtDefaultsIsNearTheMeasuredPeak) {
  WorkloadOptions o;  // 128^3, train, fp32, grad_accum 2
  const MemoryEstimate e = EstimateMemory(o);
  // spec §3.3 measured 18.69 GiB for the PyTorch peer.
  EXPECT_NEAR(e.total_bytes / kGiB, 18.69, 0.5);
  EXPECT_EQ(e.state_bytes, 40226433ull * 4 * 5);  // weights, grads, Adam m/v, EMA
  EXPECT_EQ(EstimatePeakMemoryBytes(o), e.total_bytes);
  o.grad_accum = 1;  // gradients are reset to none between steps
  EXPECT_EQ(EstimateMemory(o).state_bytes, 40226433ull * 4 * 4);
}

TEST(EstimateTest, ForwardAtDefaultsIsNearTheMeasuredPeak) {
  WorkloadOptions o;
  o.phase = Phase::kForward;
  EXPECT_NEAR(EstimatePeakMemoryBytes(o) / kGiB, 4.55, 0.25);  // spec §3.3: 4.55 GiB fp32
  o.bf16 = true;
  EXPECT_LT(EstimatePeakMemoryBytes(o) / kGiB, 4.55);
}

TEST(EstimateTest, ScalesWithVolumeAndBatchAndBrats) {
  WorkloadOptions o;
  const uint64_t base = EstimatePeakMemoryBytes(o);
  o.batch = 2;
  EXPECT_GT(EstimatePeakMemoryBytes(o), base * 19 / 10);
  o.batch = 1;
  o.depth = o.height = o.width = 64;
  EXPECT_LT(EstimatePeakMemoryBytes(o), base / 6);
  WorkloadOptions brats;
  brats.model = BratsModel();
  brats.depth = 144;
  brats.height = brats.width = 192;
  // The authors: BraTS training needs an 80 GB A100; inference measured 16.68 GB (issue #4,
  // the process's footprint: CUDA context and allocator cache on top of the allocated peak
  // this estimates).
  EXPECT_GT(EstimatePeakMemoryBytes(brats) / kGiB, 60.0);
  EXPECT_LT(EstimatePeakMemoryBytes(brats) / kGiB, 80.0);
  brats.phase = Phase::kForward;
  EXPECT_GT(EstimatePeakMemoryBytes(brats) / 1e9, 12.0);
  EXPECT_LT(EstimatePeakMemoryBytes(brats) / 1e9, 16.68);
}

TEST(EstimateTest, InvalidModelEstimatesZero) {
  WorkloadOptions o;
  o.model.groups = 7;
  EXPECT_EQ(EstimatePeakMemoryBytes(o), 0u);
  EXPECT_EQ(CountParameters(o.model), 0);
}

// ---------------------------------------------------------------- options

TEST(OptionsTest, DefaultsAndBratsAreValid) {
  EXPECT_THAT(ValidateOptions(WorkloadOptions{}), IsOk());
  WorkloadOptions brats;
  brats.model = BratsModel();
  brats.depth = 144;
  brats.height = brats.width = 192;
  EXPECT_THAT(ValidateOptions(brats), IsOk());
}

TEST(OptionsTest, RefusalsNameTheFieldAndTheRange) {
  WorkloadOptions o;
  o.depth = 20;  // not a multiple of 16 with 5 levels
  EXPECT_THAT(ValidateOptions(o), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("depth: 20 is out of range (allowed 8..512, "
                                                     "a multiple of 16")));
  o = WorkloadOptions{};
  o.model.base_channels = 8;
  o.model.groups = 32;
  EXPECT_THAT(ValidateOptions(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("groups: 32 does not divide")));
  o = WorkloadOptions{};
  o.model.out_channels = 4;
  EXPECT_THAT(ValidateOptions(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out_channels: 4 exceeds")));
  o = WorkloadOptions{};
  o.sample_steps = 251;
  EXPECT_THAT(ValidateOptions(o), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("sample_steps: 251 is out of range (allowed 1..250)")));
  o = WorkloadOptions{};
  o.learning_rate = 0;
  EXPECT_THAT(ValidateOptions(o), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("learning_rate")));
  o = WorkloadOptions{};
  o.model.attention_ds = {3};
  EXPECT_THAT(ValidateOptions(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attention_ds: 3 is out of range")));
  o = WorkloadOptions{};
  o.model.channel_mult = {};
  EXPECT_THAT(ValidateOptions(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("channel_mult (number of levels)")));
}

// ---------------------------------------------------------------- generator and inputs

TEST(GeneratorTest, SplitMix64KnownAnswers) {
  // Reference outputs of Vigna's splitmix64.c seeded with 1234567.
  uint64_t state = 1234567;
  EXPECT_EQ(SplitMix64(&state), 6457827717110365317ull);
  EXPECT_EQ(SplitMix64(&state), 3203168211198807973ull);
  EXPECT_EQ(SplitMix64(&state), 9817491932198370423ull);
}

TEST(GeneratorTest, StreamsAreIndependentOfDrawOrder) {
  Rng a(7, Stream::kNoise, 3), b(7, Stream::kNoise, 3), c(7, Stream::kNoise, 4);
  EXPECT_EQ(a.Next(), b.Next());
  EXPECT_NE(Rng(7, Stream::kNoise, 3).Next(), c.Next());
  EXPECT_NE(Rng(7, Stream::kNoise, 3).Next(), Rng(7, Stream::kTimestep, 3).Next());
  EXPECT_NE(Rng(7, Stream::kNoise, 3).Next(), Rng(8, Stream::kNoise, 3).Next());
  EXPECT_EQ(NormalVolume(1, Stream::kNoise, 5, 100), NormalVolume(1, Stream::kNoise, 5, 100));
}

TEST(GeneratorTest, NormalsHaveUnitMomentsAndUniformsTheirRange) {
  const std::vector<float> v = NormalVolume(0, Stream::kNoise, 0, 200000);
  double mean = 0, sq = 0;
  for (float x : v) {
    mean += x;
    sq += static_cast<double>(x) * x;
  }
  mean /= v.size();
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sq / v.size() - mean * mean, 1.0, 0.01);
  Rng r(1);
  for (int i = 0; i < 10000; ++i) {
    const double u = r.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const int64_t k = r.Below(250);
    ASSERT_GE(k, 0);
    ASSERT_LT(k, 250);
  }
}

TEST(SyntheticTest, SubjectIsBrainShapedAndNormalised) {
  const Subject s = MakeSubject(0, 0, 32, 40, 48, 1, 2);
  const int64_t voxels = 32 * 40 * 48;
  ASSERT_EQ(s.image.size(), static_cast<size_t>(voxels));
  ASSERT_EQ(s.mask.size(), static_cast<size_t>(2 * voxels));
  int64_t brain = 0, tumour = 0;
  for (int64_t v = 0; v < voxels; ++v) {
    ASSERT_TRUE(s.mask[v] == -1.0f || s.mask[v] == 1.0f);
    ASSERT_TRUE(s.mask[voxels + v] == -1.0f || s.mask[voxels + v] == 1.0f);
    ASSERT_FALSE(s.mask[v] == 1.0f && s.mask[voxels + v] == 1.0f) << "one-hot";
    brain += s.labels[v] == 1;
    tumour += s.labels[v] == 2;
    ASSERT_GE(s.image[v], -1.0f);
    ASSERT_LE(s.image[v], 1.0f);
  }
  // An ellipsoid of semi-axes ~0.38/0.34/0.40 of the box: ~4/3 pi abc ~ 0.2 of the volume.
  EXPECT_GT(static_cast<double>(brain + tumour) / voxels, 0.12);
  EXPECT_LT(static_cast<double>(brain + tumour) / voxels, 0.30);
  EXPECT_GT(tumour, 0);
  EXPECT_LT(tumour, brain / 4);
  // Per-slice min-max: every depth slice spans exactly [-1, 1].
  const int64_t plane = 40 * 48;
  for (int d = 0; d < 32; ++d) {
    const auto [lo, hi] = std::minmax_element(s.image.begin() + d * plane, s.image.begin() + (d + 1) * plane);
    EXPECT_EQ(*lo, -1.0f) << "slice " << d;
    EXPECT_EQ(*hi, 1.0f) << "slice " << d;
  }
}

TEST(SyntheticTest, BratsStyleMasksSplitTheTumour) {
  const Subject s = MakeSubject(3, 0, 32, 32, 32, 4, 4);
  const int64_t voxels = 32 * 32 * 32;
  std::vector<int64_t> on(4, 0);
  for (int c = 0; c < 4; ++c) {
    for (int64_t v = 0; v < voxels; ++v) on[c] += s.mask[c * voxels + v] == 1.0f;
  }
  for (int c = 0; c < 4; ++c) EXPECT_GT(on[c], 0) << "mask channel " << c;
  for (int64_t v = 0; v < voxels; ++v) {
    int hot = 0;
    for (int c = 0; c < 4; ++c) hot += s.mask[c * voxels + v] == 1.0f;
    ASSERT_EQ(hot, s.labels[v] == 0 ? 0 : 1);
  }
  // Four image channels with their own contrasts.
  EXPECT_NE(Fnv1a64(s.image.data(), voxels), Fnv1a64(s.image.data() + voxels, voxels));
}

// The committed checksums: the same bytes on every machine and LibTorch version.
TEST(SyntheticTest, InputChecksumsArePinned) {
  const Subject s = MakeSubject(0, 0, 16, 24, 32, 1, 2);
  EXPECT_EQ(Fnv1a64(s.image), 0x87cd734af8016452ull);
  EXPECT_EQ(Fnv1a64(s.mask), 0xe8460d58bea39da5ull);
  EXPECT_EQ(Fnv1a64(NormalVolume(0, Stream::kNoise, 0, 16 * 24 * 32)), 0x8e1b73259ba293b5ull);
  EXPECT_EQ(Timesteps(0, 0, 4, 250), (std::vector<int64_t>{88, 87, 216, 167}));
  EXPECT_EQ(Timesteps(0, 1, 4, 250), (std::vector<int64_t>{124, 1, 201, 90}));
}

}  // namespace
}  // namespace medprof::meddpm
