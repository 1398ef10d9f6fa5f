// The profiler's pure pieces behind the sampling and metrics layers: the metric catalog's
// per-chip resolution (with a fake validity oracle), PC-sampling stall shares, and the
// findings/priority rules (spec/cupti.md §5) on hand-made kernel facts.
#include <set>

#include "absl/strings/match.h"
#include "agent/profiler/findings.h"
#include "agent/profiler/metric_catalog.h"
#include "agent/profiler/stall_samples.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace medprof::profiler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(MetricCatalog, EveryDocumentedNameIsThereOnceWithACandidate) {
  std::set<std::string> names;
  for (const MetricEntry& e : MetricCatalog()) {
    EXPECT_TRUE(names.insert(e.name).second) << "duplicate " << e.name;
    EXPECT_FALSE(e.candidates.empty()) << e.name;
  }
  for (const char* n : {"duration_ns", "sm_cycles", "warp_instructions", "tensor_pipe_pct", "fma_pipe_pct",
                        "achieved_occupancy_pct", "l1_hit_pct", "l2_hit_pct", "dram_throughput_pct",
                        "issue_active_pct", "sm_throughput_pct", "cpi", "stall.long_scoreboard",
                        "inst_pipe.fma", "sass.ffma", "dram_bytes_read", "flops.tensor_tf32", "flops.tensor_fp16",
                        "flops.tensor_bf16", "flops.tensor_fp8", "l2_xbar_cycles", "l1_writeback_cycles"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
}

TEST(MetricCatalog, ResolvePicksTheFirstValidCandidateAndExplainsDrops) {
  const std::vector<MetricEntry> catalog = {
      {"tensor_pipe_pct", "%", MetricGroup::kCore, {"a.hgmma", "b.hmma"}, true},
      {"stall.gmma", "cycles/issue", MetricGroup::kStalls, {"c.gmma"}, false},
      {"duration_ns", "ns", MetricGroup::kCore, {"gpu__time_duration.sum"}, false},
  };
  const ResolvedCatalog r = ResolveCatalog(catalog, "GA100", [](const std::string& m) -> std::string {
    if (m == "a.hgmma" || m == "c.gmma") return "CUPTI_ERROR_INVALID_METRIC_NAME";
    return "";
  });
  ASSERT_EQ(r.metrics.size(), 2u);
  EXPECT_EQ(r.metrics[0].name, "tensor_pipe_pct");
  EXPECT_EQ(r.metrics[0].perfworks, "b.hmma");
  ASSERT_EQ(r.dropped.size(), 1u);
  EXPECT_EQ(r.dropped[0].name, "stall.gmma");
  EXPECT_THAT(r.dropped[0].reason, HasSubstr("GA100"));
  EXPECT_THAT(r.dropped[0].reason, HasSubstr("c.gmma (CUPTI_ERROR_INVALID_METRIC_NAME)"));
  EXPECT_EQ(r.PerfworksNames({MetricGroup::kCore}),
            (std::vector<std::string>{"b.hmma", "gpu__time_duration.sum"}));
  EXPECT_TRUE(r.PerfworksNames({MetricGroup::kSass}).empty());
}

TEST(MetricCatalog, PercentagesAreClampedAndNonFiniteValuesRejected) {
  ResolvedMetric pct{"l2_hit_pct", "%", "lts__t_sector_hit_rate.pct", MetricGroup::kCore, true};
  double v = 101.5;  // seen on the H200 (spec/cupti.md §2.7)
  EXPECT_TRUE(SanitizeMetricValue(pct, &v));
  EXPECT_DOUBLE_EQ(v, 100.0);
  ResolvedMetric count{"warp_instructions", "inst", "smsp__inst_executed.sum", MetricGroup::kCore, false};
  v = 3.5e9;
  EXPECT_TRUE(SanitizeMetricValue(count, &v));
  EXPECT_DOUBLE_EQ(v, 3.5e9);
  v = std::nan("");
  EXPECT_FALSE(SanitizeMetricValue(count, &v));
  EXPECT_DOUBLE_EQ(v, 0.0);
}

TEST(MetricCatalog, MedianOfLaunchesKeepsTheMiddleLaunchPerMetricAndSaysHowManyAndHowFarApart) {
  EXPECT_TRUE(MedianOfLaunches({}).empty());
  // Three steps of one 58 us convolution launch as the H200 replayed them: the second ran 13 %
  // long (2026-12-03, call 5), the third read 2 points less tensor pipe (call 4).
  const std::map<std::string, double> a = {{"duration_ns", 50800}, {"tensor_pipe_pct", 77.4},
                                            {"dram_bytes_read", 100}, {"dram_bytes_write", 40}};
  const std::map<std::string, double> b = {{"duration_ns", 57200}, {"tensor_pipe_pct", 77.5},
                                            {"dram_bytes_read", 300}, {"dram_bytes_write", 10}};
  const std::map<std::string, double> c = {{"duration_ns", 50900}, {"tensor_pipe_pct", 75.4},
                                            {"dram_bytes_read", 200}, {"dram_bytes_write", 5},
                                            {"l2_hit_pct", 80}};
  const std::map<std::string, double> m = MedianOfLaunches({a, b, c});
  EXPECT_DOUBLE_EQ(m.at("duration_ns"), 50900);
  EXPECT_DOUBLE_EQ(m.at("tensor_pipe_pct"), 77.4);
  EXPECT_DOUBLE_EQ(m.at("l2_hit_pct"), 80);  // from the one launch that has it
  EXPECT_DOUBLE_EQ(m.at("launch.samples"), 3);
  EXPECT_NEAR(m.at("launch.duration_spread_pct"), (57200.0 - 50800.0) / 50900.0 * 100.0, 1e-9);
  // The bytes stay consistent: the sum of the two medians, not the median of the sums.
  EXPECT_DOUBLE_EQ(m.at("dram_bytes"), 200 + 10);  // the median of the sums would be 205
  // An even count takes the mean of the middle two; one launch has no spread.
  const std::map<std::string, double> two = MedianOfLaunches({a, b});
  EXPECT_DOUBLE_EQ(two.at("duration_ns"), (50800 + 57200) / 2.0);
  EXPECT_DOUBLE_EQ(two.at("launch.samples"), 2);
  const std::map<std::string, double> one = MedianOfLaunches({c});
  EXPECT_DOUBLE_EQ(one.at("duration_ns"), 50900);
  EXPECT_EQ(one.count("launch.duration_spread_pct"), 0u);
  EXPECT_DOUBLE_EQ(one.at("launch.samples"), 1);
}

TEST(MetricCatalog, DeriveFromPartsMakesTheL2HitRateFromLookupsUnlessMeasuredDirectly) {
  std::map<std::string, double> v = {{"l2_sectors_hit", 300}, {"l2_sectors", 400}};
  DeriveFromParts(&v);
  EXPECT_DOUBLE_EQ(v.at("l2_hit_pct"), 75.0);  // 300 of 400 sectors hit
  std::map<std::string, double> none = {{"l2_sectors_hit", 0}, {"l2_sectors", 0}};
  DeriveFromParts(&none);
  EXPECT_DOUBLE_EQ(none.at("l2_hit_pct"), 0.0);  // no sectors: no NaN
  std::map<std::string, double> over = {{"l2_sectors_hit", 401}, {"l2_sectors", 400}};  // two executions
  DeriveFromParts(&over);
  EXPECT_DOUBLE_EQ(over.at("l2_hit_pct"), 100.0);
  std::map<std::string, double> direct = {{"l2_sectors_hit", 300}, {"l2_sectors", 400}, {"l2_hit_pct", 74.0}};
  DeriveFromParts(&direct);
  EXPECT_DOUBLE_EQ(direct.at("l2_hit_pct"), 74.0);  // a phase range measures the rate itself
  std::map<std::string, double> half = {{"l2_sectors_hit", 300}};
  DeriveFromParts(&half);
  EXPECT_FALSE(half.count("l2_hit_pct"));
}

// The roofline's derived counters: flops.fp32 = 10 + 20 + 2 * 30 = 90; flops.fp16 = 1 + 2 + 2 * 3 = 9;
// no flops.fp64 (dfma missing); bytes.l1 = 128 * 5 = 640; bytes.l2 = 32 * 7 = 224; bytes.dram =
// dram_bytes = 100 + 50.
TEST(MetricCatalog, DeriveFromPartsMakesTheRooflineWorkAndTrafficWithTheirUnits) {
  std::map<std::string, double> v = {{"sass.fadd", 10},        {"sass.fmul", 20},      {"sass.ffma", 30},
                                     {"sass.hadd", 1},         {"sass.hmul", 2},       {"sass.hfma", 3},
                                     {"sass.dadd", 4},         {"sass.dmul", 4},       {"l1_writeback_cycles", 5},
                                     {"dram_bytes_read", 100}, {"dram_bytes_write", 50},   {"l2_xbar_cycles", 7}};
  DeriveFromParts(&v);
  EXPECT_DOUBLE_EQ(v.at("flops.fp32"), 90.0);
  EXPECT_DOUBLE_EQ(v.at("flops.fp16"), 9.0);
  EXPECT_FALSE(v.count("flops.fp64"));
  EXPECT_DOUBLE_EQ(v.at("bytes.l1"), 640.0);
  EXPECT_DOUBLE_EQ(v.at("bytes.l2"), 224.0);
  EXPECT_DOUBLE_EQ(v.at("bytes.dram"), 150.0);
  EXPECT_DOUBLE_EQ(v.at("dram_bytes"), 150.0);
  for (const char* name : {"flops.fp32", "flops.fp16", "flops.fp64"}) EXPECT_EQ(DerivedMetricUnits().at(name), "flop");
  for (const char* name : {"bytes.l1", "bytes.l2", "bytes.dram", "dram_bytes"}) EXPECT_EQ(DerivedMetricUnits().at(name), "bytes");
  // The catalog's own roofline entries are counters too, so kernel aggregates sum them.
  for (const MetricEntry& e : MetricCatalog()) {
    if (e.name.rfind("flops.", 0) == 0) EXPECT_EQ(e.unit, "flop") << e.name;
    if (e.group == MetricGroup::kWork) EXPECT_FALSE(e.percent) << e.name;
  }
}

TEST(MetricCatalog, WithoutDerivedDropsTheL2HitRateOnlyWhenBothPartsAreThere) {
  const ResolvedMetric rate{"l2_hit_pct", "%", "lts__t_sector_hit_rate.pct", MetricGroup::kCore, true};
  const ResolvedMetric hit{"l2_sectors_hit", "sector", "lts__t_sectors_lookup_hit.sum", MetricGroup::kCore, false};
  const ResolvedMetric miss{"l2_sectors", "sector", "lts__t_sectors.sum", MetricGroup::kCore, false};
  auto names = [](const std::vector<ResolvedMetric>& ms) {
    std::vector<std::string> out;
    for (const ResolvedMetric& m : ms) out.push_back(m.name);
    return out;
  };
  EXPECT_EQ(names(WithoutDerived({rate, hit, miss})), (std::vector<std::string>{"l2_sectors_hit", "l2_sectors"}));
  EXPECT_EQ(names(WithoutDerived({rate, hit})), (std::vector<std::string>{"l2_hit_pct", "l2_sectors_hit"}));
}

TEST(MetricCatalog, PackSinglePassFirstFitAndSetsAsideWhatNeedsMorePasses) {
  // A fake chip: each counter has a weight, a pass holds weight 4; "bad" is not configurable.
  const std::map<std::string, int> weight = {{"a", 2}, {"b", 3}, {"c", 2}, {"d", 5}, {"e", 1}, {"f", 1}};
  PassCounter passes = [&](const std::vector<std::string>& perfworks) -> absl::StatusOr<size_t> {
    int w = 0;
    for (const std::string& p : perfworks) {
      auto it = weight.find(p);
      if (it == weight.end()) return absl::InvalidArgumentError(p);
      w += it->second;
    }
    return static_cast<size_t>((w + 3) / 4);
  };
  auto m = [](const std::string& n) { return ResolvedMetric{n, "", n, MetricGroup::kCore, false}; };
  const SinglePassPlan plan = PackSinglePass({m("a"), m("b"), m("c"), m("d"), m("bad"), m("e"), m("f")}, passes);
  auto names = [](const std::vector<ResolvedMetric>& g) {
    std::vector<std::string> out;
    for (const ResolvedMetric& r : g) out.push_back(r.name);
    return out;
  };
  ASSERT_EQ(plan.groups.size(), 3u);
  EXPECT_THAT(names(plan.groups[0]), ElementsAre("a", "c"));  // b (3) did not fit beside a (2); c did
  EXPECT_THAT(names(plan.groups[1]), ElementsAre("b", "e"));  // e fits beside b, not beside a + c
  EXPECT_THAT(names(plan.groups[2]), ElementsAre("f"));       // both full: f opens a group
  EXPECT_THAT(names(plan.rest), ElementsAre("d", "bad"));     // d needs 2 passes alone, bad none
  EXPECT_TRUE(PackSinglePass({}, passes).groups.empty());
}

// The one-pass groups the metrics layer profiles on one launch instead of `metrics_launches`: the
// ones that only count instructions. On GH100 the core set's last three groups are such (pipe
// instruction counts); a group with a rate or a duration is not.
TEST(MetricCatalog, OnlyInstructionCountsAreTheSameOnEveryLaunch) {
  auto m = [](const std::string& n, const std::string& unit) {
    return ResolvedMetric{n, unit, n, MetricGroup::kCore, unit == "%"};
  };
  EXPECT_TRUE(CountsInstructionsOnly({m("inst_pipe.cbu", "inst"), m("inst_pipe.xu", "inst")}));
  EXPECT_TRUE(CountsInstructionsOnly({m("sass.fadd", "thread inst")}));
  EXPECT_FALSE(CountsInstructionsOnly({m("inst_pipe.lsu", "inst"), m("fma_pipe_pct", "%")}));
  EXPECT_FALSE(CountsInstructionsOnly({m("warp_instructions", "inst"), m("duration_ns", "ns")}));
  EXPECT_FALSE(CountsInstructionsOnly({m("l2_xbar_cycles", "cycles")}));
  EXPECT_FALSE(CountsInstructionsOnly({}));
  // Every instruction counter of the catalog has one of the two units.
  for (const MetricEntry& e : MetricCatalog()) {
    if (absl::StartsWith(e.name, "inst_pipe.") || absl::StartsWith(e.name, "sass.")) {
      EXPECT_TRUE(e.unit == "inst" || e.unit == "thread inst") << e.name << ": " << e.unit;
    }
  }
}

TEST(StallSamples, PoolsIssuedAndNotIssuedSamplesPerReason) {
  EXPECT_EQ(NormalizeStallReason("smsp__pcsamp_warps_issue_stalled_long_scoreboard"), "long_scoreboard");
  EXPECT_EQ(NormalizeStallReason("smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued"),
            "long_scoreboard");
  EXPECT_EQ(NormalizeStallReason("smsp__pcsamp_sample_count"), "");
  StallSamples s;
  s.Add("copy_kernel", "smsp__pcsamp_warps_issue_stalled_long_scoreboard", 90);
  s.Add("copy_kernel", "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued", 9);
  s.Add("copy_kernel", "smsp__pcsamp_warps_issue_stalled_selected", 1);
  s.Add("copy_kernel", "smsp__pcsamp_sample_count", 1000);  // a total, not a reason: ignored
  s.Add("fma_kernel", "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle", 3);
  s.AddDropped(7);
  EXPECT_EQ(s.total(), 103u);
  EXPECT_EQ(s.dropped(), 7u);
  const auto shares = s.Shares("copy_kernel");
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_DOUBLE_EQ(shares.at("long_scoreboard"), 0.99);
  EXPECT_DOUBLE_EQ(shares.at("selected"), 0.01);
  EXPECT_TRUE(s.Shares("unknown").empty());
}

KernelFacts Conv(double share, double fma, double tensor) {
  KernelFacts k;
  k.name = "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nchw";
  k.op = "aten::cudnn_convolution";
  k.phase = "fwd";
  k.category = "conv";
  k.share = share;
  k.blocks = 1024;
  k.metrics = {{"fma_pipe_pct", fma}, {"tensor_pipe_pct", tensor}, {"issue_active_pct", 90.0}};
  return k;
}

TEST(Findings, FmaBoundConvolutionWithIdleTensorCores) {
  FindingsOptions o;
  o.sm_count = 132;
  const auto f = FindKernelFindings({Conv(0.5, 80.0, 0.0)}, o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule(), "tensor_cores_idle");
  EXPECT_THAT(f[0].finding(), HasSubstr("FP32 FMA-bound convolution"));
  EXPECT_THAT(f[0].finding(), HasSubstr("Tensor Cores idle"));
  // s = 0.80 x (1 - 67/495); priority = 0.5 x s.
  EXPECT_NEAR(f[0].speedup(), 0.8 * (1.0 - 67.0 / 495.0), 1e-12);
  EXPECT_NEAR(f[0].priority(), 0.5 * f[0].speedup(), 1e-12);
  // With Tensor Cores busy (TF32) the finding disappears.
  EXPECT_TRUE(FindKernelFindings({Conv(0.5, 10.0, 60.0)}, o).empty());
}

// An elementwise kernel at 1 ms moving 3.2 GB through DRAM (4 TB/s roof): memory-bound at 80 % of
// the DRAM roof, s = 0.5 x 0.80. The same kernel's DRAM throughput counter alone would not have fired
// the old rule (55 % < 60); the roofline knows. A kernel it places latency-bound (1 GB: 25 %) gets no
// memory_bound finding even with a DRAM counter at 70 %.
TEST(Findings, TheRooflineDecidesMemoryBoundWhereItCanPlaceTheKernel) {
  KernelFacts k;
  k.name = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)";
  k.op = "aten::add";
  k.category = "elementwise";
  k.share = 0.2;
  k.blocks = 4096;
  k.metrics = {{"duration_ns", 1e6}, {"bytes.dram", 3.2e9}, {"flops.fp32", 8e8}, {"dram_throughput_pct", 55.0},
               {"sm_throughput_pct", 20.0}};
  FindingsOptions o;
  o.sm_count = 132;
  o.roofs = {{"dram", {4e12, true}}, {"fp32", {6e13, false}}};
  auto f = FindKernelFindings({k}, o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule(), "memory_bound");
  EXPECT_EQ(f[0].finding(), "elementwise kernel memory-bound at 80 % of DRAM roof: fuse it with its neighbours");
  EXPECT_NEAR(f[0].speedup(), 0.4, 1e-12);
  k.metrics = {{"duration_ns", 1e6}, {"bytes.dram", 1e9}, {"dram_throughput_pct", 70.0}, {"sm_throughput_pct", 20.0}};
  EXPECT_TRUE(FindKernelFindings({k}, o).empty());
  // Without roofs the DRAM counter rule stands in.
  o.roofs.clear();
  f = FindKernelFindings({k}, o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_THAT(f[0].finding(), HasSubstr("DRAM 70% of peak"));
}

// The Tensor Core estimate takes the chip's own FP32/TF32 ratio from the roofs when it has both.
TEST(Findings, IdleTensorCoresUseTheRoofsPeakRatio) {
  FindingsOptions o;
  o.roofs = {{"fp32", {19.5e12, false}}, {"tensor_tf32", {156e12, false}}};  // A100: 1/8
  const auto f = FindKernelFindings({Conv(0.5, 80.0, 0.0)}, o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NEAR(f[0].speedup(), 0.8 * (1.0 - 0.125), 1e-12);
}

TEST(Findings, SmallGridNeedsNoCountersAndNamesTheGroupNormStatistics) {
  KernelFacts k;
  k.name =
      "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float, float>(long, float, float "
      "const*, float*, float*)";
  k.op = "aten::native_group_norm";
  k.phase = "fwd";
  k.category = "norm";
  k.share = 0.39;
  k.blocks = 32;
  FindingsOptions o;
  o.sm_count = 132;
  const auto f = FindKernelFindings({k}, o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule(), "small_grid");
  EXPECT_EQ(f[0].finding(), "GroupNorm statistics: 32 blocks on 132 SMs");
  EXPECT_NEAR(f[0].speedup(), 1.0 - 32.0 / 132.0, 1e-12);
  EXPECT_NEAR(f[0].priority(), 0.39 * (1.0 - 32.0 / 132.0), 1e-12);
}

TEST(Findings, ASmallGridExplainsTheLatencyOfTheSameKernel) {
  // RowwiseMoments on the H200 (opt1): 32 blocks, issue slots 14 % busy, 81 % of the warp
  // cycles on long_scoreboard. The grid is the finding; its estimate is the larger one.
  KernelFacts k;
  k.name =
      "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float>(long, float, float const*, "
      "float*, float*)";
  k.op = "aten::native_group_norm";
  k.category = "norm";
  k.share = 0.148;
  k.blocks = 32;
  k.metrics = {{"issue_active_pct", 14.0}, {"cpi", 100.0}, {"stall.long_scoreboard", 81.0}};
  FindingsOptions o;
  o.sm_count = 132;
  const auto f = FindKernelFindings({k}, o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule(), "small_grid");
  EXPECT_EQ(f[0].finding(), "GroupNorm statistics: 32 blocks on 132 SMs");
  EXPECT_NEAR(f[0].speedup(), 0.81, 1e-12);
  EXPECT_NEAR(f[0].priority(), 0.148 * 0.81, 1e-12);
}

TEST(Findings, SortedByPriorityAndLatencyCappedByIssueHeadroom) {
  KernelFacts copy;
  copy.name = "elementwise_kernel";
  copy.category = "elementwise";
  copy.share = 0.2;
  copy.blocks = 4096;
  copy.metrics = {{"dram_throughput_pct", 80.0},   {"sm_throughput_pct", 20.0},
                  {"issue_active_pct", 10.0},      {"cpi", 100.0},
                  {"stall.long_scoreboard", 90.0}, {"stall.selected", 1.0}};
  FindingsOptions o;
  o.sm_count = 132;
  const auto f = FindKernelFindings({Conv(0.3, 80.0, 0.0), copy}, o);
  ASSERT_EQ(f.size(), 2u);
  // copy: memory_bound 0.4, stall_long_scoreboard min(0.9, 1 - 0.10) = 0.9 -> priority 0.18;
  // conv: 0.3 x 0.69 = 0.207 -> first.
  EXPECT_EQ(f[0].category(), "conv");
  EXPECT_EQ(f[1].rule(), "stall_long_scoreboard");
  EXPECT_NEAR(f[1].speedup(), 0.9, 1e-12);
  EXPECT_NEAR(f[1].priority(), 0.18, 1e-12);
  EXPECT_THAT(f[1].finding(), HasSubstr("90% of warp cycles stalled on long_scoreboard"));
}

// A rule that fires on the aggregate is checked on each measured signature; the finding names the
// ones it holds for when not all do.
TEST(Findings, AFindingThatHoldsForOneSignatureOnlySaysWhich) {
  KernelFacts k = Conv(0.4, 45.0, 0.0);  // aggregate: FMA 45 %, Tensor Cores idle
  k.signatures = {{"aaaaaaaaaaaa", "aten::cudnn_convolution", "f32[1,64,128,128,128]", 1024,
                   {{"fma_pipe_pct", 80.0}, {"tensor_pipe_pct", 0.0}, {"issue_active_pct", 90.0}}},
                  {"bbbbbbbbbbbb", "aten::cudnn_convolution", "f32[1,256,8,8,8]", 16,
                   {{"fma_pipe_pct", 10.0}, {"tensor_pipe_pct", 0.0}, {"issue_active_pct", 90.0}}}};
  FindingsOptions o;
  o.sm_count = 0;  // no small_grid: the 16-block signature must not change the rule
  const auto f = FindKernelFindings({k}, o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule(), "tensor_cores_idle");
  EXPECT_EQ(f[0].finding(),
            "FP32 FMA-bound convolution (FMA pipe 45%), Tensor Cores idle (signature aaaaaaaaaaaa only: "
            "aten::cudnn_convolution f32[1,64,128,128,128])");
  // Holding for every signature: nothing added.
  k.signatures[1].metrics["fma_pipe_pct"] = 60.0;
  EXPECT_EQ(FindKernelFindings({k}, o)[0].finding(), "FP32 FMA-bound convolution (FMA pipe 45%), Tensor Cores idle");
}

// Med-DDPM's output convolution (64 -> 1 channel, 3x3x3, 128³) under TF32 on the H100: useful
// 2 · 64 · 27 · 128³ = 7.248e9 FLOPs (conv_work_test.cc), the Tensor Cores' 4.639e11 = 64x: the
// GEMM pads C_out = 1 to its tile. s = (1 − 1/64) × 0.30 (tensor pipe 30 %) = 0.2953125. A
// convolution whose Tensor Core work matches its shapes (64 -> 64: 4.638e11 for 4.639e11) has none.
TEST(Findings, TensorCoreWorkFarAboveTheConvolutionsUsefulFlopsIsPadding) {
  const std::string out_conv = "f32[1,64,128,128,128]cl f32[1,64,3,3,3]cl [1,1,1] [1,1,1] [1,1,1] 1 false false true";
  const std::string wide_conv = "f32[1,64,128,128,128]cl f32[64,64,3,3,3]cl [1,1,1] [1,1,1] [1,1,1] 1 false false true";
  KernelFacts k;
  k.name = "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc";
  k.op = "aten::cudnn_convolution";
  k.category = "conv";
  k.share = 0.1;
  k.metrics = {{"tensor_pipe_pct", 30.0}, {"flops.tensor_tf32", 2 * 4.639e11}};
  k.signatures = {{"aaaaaaaaaaaa", "aten::cudnn_convolution", out_conv, 4096,
                   {{"tensor_pipe_pct", 30.0}, {"flops.tensor_tf32", 64 * 7247757312.0}}},
                  {"bbbbbbbbbbbb", "aten::cudnn_convolution", wide_conv, 4096,
                   {{"tensor_pipe_pct", 60.0}, {"flops.tensor_tf32", 463856467968.0}}}};
  FindingsOptions o;
  // Over both signatures: (64 + 64) × 7.248e9 executed for (1 + 64) × 7.248e9 useful: 1.97x, below 2.
  EXPECT_TRUE(FindKernelFindings({k}, o).empty());
  k.signatures.pop_back();
  const auto f = FindKernelFindings({k}, o);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule(), "tensor_padding");
  EXPECT_NEAR(f[0].speedup(), (1.0 - 1.0 / 64.0) * 0.30, 1e-12);
  EXPECT_EQ(f[0].finding(),
            "convolution 64 -> 1 channels: the Tensor Cores execute 64.0x its useful FLOPs (4.64e+11 for 7.25e+09); "
            "a channel count below the GEMM tile is padded up to it");
  // One signature's facts (no signature list): the shapes come with the facts.
  KernelFacts one = k;
  one.signatures.clear();
  one.shapes = out_conv;
  one.metrics = {{"tensor_pipe_pct", 30.0}, {"flops.tensor_tf32", 64 * 7247757312.0}};
  ASSERT_EQ(FindKernelFindings({one}, o).size(), 1u);
  // Without shapes that parse, or without Tensor Core FLOPs (strict FP32), no finding.
  one.shapes = "f32[1,64,128,128,128]";
  EXPECT_TRUE(FindKernelFindings({one}, o).empty());
  one.shapes = out_conv;
  one.metrics = {{"tensor_pipe_pct", 0.0}, {"flops.fp32", 7247757312.0}};
  EXPECT_TRUE(FindKernelFindings({one}, o).empty());
}

}  // namespace
}  // namespace medprof::profiler
