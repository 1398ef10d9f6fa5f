// OpTracer on a tiny real LibTorch computation: self vs inclusive time, phase attribution,
// only measured steps counted, listener calls balanced.
#include "agent/profiler/op_tracer.h"
#include "agent/profiler/host_timeline.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <map>
#include <set>
#include <string>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::profiler {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;

void Spin(int64_t ns) {
  const int64_t end = MonotonicNs() + ns;
  while (MonotonicNs() < end) {
  }
}

class CountingListener : public OpListener {
 public:
  void OnOpBegin(uint32_t id, uint32_t shape_id) override {
    ++begins[id];
    shapes[id].insert(shape_id);
  }
  void OnOpEnd(uint32_t id) override { ++ends[id]; }
  std::map<uint32_t, int> begins, ends;
  std::map<uint32_t, std::set<uint32_t>> shapes;  // op id -> shape ids seen
};

const v1::OpStat* Find(const v1::OpAggregates& a, const std::string& name, const std::string& phase) {
  for (const auto& op : a.ops()) {
    if (op.name() == name && op.phase() == phase) return &op;
  }
  return nullptr;
}

// One "training step": a user scope with a nested scope (exact self-time check), a conv3d
// forward, a backward pass, an in-place optimizer-like update.
void Step(PhaseTracker& t, int index, bool measured) {
  t.BeginStep(index, measured);
  at::Tensor w = at::ones({2, 1, 3, 3, 3});
  w.set_requires_grad(true);  // at:: factories ignore TensorOptions::requires_grad
  at::Tensor x = at::ones({1, 1, 6, 6, 6});
  t.BeginPhase("fwd");
  at::Tensor y = at::conv3d(x, w);
  {
    RECORD_USER_SCOPE("medprof_test_outer");
    {
      RECORD_USER_SCOPE("medprof_test_inner");
      Spin(2'000'000);
    }
    Spin(1'000'000);
  }
  at::Tensor loss = y.sum();
  t.EndPhase("fwd");
  t.BeginPhase("bwd");
  loss.backward();
  t.EndPhase("bwd");
  t.BeginPhase("optim");
  {
    at::NoGradGuard no_grad;
    w.add_(w.grad(), -0.1);
  }
  t.EndPhase("optim");
  t.EndStep();
}

TEST(OpTracerTest, AggregatesMeasuredStepsWithSelfTimeAndPhases) {
  PhaseTracker tracker;
  OpAggregator ops;
  CountingListener listener;
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto tracer, OpTracer::Create(&tracker, &ops, &listener));
  ASSERT_THAT(tracer->Start(), IsOk());
  Step(tracker, 0, /*measured=*/false);
  Step(tracker, 0, true);
  Step(tracker, 1, true);
  tracer->Stop();
  // Ops after Stop are not seen.
  tracker.BeginStep(2, true);
  at::conv3d(at::ones({1, 1, 4, 4, 4}), at::ones({1, 1, 3, 3, 3}));
  tracker.EndStep();

  const v1::OpAggregates a = ops.Snapshot(tracker.measured_steps());
  EXPECT_EQ(a.steps(), 3);

  // Warm-up excluded: 2 measured steps -> count 2 (3 steps ran while tracing).
  const v1::OpStat* conv = Find(a, "aten::conv3d", "fwd");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->count(), 2);
  EXPECT_EQ(conv->category(), "conv");
  EXPECT_GT(conv->total_ns(), 0);
  EXPECT_LT(conv->self_ns(), conv->total_ns());  // aten::convolution etc. ran inside it
  EXPECT_EQ(Find(a, "aten::conv3d", "bwd"), nullptr);

  // Exact self time: the outer scope's only child is the inner scope.
  const v1::OpStat* outer = Find(a, "medprof_test_outer", "fwd");
  const v1::OpStat* inner = Find(a, "medprof_test_inner", "fwd");
  ASSERT_NE(outer, nullptr);
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(outer->count(), 2);
  EXPECT_EQ(inner->count(), 2);
  EXPECT_EQ(outer->self_ns() + inner->total_ns(), outer->total_ns());
  EXPECT_EQ(inner->self_ns(), inner->total_ns());
  EXPECT_GE(inner->total_ns(), 2 * 2'000'000);
  EXPECT_GE(outer->self_ns(), 2 * 1'000'000);
  // (No upper bound from the spins: a preempted spin runs long on a loaded machine; the equality
  // above already says the inner scope's time is not in the outer's self time.)

  // Autograd ran in "bwd", the update in "optim".
  bool backward_node = false;
  for (const auto& op : a.ops()) {
    if (op.phase() == "bwd" && op.name().find("Backward") != std::string::npos) {
      backward_node = true;
      EXPECT_EQ(op.count(), 2) << op.name();
    }
  }
  EXPECT_TRUE(backward_node);
  // Ops between sub-phases of a measured step count with phase "".
  const v1::OpStat* ones = Find(a, "aten::ones", "");
  ASSERT_NE(ones, nullptr);
  EXPECT_EQ(ones->count(), 4);  // two tensors per step, two measured steps
  const v1::OpStat* update = Find(a, "aten::add_", "optim");
  ASSERT_NE(update, nullptr);
  EXPECT_EQ(update->count(), 2);

  // Every op the listener saw begin also ended, under the same id.
  EXPECT_EQ(listener.begins, listener.ends);
  EXPECT_GE(listener.begins[ops.Intern("aten::conv3d", "fwd")], 3);  // warm-up included
}

