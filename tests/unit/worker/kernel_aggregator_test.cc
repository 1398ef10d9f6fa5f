// KernelAggregator fed with CUPTI-shaped records: exact aggregates, op attribution through
// external correlation records (in the same and in later batches), measured-step windows,
// taxonomy, occupancy, timeline bounds.
#include "agent/profiler/kernel_aggregator.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace medprof::profiler {
namespace {

using ::testing::ElementsAre;

TraceRecord Kernel(const std::string& name, uint64_t start, uint64_t end, uint32_t corr) {
  TraceRecord r;
  r.kind = RecordKind::kKernel;
  r.name = name;
  r.start_ns = start;
  r.end_ns = end;
  r.correlation_id = corr;
  r.grid[0] = 128; r.grid[1] = 2; r.grid[2] = 1;
  r.block[0] = 256; r.block[1] = 1; r.block[2] = 1;
  r.registers_per_thread = 64;
  return r;
}

TraceRecord Correlation(uint32_t corr, uint64_t external) {
  TraceRecord r;
  r.kind = RecordKind::kExternalCorrelation;
  r.correlation_id = corr;
  r.external_id = external;
  return r;
}

class KernelAggregatorTest : public ::testing::Test {
 protected:
  KernelAggregatorTest() {
    ops_[1] = {"aten::conv3d", "fwd"};
    ops_[2] = {"aten::native_group_norm", "fwd"};
    ops_[3] = {"aten::convolution_backward", "bwd"};
    ops_[4] = {"", "optim"};  // phase-only id
    // GroupNorm at two U-Net levels: one op, one kernel and grid, two problem sizes.
    ops_[5] = {"aten::native_group_norm", "fwd", "f32[1,64,32,32,32] f32[64] f32[64]"};
    ops_[6] = {"aten::native_group_norm", "fwd", "f32[1,128,16,16,16] f32[128] f32[128]"};
  }
  KernelAggregator Make(int timeline_steps = 3) {
    KernelAggregatorOptions o;
    o.device = DeviceLimits::ForGpu("H100");
    o.timeline_steps = timeline_steps;
    return KernelAggregator(o, [this](uint64_t id, OpKey* out) {
      auto it = ops_.find(id);
      if (it == ops_.end()) return false;
      *out = it->second;
      return true;
    });
  }
  static const v1::KernelStat* Find(const v1::KernelAggregates& a, const std::string& name,
                                    const std::string& op) {
    for (const auto& k : a.kernels()) {
      if (k.name() == name && k.op() == op) return &k;
    }
    return nullptr;
  }
  std::map<uint64_t, OpKey> ops_;
};

TEST_F(KernelAggregatorTest, ExactAggregatesPerKernelOpAndPhase) {
  KernelAggregator agg = Make();
  agg.BeginStep(0, /*measured=*/false, 100);  // warm-up
  agg.EndStep(200);
  agg.BeginStep(0, true, 1000);
  agg.EndStep(2000);
  agg.BeginStep(1, true, 3000);

  agg.Add({Correlation(5, 1), Kernel("_Z10conv_fpropPfi", 150, 180, 5),  // warm-up: not counted
           Correlation(10, 1), Kernel("_Z10conv_fpropPfi", 1100, 1300, 10),
           Correlation(11, 3), Kernel("nchwToNhwcKernel", 1400, 1450, 11),
           Kernel("_Z10conv_fpropPfi", 2500, 2600, 12)});  // between steps: not counted
  // Step 1 is still open when its records arrive.
  agg.Add({Correlation(20, 1), Kernel("_Z10conv_fpropPfi", 3100, 3400, 20),
           Correlation(21, 2), Kernel("_Z10conv_fpropPfi", 3500, 3550, 21)});
  agg.EndStep(4000);
  agg.AddDropped(7);
  agg.Finish();

  const v1::KernelAggregates a = agg.Snapshot();
  EXPECT_EQ(a.steps(), 2);
  EXPECT_EQ(a.dropped_records(), 7);
  ASSERT_EQ(a.kernels_size(), 3);

  const v1::KernelStat* conv = Find(a, "conv_fprop(float*, int)", "aten::conv3d");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->phase(), "fwd");
  EXPECT_EQ(conv->category(), "conv");
  EXPECT_EQ(conv->count(), 2);
  EXPECT_EQ(conv->total_ns(), 500);
  EXPECT_EQ(conv->min_ns(), 200);
  EXPECT_EQ(conv->max_ns(), 300);
  EXPECT_THAT(conv->grid(), ElementsAre(128, 2, 1));
  EXPECT_THAT(conv->block(), ElementsAre(256, 1, 1));
  EXPECT_EQ(conv->registers(), 64);
  EXPECT_EQ(conv->shared_bytes(), 0);
  // H100: 256 threads = 8 warps; 64 regs -> 2048 per warp -> 8 warps per sub-partition ->
  // 32 warps -> 4 blocks per SM -> 32 of 64 warps.
  EXPECT_DOUBLE_EQ(conv->theoretical_occupancy(), 0.5);

