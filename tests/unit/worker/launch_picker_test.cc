// ChooseSignatures and LaunchPicker (agent/profiler/launch_picker.h): which launch signatures the
// metrics layer profiles and which launches of them, fed with a step shaped like an opt12 forward on
// the H200 (GroupNorm's statistics kernel: one grid of 32 blocks at every U-Net level, five problem
// sizes; names shortened).
#include "agent/profiler/launch_picker.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace medprof::profiler {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

LaunchSignature Sig(const std::string& kernel, const std::string& shapes, int32_t grid_x = 32) {
  LaunchSignature s;
  s.kernel = kernel;
  s.op = "aten::native_group_norm";
  s.phase = "fwd";
  s.shapes = shapes;
  s.grid = {grid_x, 1, 1};
  s.block = {512, 1, 1};
  return s;
}

v1::KernelSignature Proto(const LaunchSignature& l, int64_t count, int64_t total_ns) {
  v1::KernelSignature s;
  s.set_id(l.Id());
  s.set_kernel(l.kernel);
  s.set_op(l.op);
  s.set_phase(l.phase);
  s.set_shapes(l.shapes);
  for (int32_t g : l.grid) s.add_grid(g);
  for (int32_t b : l.block) s.add_block(b);
  s.set_count(count);
  s.set_total_ns(total_ns);
  return s;
}

// gn_stats: five sizes, 60 / 25 / 9 / 4 / 2 % of its time; conv: one signature; copy: small.
v1::KernelSignatures Opt12Forward() {
  v1::KernelSignatures out;
  out.set_steps(1);
  *out.add_signatures() = Proto(Sig("gn_stats", "f32[1,64,128,128,128]"), 10, 600);
  *out.add_signatures() = Proto(Sig("gn_stats", "f32[1,64,64,64,64]"), 10, 250);
  *out.add_signatures() = Proto(Sig("gn_stats", "f32[1,128,32,32,32]"), 10, 90);
  *out.add_signatures() = Proto(Sig("gn_stats", "f32[1,192,16,16,16]"), 8, 40);
  *out.add_signatures() = Proto(Sig("gn_stats", "f32[1,256,8,8,8]"), 8, 20);
  *out.add_signatures() = Proto(Sig("conv", "f32[1,64,128,128,128] f32[64,64,3,3,3]", 512), 4, 800);
  *out.add_signatures() = Proto(Sig("copy", "f32[1,64,128,128,128]", 1024), 2, 30);
  return out;
}

std::vector<std::string> Shapes(const KernelTarget& k) {
  std::vector<std::string> out;
  for (const v1::KernelSignature* s : k.chosen) out.push_back(s->shapes());
  return out;
}

TEST(ChooseSignatures, LargestTimeFirstUntilTheCoverageIsReached) {
  const v1::KernelSignatures sigs = Opt12Forward();
  const std::vector<KernelTarget> k = ChooseSignatures(sigs, /*top_k=*/2, /*coverage=*/0.9, /*max_signatures=*/8);
  ASSERT_EQ(k.size(), 2u);  // the top two kernels by time: gn_stats (1000 ns) and conv (800 ns)
  EXPECT_EQ(k[0].kernel, "gn_stats");
  EXPECT_EQ(k[0].total_ns, 1000);
  EXPECT_EQ(k[0].signatures, 5);
  // 600 (60 %) + 250 (85 %) + 90 (94 % >= 90 %): three signatures.
  EXPECT_THAT(Shapes(k[0]), ElementsAre("f32[1,64,128,128,128]", "f32[1,64,64,64,64]", "f32[1,128,32,32,32]"));
  EXPECT_EQ(k[1].kernel, "conv");
  EXPECT_EQ(k[1].chosen.size(), 1u);
}

TEST(ChooseSignatures, TheCapBoundsTheCostAndFullCoverageTakesEverySignature) {
  const v1::KernelSignatures sigs = Opt12Forward();
  EXPECT_EQ(ChooseSignatures(sigs, 1, 0.9, /*max_signatures=*/2)[0].chosen.size(), 2u);
  EXPECT_EQ(ChooseSignatures(sigs, 1, 1.0, 8)[0].chosen.size(), 5u);
  EXPECT_EQ(ChooseSignatures(sigs, 1, 0.5, 8)[0].chosen.size(), 1u);  // 60 % already covers half
  EXPECT_EQ(ChooseSignatures(sigs, 10, 0.9, 8).size(), 3u);            // only three kernels exist
  EXPECT_TRUE(ChooseSignatures(sigs, 0, 0.9, 8).empty());
}