// With a ShapeTable, each op's tensor inputs (dtype and sizes) reach the listener as a shape id:
// one id per distinct input set, the text made once.
TEST(OpTracerTest, InputShapesReachTheListenerAsInternedIds) {
  PhaseTracker tracker;
  OpAggregator ops;
  ShapeTable shapes;
  CountingListener listener;
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto tracer, OpTracer::Create(&tracker, &ops, &listener, &shapes));
  ASSERT_THAT(tracer->Start(), IsOk());
  tracker.BeginStep(0, true);
  tracker.BeginPhase("fwd");
  const at::Tensor w = at::ones({2, 1, 3, 3, 3});
  for (int side : {6, 8, 6}) at::conv3d(at::ones({1, 1, side, side, side}), w);
  at::cat({at::ones({2, 3}), at::ones({2, 3}), at::ones({4, 3}, at::kDouble), at::ones({1, 3}), at::ones({1, 3})});
  tracker.EndPhase("fwd");
  tracker.EndStep();
  tracer->Stop();

  const uint32_t conv = ops.Intern("aten::conv3d", "fwd");
  ASSERT_EQ(listener.shapes[conv].size(), 2u);  // 6^3 and 8^3 inputs; the second 6^3 call reuses its id
  std::set<std::string> texts;
  for (uint32_t id : listener.shapes[conv]) texts.insert(shapes.Lookup(id));
  EXPECT_THAT(texts, ::testing::ElementsAre("f32[1,1,6,6,6] f32[2,1,3,3,3] [1] [0] [1] 1",
                                            "f32[1,1,8,8,8] f32[2,1,3,3,3] [1] [0] [1] 1"));
  // A list of more than four tensors is summarized by its length and first element.
  const uint32_t cat = ops.Intern("aten::cat", "fwd");
  ASSERT_EQ(listener.shapes[cat].size(), 1u);
  EXPECT_EQ(shapes.Lookup(*listener.shapes[cat].begin()), "(5x f32[2,3]...) 0");
  EXPECT_EQ(shapes.Lookup(0), "");
}