  // The same kernel under another op is another row: attribution through correlation.
  const v1::KernelStat* under_gn = Find(a, "conv_fprop(float*, int)", "aten::native_group_norm");
  ASSERT_NE(under_gn, nullptr);
  EXPECT_EQ(under_gn->count(), 1);
  EXPECT_EQ(under_gn->total_ns(), 50);
  EXPECT_EQ(under_gn->category(), "norm");  // rule 2: the op decides

  // Rule 1: a layout conversion is layout whatever op launched it.
  const v1::KernelStat* layout = Find(a, "nchwToNhwcKernel", "aten::convolution_backward");
  ASSERT_NE(layout, nullptr);
  EXPECT_EQ(layout->phase(), "bwd");
  EXPECT_EQ(layout->category(), "layout");
  EXPECT_EQ(layout->count(), 1);
  EXPECT_EQ(layout->total_ns(), 50);

  // Sorted by total time.
  EXPECT_EQ(a.kernels(0).name(), "conv_fprop(float*, int)");
  EXPECT_EQ(a.kernels(0).total_ns(), 500);

  const KernelAggregatorCounters c = agg.counters();
  EXPECT_EQ(c.device_records, 6);
  EXPECT_EQ(c.counted, 4);
  EXPECT_EQ(c.outside_steps, 2);
  EXPECT_EQ(c.unattributed, 0);
}

TEST_F(KernelAggregatorTest, CorrelationArrivingInALaterBatchStillAttributes) {
  KernelAggregator agg = Make();
  agg.BeginStep(0, true, 0);
  agg.Add({Kernel("vectorized_elementwise_kernel", 10, 20, 7)});
  EXPECT_EQ(agg.counters().pending, 1);
  EXPECT_EQ(agg.Snapshot().kernels_size(), 0);
  agg.Add({Correlation(7, 4)});  // phase-only id: no op, phase "optim"
  EXPECT_EQ(agg.counters().pending, 0);
  agg.EndStep(100);
  agg.Finish();
  const v1::KernelAggregates a = agg.Snapshot();
  ASSERT_EQ(a.kernels_size(), 1);
  EXPECT_EQ(a.kernels(0).op(), "");
  EXPECT_EQ(a.kernels(0).phase(), "optim");
  EXPECT_EQ(a.kernels(0).category(), "elementwise");
  EXPECT_EQ(a.kernels(0).count(), 1);
  EXPECT_EQ(a.kernels(0).total_ns(), 10);
}

TEST_F(KernelAggregatorTest, RecordsWithoutCorrelationCountWithoutOpAtFinish) {
  KernelAggregator agg = Make();
  agg.BeginStep(0, true, 0);
  TraceRecord copy;
  copy.kind = RecordKind::kMemcpy;
  copy.name = "[memcpy HtoD]";
  copy.start_ns = 5;
  copy.end_ns = 45;
  copy.correlation_id = 99;
  copy.bytes = 4096;
  TraceRecord set = copy;
  set.kind = RecordKind::kMemset;
  set.name = "[memset]";
  set.start_ns = 50;
  set.end_ns = 52;
  set.correlation_id = 100;
  agg.Add({copy, set, copy});
  agg.EndStep(1000);
  EXPECT_EQ(agg.counters().pending, 3);
  agg.Finish();
  const v1::KernelAggregates a = agg.Snapshot();
  ASSERT_EQ(a.kernels_size(), 2);
  EXPECT_EQ(a.kernels(0).name(), "[memcpy HtoD]");
  EXPECT_EQ(a.kernels(0).category(), "copy");
  EXPECT_EQ(a.kernels(0).count(), 2);
  EXPECT_EQ(a.kernels(0).total_ns(), 80);
  EXPECT_EQ(a.kernels(0).grid_size(), 0);  // not a kernel launch
  EXPECT_EQ(a.kernels(1).name(), "[memset]");
  EXPECT_EQ(a.kernels(1).category(), "memset");
  EXPECT_EQ(agg.counters().unattributed, 3);
}

