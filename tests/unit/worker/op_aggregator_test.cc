#include "agent/profiler/op_aggregator.h"

#include <thread>
#include <vector>

#include "agent/profiler/phase_tracker.h"
#include "gtest/gtest.h"

namespace medprof::profiler {
namespace {

TEST(OpAggregatorTest, InternIsStablePerNameAndPhase) {
  OpAggregator ops;
  const uint32_t a = ops.Intern("aten::conv3d", "fwd");
  const uint32_t b = ops.Intern("aten::conv3d", "bwd");
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 1u);
  EXPECT_EQ(ops.Intern("aten::conv3d", "fwd"), a);
  OpKey key;
  ASSERT_TRUE(ops.Lookup(b, &key));
  EXPECT_EQ(key.name, "aten::conv3d");
  EXPECT_EQ(key.phase, "bwd");
  EXPECT_FALSE(ops.Lookup(2, &key));
}

TEST(OpAggregatorTest, SnapshotSumsSortsAndClassifies) {
  OpAggregator ops;
  const uint32_t conv = ops.Intern("aten::conv3d", "fwd");
  const uint32_t gn = ops.Intern("aten::group_norm", "fwd");
  ops.Intern("aten::unused", "fwd");  // never added: not reported
  ops.Add(conv, 100, 40);
  ops.Add(conv, 300, 60);
  ops.Add(gn, 50, 50);
  ops.Add(77, 1, 1);  // unknown id: ignored
  const v1::OpAggregates s = ops.Snapshot(3);
  EXPECT_EQ(s.steps(), 3);
  ASSERT_EQ(s.ops_size(), 2);
  EXPECT_EQ(s.ops(0).name(), "aten::conv3d");
  EXPECT_EQ(s.ops(0).phase(), "fwd");
  EXPECT_EQ(s.ops(0).category(), "conv");
  EXPECT_EQ(s.ops(0).count(), 2);
  EXPECT_EQ(s.ops(0).total_ns(), 400);
  EXPECT_EQ(s.ops(0).self_ns(), 100);
  EXPECT_EQ(s.ops(1).name(), "aten::group_norm");
  EXPECT_EQ(s.ops(1).category(), "norm");
}

TEST(OpAggregatorTest, ConcurrentAddsAreAllCounted) {
  OpAggregator ops;
  const uint32_t id = ops.Intern("aten::add", "");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) ops.Add(ops.Intern("aten::add", ""), 2, 1);
    });
  }
  for (auto& t : threads) t.join();
  const v1::OpAggregates s = ops.Snapshot(1);
  ASSERT_EQ(s.ops_size(), 1);
  EXPECT_EQ(s.ops(0).count(), 4000);
  EXPECT_EQ(s.ops(0).total_ns(), 8000);
  EXPECT_EQ(id, 0u);
}

TEST(PhaseTrackerTest, TracksStepsPhasesAndMeasuredCount) {
  PhaseTracker t;
  EXPECT_EQ(t.phase(), "");
  EXPECT_EQ(t.step(), -1);
  t.BeginStep(0, false);
  t.BeginPhase("fwd");
  EXPECT_EQ(t.phase(), "fwd");
  EXPECT_FALSE(t.measuring());
  t.EndPhase("fwd");
  t.EndStep();
  t.BeginStep(0, true);
  EXPECT_TRUE(t.measuring());
  EXPECT_EQ(t.step(), 0);
  t.BeginPhase("sample_step");
  t.BeginPhase("fwd");  // nested
  EXPECT_EQ(t.phase(), "fwd");
  t.EndPhase("fwd");
  EXPECT_EQ(t.phase(), "sample_step");
  const std::string* interned = &t.phase();
  t.EndPhase("sample_step");
  EXPECT_EQ(t.phase(), "");
  t.EndStep();
  EXPECT_EQ(t.measured_steps(), 1);
  EXPECT_FALSE(t.measuring());
  t.BeginStep(1, true);
  t.BeginPhase("sample_step");
  EXPECT_EQ(&t.phase(), interned);  // interned: same storage
  t.EndStep();                      // a phase left open ends with the step
  EXPECT_EQ(t.phase(), "");
  EXPECT_EQ(t.measured_steps(), 2);
}

}  // namespace
}  // namespace medprof::profiler