// Same sizes, another problem: the layout of a tensor (the copy into channels-last and the copy
// back) and the scalar arguments (a convolution's stride) give other ids, and the text says how.
TEST(OpTracerTest, LayoutAndScalarArgumentsSeparateSignatures) {
  PhaseTracker tracker;
  OpAggregator ops;
  ShapeTable shapes;
  CountingListener listener;
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto tracer, OpTracer::Create(&tracker, &ops, &listener, &shapes));
  ASSERT_THAT(tracer->Start(), IsOk());
  tracker.BeginStep(0, true);
  tracker.BeginPhase("fwd");
  const at::Tensor x = at::ones({1, 2, 4, 4, 4});
  const at::Tensor w = at::ones({2, 2, 3, 3, 3});
  at::conv3d(x, w, {}, /*stride=*/1);
  at::conv3d(x, w, {}, /*stride=*/2);
  at::Tensor cl = at::empty_like(x, at::MemoryFormat::ChannelsLast3d);
  cl.copy_(x);
  at::Tensor back = at::empty_like(x);
  back.copy_(cl);
  at::Tensor strided = at::ones({4, 8}).t().contiguous().t();
  back.copy_(cl);  // the same as the one before: the same id
  (void)at::neg(strided);
  tracker.EndPhase("fwd");
  tracker.EndStep();
  tracer->Stop();

  const auto texts = [&](const char* op) {
    std::set<std::string> out;
    for (uint32_t id : listener.shapes[ops.Intern(op, "fwd")]) out.insert(shapes.Lookup(id));
    return out;
  };
  EXPECT_THAT(texts("aten::conv3d"),
              ::testing::ElementsAre("f32[1,2,4,4,4] f32[2,2,3,3,3] [1] [0] [1] 1",
                                     "f32[1,2,4,4,4] f32[2,2,3,3,3] [2] [0] [1] 1"));
  EXPECT_THAT(texts("aten::copy_"), ::testing::ElementsAre("f32[1,2,4,4,4] f32[1,2,4,4,4]cl false",
                                                           "f32[1,2,4,4,4]cl f32[1,2,4,4,4] false",
                                                           "f32[8,4] f32[8,4]s[1,8] false"));  // contiguous()
  EXPECT_THAT(texts("aten::neg"), ::testing::ElementsAre("f32[4,8]s[1,4]"));
}

TEST(OpTracerTest, WithoutAShapeTableEveryShapeIdIsZero) {
  PhaseTracker tracker;
  OpAggregator ops;
  CountingListener listener;
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto tracer, OpTracer::Create(&tracker, &ops, &listener));
  ASSERT_THAT(tracer->Start(), IsOk());
  at::conv3d(at::ones({1, 1, 6, 6, 6}), at::ones({2, 1, 3, 3, 3}));
  tracer->Stop();
  for (const auto& [op, ids] : listener.shapes) EXPECT_THAT(ids, ::testing::ElementsAre(0u)) << op;
}

TEST(ShapeTableTest, InternsOnceAndEncodesExternalIds) {
  ShapeTable t;
  int described = 0;
  const auto text = [&] {
    ++described;
    return std::string("f32[2]");
  };
  EXPECT_EQ(t.Intern(42, text), 1u);
  EXPECT_EQ(t.Intern(42, text), 1u);
  EXPECT_EQ(t.Intern(7, text), 2u);
  EXPECT_EQ(described, 2);
  EXPECT_EQ(t.Lookup(1), "f32[2]");
  EXPECT_EQ(t.Lookup(3), "");
  const uint64_t id = EncodeExternalId(/*op_slot=*/0, /*shape_id=*/2);
  EXPECT_NE(id, 0u);
  uint32_t slot = 99;
  ASSERT_TRUE(DecodeOpSlot(id, &slot));
  EXPECT_EQ(slot, 0u);
  EXPECT_EQ(DecodeShapeId(id), 2u);
  EXPECT_FALSE(DecodeOpSlot(uint64_t{5} << 32, &slot));  // no op: a phase-only id is never this
}