TEST_F(KernelAggregatorTest, PendingRecordsAreBounded) {
  KernelAggregatorOptions o;
  o.max_pending = 2;
  KernelAggregator agg(o, nullptr);
  agg.BeginStep(0, true, 0);
  agg.Add({Kernel("k", 1, 2, 1), Kernel("k", 3, 4, 2), Kernel("k", 5, 6, 3)});
  const KernelAggregatorCounters c = agg.counters();
  EXPECT_EQ(c.pending, 2);
  EXPECT_EQ(c.counted, 1);       // the oldest gave up waiting
  EXPECT_EQ(c.unattributed, 1);
}

TEST_F(KernelAggregatorTest, TimelineKeepsOnlyTheFirstMeasuredSteps) {
  KernelAggregator agg = Make(/*timeline_steps=*/1);
  agg.BeginStep(0, true, 0);
  TraceRecord api;
  api.kind = RecordKind::kApi;
  api.name = "cudaLaunchKernel";
  api.start_ns = 5;
  api.end_ns = 8;
  api.correlation_id = 1;
  api.thread_id = 42;
  agg.Add({Correlation(1, 1), api, Kernel("_Z1kv", 10, 20, 1)});
  agg.EndStep(100);
  agg.BeginStep(1, true, 200);
  agg.Add({Correlation(2, 1), Kernel("_Z1kv", 210, 220, 2)});
  agg.EndStep(300);
  const std::vector<TimelineEvent> t = agg.Timeline();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].kind, RecordKind::kApi);
  EXPECT_EQ(t[0].name, "cudaLaunchKernel");
  EXPECT_EQ(t[0].thread_id, 42u);
  EXPECT_EQ(t[0].op, "aten::conv3d");
  EXPECT_EQ(t[1].kind, RecordKind::kKernel);
  EXPECT_EQ(t[1].name, "k()");
  EXPECT_EQ(t[1].step, 0);
  EXPECT_EQ(t[1].start_ns, 10u);
  // The API record is timeline-only, never an aggregate.
  const v1::KernelAggregates a = agg.Snapshot();
  ASSERT_EQ(a.kernels_size(), 1);
  EXPECT_EQ(a.kernels(0).count(), 2);
}

