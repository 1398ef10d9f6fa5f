// LaunchPicker (agent/profiler/launch_picker.h): which launches the metrics layer replays, fed
// with launch sequences shaped like one opt1 forward on the H200 (names shortened).
#include "agent/profiler/launch_picker.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace medprof::profiler {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using Grid = LaunchPicker::Grid;

struct Launch {
  std::string kernel;
  Grid grid;
  int problem;  // which problem size this launch works on (what the median must not mix)
};

// One step: GroupNorm statistics at three levels, all with 32 blocks; a convolution whose
// dominant grid comes second; a kernel outside the targets.
std::vector<Launch> Step() {
  return {{"gn_stats", {32, 1, 1}, 128}, {"conv", {64, 2, 1}, 128}, {"copy", {8, 1, 1}, 0},
          {"conv", {256, 2, 1}, 64},     {"gn_stats", {32, 1, 1}, 64}, {"conv", {256, 2, 1}, 32},
          {"gn_stats", {32, 1, 1}, 32}};
}

// Runs the picker's steps over `step` launches; returns the problem of each profiled range.
std::vector<std::pair<std::string, int>> RunSteps(LaunchPicker& p, const std::vector<Launch>& step,
                                                  size_t* steps_run = nullptr) {
  std::vector<std::pair<std::string, int>> out;
  size_t s = 0;
  for (; s < p.Steps() && !p.Complete(); ++s) {
    p.BeginStep(s);
    for (const Launch& l : step) {
      if (!p.Want(l.kernel, l.grid)) continue;
      p.Profiled(l.kernel, l.grid);
      out.emplace_back(l.kernel, l.problem);
    }
  }
  if (steps_run) *steps_run = s;
  return out;
}

TEST(LaunchPicker, TheSameLaunchInEachStepNeverAnotherProblemOfTheSameGrid) {
  LaunchPicker p({"gn_stats", "conv"}, {{"gn_stats", {32, 1, 1}}, {"conv", {256, 2, 1}}}, 3);
  size_t steps = 0;
  const auto picked = RunSteps(p, Step(), &steps);
  EXPECT_EQ(steps, 3u);
  EXPECT_TRUE(p.Complete());
  // gn_stats: the 128^3 launch three times, never the 64^3 or 32^3 ones with the same grid;
  // conv: its first launch with the dominant grid (the 64^3 one), not the first launch.
  EXPECT_THAT(picked, ElementsAre(Pair("gn_stats", 128), Pair("conv", 64), Pair("gn_stats", 128), Pair("conv", 64),
                                  Pair("gn_stats", 128), Pair("conv", 64)));
  EXPECT_THAT(p.RangesOf().at("gn_stats"), ElementsAre(0, 2, 4));
  EXPECT_THAT(p.RangesOf().at("conv"), ElementsAre(1, 3, 5));
  EXPECT_EQ(p.Order()[1].second, (Grid{256, 2, 1}));
}

TEST(LaunchPicker, OneLaunchIsTheFirstSteadyStateLaunchInOneStep) {
  LaunchPicker p({"gn_stats", "conv"}, {{"gn_stats", {32, 1, 1}}, {"conv", {256, 2, 1}}}, 1);
  size_t steps = 0;
  EXPECT_THAT(RunSteps(p, Step(), &steps), ElementsAre(Pair("gn_stats", 128), Pair("conv", 64)));
  EXPECT_EQ(steps, 1u);
  EXPECT_EQ(p.Steps(), 3u);  // as before the option existed: two steps with the grid, one without
}

TEST(LaunchPicker, ADominantGridThatNeverComesFallsBackToAnyGridInTheLastStepOnly) {
  // The trace's dominant grid is not launched in these steps (e.g. it came from another phase).
  LaunchPicker p({"conv", "gn_stats"}, {{"conv", {999, 1, 1}}, {"gn_stats", {32, 1, 1}}}, 2);
  size_t steps = 0;
  const auto picked = RunSteps(p, Step(), &steps);
  EXPECT_EQ(steps, p.Steps());  // conv never completes: every step runs
  EXPECT_EQ(steps, 4u);
  EXPECT_FALSE(p.Complete());
  // gn_stats done after two steps; conv only in the last step, its first launch of any grid.
  EXPECT_THAT(picked, ElementsAre(Pair("gn_stats", 128), Pair("gn_stats", 128), Pair("conv", 128)));
  EXPECT_EQ(p.Order().back().second, (Grid{64, 2, 1}));
  EXPECT_THAT(p.RangesOf().at("conv"), ElementsAre(2));
}

TEST(LaunchPicker, UnknownKernelsAndKernelsWithoutATraceShape) {
  // "copy" is no target; "gn_stats" has no dominant grid recorded: its first launch is taken.
  LaunchPicker p({"gn_stats"}, {}, 2);
  EXPECT_FALSE(p.Want("copy", {8, 1, 1}));
  const auto picked = RunSteps(p, Step());
  EXPECT_THAT(picked, ElementsAre(Pair("gn_stats", 128), Pair("gn_stats", 128)));
  // After the first launch, a later one with another grid is refused even in the any-grid step.
  LaunchPicker q({"conv"}, {}, 2);
  q.BeginStep(0);
  ASSERT_TRUE(q.Want("conv", {64, 2, 1}));
  q.Profiled("conv", {64, 2, 1});
  q.BeginStep(q.Steps() - 1);
  EXPECT_FALSE(q.Want("conv", {256, 2, 1}));
  EXPECT_TRUE(q.Want("conv", {64, 2, 1}));
}

TEST(LaunchPicker, ZeroLaunchesMeansOne) {
  LaunchPicker p({"conv"}, {}, 0);
  EXPECT_EQ(p.launches(), 1u);
}

}  // namespace
}  // namespace medprof::profiler