// The CPU backend's timeline: the op tracer's records of the kept measured steps as host events
// named by the op alone, nested inside their phase and step, warm-up and later steps left out.
TEST(HostTimelineTest, KeepsTheFirstMeasuredStepsAsHostEvents) {
  PhaseTracker tracker;
  OpAggregator ops;
  HostTimeline timeline(&tracker, &ops, /*steps=*/1);
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto tracer, OpTracer::Create(&tracker, &ops, &timeline));
  ASSERT_THAT(tracer->Start(), IsOk());
  auto step = [&](int index, bool measured) {  // Step() with the profiler's hooks
    tracker.BeginStep(index, measured);
    timeline.StepBegin();
    tracker.BeginPhase("fwd");
    timeline.PhaseBegin("fwd");
    {
      RECORD_USER_SCOPE("medprof_test_outer");
      Spin(1'000'000);
    }
    at::conv3d(at::ones({1, 1, 6, 6, 6}), at::ones({2, 1, 3, 3, 3}));
    timeline.PhaseEnd("fwd");
    tracker.EndPhase("fwd");
    timeline.StepEnd();
    tracker.EndStep();
  };
  step(0, false);
  step(0, true);
  step(1, true);  // past the one kept step
  tracer->Stop();

  const std::vector<v1::Timeline> records = timeline.Records();
  ASSERT_EQ(records.size(), 1u);
  const v1::Timeline& t = records[0];
  EXPECT_EQ(t.steps(), 1);
  EXPECT_FALSE(t.truncated());
  EXPECT_GT(t.origin_unix_ns(), 1'600'000'000'000'000'000LL);  // a wall-clock time, not monotonic
  std::map<std::string, const v1::TimelineEvent*> by_name;
  for (const v1::TimelineEvent& e : t.events()) {
    EXPECT_EQ(e.step(), 0) << e.name();
    EXPECT_EQ(e.stream(), -1) << e.name();
    EXPECT_GE(e.start_ns(), 0) << e.name();
    by_name.emplace(e.name(), &e);
  }
  ASSERT_TRUE(by_name.count("step"));
  ASSERT_TRUE(by_name.count("fwd"));
  ASSERT_TRUE(by_name.count("aten::conv3d"));
  ASSERT_TRUE(by_name.count("medprof_test_outer"));
  const v1::TimelineEvent& st = *by_name["step"];
  const v1::TimelineEvent& fwd = *by_name["fwd"];
  const v1::TimelineEvent& conv = *by_name["aten::conv3d"];
  const v1::TimelineEvent& outer = *by_name["medprof_test_outer"];
  EXPECT_EQ(st.kind(), "phase");
  EXPECT_EQ(fwd.kind(), "phase");
  EXPECT_EQ(conv.kind(), "op");
  EXPECT_EQ(conv.phase(), "fwd");
  EXPECT_GE(outer.duration_ns(), 1'000'000);
  // Nesting: op inside phase inside step.
  EXPECT_LE(st.start_ns(), fwd.start_ns());
  EXPECT_LE(fwd.start_ns(), conv.start_ns());
  EXPECT_LE(conv.start_ns() + conv.duration_ns(), fwd.start_ns() + fwd.duration_ns());
  EXPECT_LE(fwd.start_ns() + fwd.duration_ns(), st.start_ns() + st.duration_ns());
  // One step kept: each op once.
  int convs = 0;
  for (const v1::TimelineEvent& e : t.events()) convs += e.name() == "aten::conv3d";
  EXPECT_EQ(convs, 1);
}

TEST(OpTracerTest, OnlyOneTracerAtATime) {
  PhaseTracker tracker;
  OpAggregator ops;
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto first, OpTracer::Create(&tracker, &ops, nullptr));
  MEDPROF_ASSERT_OK_AND_ASSIGN(auto second, OpTracer::Create(&tracker, &ops, nullptr));
  ASSERT_THAT(first->Start(), IsOk());
  EXPECT_THAT(second->Start(),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("another OpTracer")));
  first->Stop();
  EXPECT_THAT(second->Start(), IsOk());
  second->Stop();
}

}  // namespace
}  // namespace medprof::profiler