// Launches of one kernel with one grid under one op, at two problem sizes (the op's input shapes),
// plus the same kernel with another dynamic shared memory size: three signatures.
TEST_F(KernelAggregatorTest, LaunchSignaturesSplitAKernelByOpShapesAndLaunchConfiguration) {
  KernelAggregator agg = Make();
  auto gn = [](uint64_t start, uint64_t end, uint32_t corr, int32_t dsmem = 0) {
    TraceRecord r = Kernel("_Z8gn_statsv", start, end, corr);
    r.grid[0] = 32;
    r.grid[1] = 1;
    r.dynamic_shared_bytes = dsmem;
    return r;
  };
  for (int step = 0; step < 2; ++step) {
    const uint64_t t0 = 1000 * (step + 1);
    const uint32_t c = 100 * (step + 1);
    agg.BeginStep(step, true, t0);
    // Launch order (correlation ids) differs from the order the records arrive in.
    agg.Add({Correlation(c + 3, 5), gn(t0 + 300, t0 + 340, c + 3), Correlation(c + 1, 5),
             gn(t0 + 100, t0 + 150, c + 1), Correlation(c + 2, 6), gn(t0 + 200, t0 + 210, c + 2),
             Correlation(c + 4, 6), gn(t0 + 400, t0 + 412, c + 4, /*dsmem=*/1024)});
    agg.EndStep(t0 + 900);
  }
  const v1::KernelSignatures sigs = agg.Signatures();
  EXPECT_EQ(sigs.steps(), 2);
  ASSERT_EQ(sigs.signatures_size(), 3);
  // By total time: the 32^3 level (2 launches a step, 50 + 40 ns), the 16^3 level (10 ns), the
  // 16^3 level with 1 KiB of dynamic shared memory (12 ns).
  const v1::KernelSignature& big = sigs.signatures(0);
  EXPECT_EQ(big.kernel(), "gn_stats()");
  EXPECT_EQ(big.op(), "aten::native_group_norm");
  EXPECT_EQ(big.phase(), "fwd");
  EXPECT_EQ(big.shapes(), "f32[1,64,32,32,32] f32[64] f32[64]");
  EXPECT_EQ(big.count(), 4);
  EXPECT_EQ(big.total_ns(), 180);
  EXPECT_EQ(big.min_ns(), 40);
  EXPECT_EQ(big.max_ns(), 50);
  EXPECT_THAT(big.grid(), ElementsAre(32, 1, 1));
  EXPECT_THAT(big.block(), ElementsAre(256, 1, 1));
  EXPECT_THAT(big.ordinals(), ElementsAre(0, 2));  // positions among gn_stats launches in step 0
  const v1::KernelSignature& dsmem = sigs.signatures(1);
  EXPECT_EQ(dsmem.dynamic_shared_bytes(), 1024);
  EXPECT_EQ(dsmem.total_ns(), 24);
  EXPECT_THAT(dsmem.ordinals(), ElementsAre(3));
  const v1::KernelSignature& small = sigs.signatures(2);
  EXPECT_EQ(small.shapes(), "f32[1,128,16,16,16] f32[128] f32[128]");
  EXPECT_EQ(small.total_ns(), 20);
  EXPECT_THAT(small.ordinals(), ElementsAre(1));
  // The id is the LaunchSignature's: the same in every run.
  LaunchSignature key;
  key.kernel = "gn_stats()";
  key.op = "aten::native_group_norm";
  key.phase = "fwd";
  key.shapes = "f32[1,128,16,16,16] f32[128] f32[128]";
  key.grid = {32, 1, 1};
  key.block = {256, 1, 1};
  EXPECT_EQ(small.id(), key.Id());
  // The kernel's own aggregate is unchanged: one (name, op, phase) entry with all 8 launches.
  const v1::KernelAggregates a = agg.Snapshot();
  ASSERT_EQ(a.kernels_size(), 1);
  EXPECT_EQ(a.kernels(0).count(), 8);
  EXPECT_EQ(a.kernels(0).total_ns(), 180 + 24 + 20);
}

TEST_F(KernelAggregatorTest, SignaturesAreBoundedAndMemcpyHasNone) {
  KernelAggregatorOptions o;
  o.max_signatures = 1;
  KernelAggregator agg(o, [this](uint64_t id, OpKey* out) {
    *out = ops_[id];
    return true;
  });
  agg.BeginStep(0, true, 0);
  TraceRecord copy;
  copy.kind = RecordKind::kMemcpy;
  copy.name = "[memcpy HtoD]";
  copy.start_ns = 5;
  copy.end_ns = 9;
  copy.correlation_id = 1;
  agg.Add({Correlation(1, 1), copy, Correlation(2, 5), Kernel("_Z1av", 10, 20, 2), Correlation(3, 6),
           Kernel("_Z1bv", 30, 40, 3)});
  agg.EndStep(100);
  const v1::KernelSignatures sigs = agg.Signatures();
  ASSERT_EQ(sigs.signatures_size(), 1);  // the second kernel's signature is over the cap
  EXPECT_EQ(sigs.signatures(0).kernel(), "a()");
  EXPECT_EQ(agg.Snapshot().kernels_size(), 3);  // every record still counts in its kernel
}

TEST(DemangleTest, DemanglesAndPassesThroughPlainNames) {
  EXPECT_EQ(KernelAggregator::Demangle("_Z3fooi"), "foo(int)");
  EXPECT_EQ(KernelAggregator::Demangle("ampere_sgemm_128x64_nn"), "ampere_sgemm_128x64_nn");
  EXPECT_EQ(KernelAggregator::Demangle("_Znotmangled!"), "_Znotmangled!");
}

}  // namespace
}  // namespace medprof::profiler