TEST(ChooseSignatures, AProtoSignatureRoundTripsToTheSameKey) {
  const LaunchSignature l = Sig("gn_stats", "f32[1,64,64,64,64]");
  EXPECT_EQ(ToLaunchSignature(Proto(l, 1, 1)), l);
  EXPECT_EQ(l.Id().size(), 12u);
  EXPECT_NE(l.Id(), Sig("gn_stats", "f32[1,64,64,64,6]").Id());
  EXPECT_NE(Sig("gn_stats", "ab").Id(), [] {
    LaunchSignature s = Sig("gn_stat", "sab");  // field boundaries count
    return s.Id();
  }());
}

struct Launch {
  LaunchSignature signature;
  int position;  // its place in the step
};

// One step's launches: gn_stats at three sizes twice each, conv between them.
std::vector<Launch> Step() {
  const LaunchSignature big = Sig("gn_stats", "f32[1,64,128,128,128]"), mid = Sig("gn_stats", "f32[1,64,64,64,64]"),
                        small = Sig("gn_stats", "f32[1,256,8,8,8]");
  const LaunchSignature conv = Sig("conv", "f32[1,64,128,128,128] f32[64,64,3,3,3]", 512);
  return {{big, 0}, {conv, 1}, {big, 2}, {mid, 3}, {mid, 4}, {small, 5}, {small, 6}};
}

// Runs the picker over `steps` copies of `step` (a launch missing from a step where `skip` says);
// returns each profiled launch as (step, position).
std::vector<std::pair<size_t, int>> RunSteps(LaunchPicker& p, const std::vector<Launch>& step, size_t* steps_run,
                                        int skip_position = -1, size_t skip_step = 99) {
  std::vector<std::pair<size_t, int>> out;
  size_t s = 0;
  for (; s < p.Steps() && !p.Complete(); ++s) {
    p.BeginStep();
    for (const Launch& l : step) {
      if (s == skip_step && l.position == skip_position) continue;
      if (!p.WantsKernel(l.signature.kernel) || !p.Want(l.signature)) continue;
      p.Profiled(l.signature);
      out.emplace_back(s, l.position);
    }
  }
  *steps_run = s;
  return out;
}

TEST(LaunchPicker, TheFirstLaunchOfEachSignatureInEachStepNeverAnotherProblem) {
  const std::vector<Launch> step = Step();
  LaunchPicker p({step[0].signature, step[3].signature}, /*launches=*/3);  // big and mid gn_stats
  size_t steps = 0;
  const auto got = RunSteps(p, step, &steps);
  EXPECT_TRUE(p.Complete());
  EXPECT_EQ(steps, 3u);  // complete after `launches` steps: the spare step is not run
  EXPECT_THAT(got, ElementsAre(Pair(0, 0), Pair(0, 3), Pair(1, 0), Pair(1, 3), Pair(2, 0), Pair(2, 3)));
  ASSERT_EQ(p.RangesOf().size(), 2u);
  EXPECT_THAT(p.RangesOf()[0], ElementsAre(0, 2, 4));  // range numbers, in profiling order
  EXPECT_THAT(p.RangesOf()[1], ElementsAre(1, 3, 5));
  EXPECT_EQ(p.ranges(), 6u);
}

TEST(LaunchPicker, ASignatureMissingFromOneStepIsTakenInTheSpareStep) {
  const std::vector<Launch> step = Step();
  LaunchPicker p({step[5].signature}, 2);  // small gn_stats, both of its launches gone in step 0
  size_t steps = 0;
  const auto got = RunSteps(p, step, &steps, /*skip_position=*/5, /*skip_step=*/0);
  // Step 0 takes its second launch (position 6: still the first of that signature in the step).
  EXPECT_THAT(got, ElementsAre(Pair(0, 6), Pair(1, 5)));
  EXPECT_EQ(steps, 2u);
  EXPECT_FALSE(p.WantsKernel("copy"));
  EXPECT_FALSE(p.Want(Sig("gn_stats", "f32[9]")));
}

TEST(LaunchPicker, NeverMoreThanLaunchesPerSignatureAndAtMostOneSpareStep) {
  const std::vector<Launch> step = Step();
  LaunchPicker p({step[0].signature, Sig("gone", "f32[1]")}, 1);  // one signature never launches
  size_t steps = 0;
  const auto got = RunSteps(p, step, &steps);
  EXPECT_THAT(got, ElementsAre(Pair(0, 0)));
  EXPECT_FALSE(p.Complete());
  EXPECT_EQ(steps, p.Steps());
  EXPECT_EQ(steps, 2u);
  EXPECT_TRUE(p.RangesOf()[1].empty());
}

}  // namespace
}  // namespace medprof::profiler
