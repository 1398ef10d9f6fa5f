// The CUPTI profiler host API needs no GPU: resolve medprof's metric catalog for real chips
// with libcupti on this machine (spec/cupti.md §1.3 has the pass counts it must reproduce).
#include "agent/profiler/cupti_host.h"

#include <algorithm>
#include <map>
#include <set>

#include "agent/profiler/counter_session.h"
#include "agent/profiler/metric_catalog.h"
#include "common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::profiler {
namespace {

using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

ResolvedCatalog Resolve(const std::string& chip, CuptiHost& host, const std::vector<MetricEntry>& catalog) {
  return ResolveCatalog(catalog, chip, [&](const std::string& m) { return host.Validity(m); });
}

// The pass count of a configuration on `host`, as PackSinglePass asks for it.
PassCounter PassesOn(CuptiHost& host) {
  return [&host](const std::vector<std::string>& perfworks) -> absl::StatusOr<size_t> {
    MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<CuptiHost::Config> c, host.NewConfig(perfworks));
    return c->passes();
  };
}

std::string PerfworksOf(const ResolvedCatalog& r, const std::string& name) {
  for (const ResolvedMetric& m : r.metrics) {
    if (m.name == name) return m.perfworks;
  }
  return "";
}

TEST(CuptiHost, HopperResolvesTheWholeCatalogWithHgmmaOnlyTensorUtilization) {
  auto host = CuptiHost::Create(CUPTI_PROFILER_TYPE_RANGE_PROFILER, "GH100", {});
  ASSERT_TRUE(host.ok()) << host.status();
  const ResolvedCatalog r = Resolve("GH100", **host, MetricCatalog());
  EXPECT_TRUE(r.dropped.empty()) << r.dropped.front().name << ": " << r.dropped.front().reason;
  EXPECT_EQ(r.metrics.size(), MetricCatalog().size());
  EXPECT_EQ(PerfworksOf(r, "tensor_pipe_pct"),
            "sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active");
  // Pass counts (spec/cupti.md §1.3 measured 5 for a 26-counter core set; ours has 25 plus IPC/issue).
  auto core = (*host)->NewConfig(r.PerfworksNames({MetricGroup::kCore}));
  ASSERT_TRUE(core.ok()) << core.status();
  EXPECT_GE((*core)->passes(), 4u);
  EXPECT_LE((*core)->passes(), 8u);
  auto sass = (*host)->NewConfig(r.PerfworksNames({MetricGroup::kSass}));
  ASSERT_TRUE(sass.ok()) << sass.status();
  EXPECT_EQ((*sass)->passes(), 1u);
  EXPECT_FALSE((*sass)->image().empty());
}

TEST(CuptiHost, HopperCountsEveryCoreMetricInOnePassSessionsWithTheL2HitRateFromItsParts) {
  auto host = CuptiHost::Create(CUPTI_PROFILER_TYPE_RANGE_PROFILER, "GH100", {});
  ASSERT_TRUE(host.ok()) << host.status();
  const ResolvedCatalog r = Resolve("GH100", **host, MetricCatalog());
  const std::vector<ResolvedMetric> core = r.InGroups({MetricGroup::kCore});
  const PassCounter passes = PassesOn(**host);
  auto core_of = [&](const std::string& name) {
    for (const ResolvedMetric& m : core) {
      if (m.name == name) return m;
    }
    return ResolvedMetric{};
  };
  // The L2 hit rate needs 2 passes alone; each of its parts counts in one.
  EXPECT_EQ(PackSinglePass({core_of("l2_hit_pct")}, passes).rest.size(), 1u);
  const std::vector<ResolvedMetric> counted = WithoutDerived(core);
  EXPECT_EQ(counted.size() + 1, core.size());
  for (const ResolvedMetric& m : counted) EXPECT_NE(m.name, "l2_hit_pct");
  const SinglePassPlan plan = PackSinglePass(counted, passes);
  EXPECT_TRUE(plan.rest.empty()) << plan.rest.front().name;
  EXPECT_GE(plan.groups.size(), 2u);
  EXPECT_LE(plan.groups.size(), 8u);
  std::map<std::string, size_t> group_of;
  size_t placed = 0;
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    std::vector<std::string> perfworks;
    for (const ResolvedMetric& m : plan.groups[g]) {
      perfworks.push_back(m.perfworks);
      group_of[m.name] = g;
      ++placed;
    }
    auto n = passes(perfworks);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, 1u) << "group " << g;
  }
  EXPECT_EQ(placed, counted.size());
  EXPECT_EQ(group_of.size(), placed) << "every metric in one group only";
  // The cycles and instructions behind IPC and clock come from the same execution as the duration.
  EXPECT_EQ(group_of.at("sm_cycles"), group_of.at("duration_ns"));
  EXPECT_EQ(group_of.at("warp_instructions"), group_of.at("duration_ns"));
  EXPECT_EQ(group_of.at("dram_bytes_read"), group_of.at("dram_bytes_write"));
}

// The L2 hit rate the kernel sessions derive (100 * l2_sectors_hit / l2_sectors) reads exactly the
// raw counters Perfworks computes lts__t_sector_hit_rate.pct from, on every chip medprof targets.
TEST(CuptiHost, TheL2HitRateIsComputedFromTheRawCountersOfItsTwoParts) {
  for (const char* chip : {"GV100", "GA100", "GH100"}) {
    auto rate = MetricRawCounters(chip, "lts__t_sector_hit_rate.pct");
    auto hit = MetricRawCounters(chip, "lts__t_sectors_lookup_hit.sum");
    auto sectors = MetricRawCounters(chip, "lts__t_sectors.sum");
    ASSERT_TRUE(rate.ok() && hit.ok() && sectors.ok()) << chip << ": " << rate.status() << hit.status() << sectors.status();
    std::vector<std::string> parts = *hit;
    parts.insert(parts.end(), sectors->begin(), sectors->end());
    std::sort(parts.begin(), parts.end());
    std::sort(rate->begin(), rate->end());
    EXPECT_EQ(*rate, parts) << chip;
    auto miss = MetricRawCounters(chip, "lts__t_sectors_lookup_miss.sum");  // not the denominator's part
    ASSERT_TRUE(miss.ok());
    for (const std::string& m : *miss) EXPECT_EQ(std::count(rate->begin(), rate->end(), m), 0) << chip;
  }
}

TEST(CuptiHost, OlderChipsDropWhatTheyLackWithTheReason) {
  auto ga100 = CuptiHost::Create(CUPTI_PROFILER_TYPE_RANGE_PROFILER, "GA100", {});
  ASSERT_TRUE(ga100.ok()) << ga100.status();
  const ResolvedCatalog a = Resolve("GA100", **ga100, MetricCatalog());
  ASSERT_EQ(a.dropped.size(), 2u);
  EXPECT_EQ(a.dropped[0].name, "stall.gmma");  // wgmma is Hopper-only
  EXPECT_THAT(a.dropped[0].reason, HasSubstr("CUPTI_ERROR_INVALID_METRIC_NAME"));
  EXPECT_EQ(a.dropped[1].name, "flops.tensor_fp8");  // FP8 Tensor Cores from Hopper on
  EXPECT_EQ(PerfworksOf(a, "tensor_pipe_pct"),
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active");

  auto gv100 = CuptiHost::Create(CUPTI_PROFILER_TYPE_RANGE_PROFILER, "GV100", {});
  ASSERT_TRUE(gv100.ok()) << gv100.status();
  const ResolvedCatalog v = Resolve("GV100", **gv100, MetricCatalog());
  std::vector<std::string> dropped;
  for (const DroppedMetric& d : v.dropped) dropped.push_back(d.name);
  EXPECT_THAT(dropped, ::testing::UnorderedElementsAre("inst_pipe.uniform", "stall.gmma", "flops.tensor_tf32",
                                                       "flops.tensor_bf16", "flops.tensor_fp8"));
}

// The roofline's counters per chip (metric_catalog.cc says why each): which Perfworks metric each
// chip gives, and the work group's pass count (replayed on one launch per signature).
TEST(CuptiHost, TheRooflineCountersResolvePerChip) {
  const std::map<std::string, size_t> work_passes = {{"GH100", 5}, {"GA100", 4}, {"GV100", 2}};
  const std::map<std::string, std::map<std::string, std::string>> expected = {
      {"GH100",
       {{"flops.tensor_tf32", "sm__ops_path_tensor_src_tf32_dst_fp32.sum"},
        {"flops.tensor_fp16", "sm__ops_path_tensor_src_fp16.sum"},
        {"flops.tensor_bf16", "sm__ops_path_tensor_src_bf16_dst_fp32.sum"},
        {"flops.tensor_fp8", "sm__ops_path_tensor_src_fp8.sum"},
        {"l2_xbar_cycles", "lts__lts2xbar_cycles_active.sum"},
        {"l1_writeback_cycles", "l1tex__lsu_writeback_active.sum"},
        {"sass.ffma", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"}}},
      {"GA100",
       {{"flops.tensor_tf32", "sm__ops_path_tensor_src_tf32_dst_fp32.sum"},
        {"flops.tensor_fp16", "sm__ops_path_tensor_src_fp16_dst_fp32.sum"},
        {"flops.tensor_bf16", "sm__ops_path_tensor_src_bf16_dst_fp32.sum"},
        {"flops.tensor_fp8", ""},
        {"l1_writeback_cycles", "l1tex__lsu_writeback_active_mem_lg.sum"}}},
      {"GV100",
       {{"flops.tensor_tf32", ""},
        {"flops.tensor_fp16", "sm__ops_path_tensor_src_fp16_dst_fp32.sum"},
        {"l2_xbar_cycles", "lts__lts2xbar_cycles_active.sum"},
        {"l1_writeback_cycles", "l1tex__lsu_writeback_active.sum"}}}};
  for (const auto& [chip, names] : expected) {
    auto host = CuptiHost::Create(CUPTI_PROFILER_TYPE_RANGE_PROFILER, chip, {});
    ASSERT_TRUE(host.ok()) << chip << ": " << host.status();
    const ResolvedCatalog r = Resolve(chip, **host, MetricCatalog());
    for (const auto& [name, perfworks] : names) EXPECT_EQ(PerfworksOf(r, name), perfworks) << chip << " " << name;
    auto work = (*host)->NewConfig(r.PerfworksNames({MetricGroup::kWork}));
    ASSERT_TRUE(work.ok()) << chip << ": " << work.status();
    EXPECT_EQ((*work)->passes(), work_passes.at(chip)) << chip;
  }
}

// The work group goes through one-pass sessions as the core set does (MetricsLayer::
// ProfileOnePassFirst): every counter that counts in one pass alone is packed into one-pass
// configurations; the few that need several passes even alone are what kernel replay is left with.
TEST(CuptiHost, TheRooflineWorkCountersPackIntoOnePassSessionsExceptTheMultiPassOnes) {
  const std::map<std::string, std::pair<size_t, std::set<std::string>>> expected = {
      {"GH100", {3, {"l1_writeback_cycles", "flops.tensor_fp16"}}},
      {"GA100", {4, {"l2_xbar_cycles"}}},
      {"GV100", {2, {}}}};
  for (const auto& [chip, want] : expected) {
    auto host = CuptiHost::Create(CUPTI_PROFILER_TYPE_RANGE_PROFILER, chip, {});
    ASSERT_TRUE(host.ok()) << chip << ": " << host.status();
    const ResolvedCatalog r = Resolve(chip, **host, MetricCatalog());
    const PassCounter passes = PassesOn(**host);
    const std::vector<ResolvedMetric> work = r.InGroups({MetricGroup::kWork});
    const SinglePassPlan plan = PackSinglePass(work, passes);
    EXPECT_EQ(plan.groups.size(), want.first) << chip;
    std::set<std::string> rest;
    for (const ResolvedMetric& m : plan.rest) {
      rest.insert(m.name);
      auto alone = passes({m.perfworks});
      ASSERT_TRUE(alone.ok()) << chip << " " << m.name << ": " << alone.status();
      EXPECT_GT(*alone, 1u) << chip << " " << m.name << " counts in one pass alone, yet was not packed";
    }
    EXPECT_EQ(rest, want.second) << chip;
    size_t placed = 0;
    for (const auto& group : plan.groups) {
      std::vector<std::string> perfworks;
      for (const ResolvedMetric& m : group) perfworks.push_back(m.perfworks);
      placed += group.size();
      auto n = passes(perfworks);
      ASSERT_TRUE(n.ok()) << chip << ": " << n.status();
      EXPECT_EQ(*n, 1u) << chip;
    }
    EXPECT_EQ(placed + plan.rest.size(), work.size()) << chip;
  }
}

TEST(CuptiHost, PmSamplingSetIsSinglePassOnHopperAndAbsentOnVolta) {
  auto host = CuptiHost::Create(CUPTI_PROFILER_TYPE_PM_SAMPLING, "GH100", {});
  ASSERT_TRUE(host.ok()) << host.status();
  const ResolvedCatalog r = Resolve("GH100", **host, PmSamplingCatalog());
  EXPECT_TRUE(r.dropped.empty());
  auto cfg = (*host)->NewConfig(r.PerfworksNames({MetricGroup::kCore}));
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ((*cfg)->passes(), 1u);
  EXPECT_THAT(CuptiHost::Create(CUPTI_PROFILER_TYPE_PM_SAMPLING, "GV100", {}).status(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("CUPTI_ERROR_NOT_SUPPORTED")));
}

// The V100 path: the legacy Profiling API's host half (Perfworks) builds a configuration for the
// catalog resolved on GV100, with the pass count the profiler host API computes for it.
TEST(LegacyCounterApi, VoltaConfigurationBuildsWithoutAGpu) {
  if (!LegacyCounterApiCompiled()) GTEST_SKIP() << "built without nvperf_host.h";
  auto host = CuptiHost::Create(CUPTI_PROFILER_TYPE_RANGE_PROFILER, "GV100", {});
  ASSERT_TRUE(host.ok()) << host.status();
  const ResolvedCatalog r = Resolve("GV100", **host, MetricCatalog());
  const std::vector<std::string> core = r.PerfworksNames({MetricGroup::kCore});
  auto passes = LegacyConfigPasses("GV100", core);
  ASSERT_TRUE(passes.ok()) << passes.status();
  auto config = (*host)->NewConfig(core);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*passes, (*config)->passes());
  EXPECT_THAT(LegacyConfigPasses("GV100", {"sm__no_such_metric.sum"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sm__no_such_metric.sum")));
  EXPECT_EQ(DefaultCounterApi(7, 0), CounterApi::kLegacy);
  EXPECT_EQ(DefaultCounterApi(7, 5), CounterApi::kRangeProfiler);
  EXPECT_EQ(DefaultCounterApi(9, 0), CounterApi::kRangeProfiler);
}

TEST(CuptiHost, UnknownMetricNamesAreReportedNotFatal) {
  auto host = CuptiHost::Create(CUPTI_PROFILER_TYPE_RANGE_PROFILER, "GH100", {});
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ((*host)->Validity("gpu__time_duration.sum"), "");
  EXPECT_THAT((*host)->Validity("sm__no_such_metric.sum"), HasSubstr("CUPTI_ERROR"));
  EXPECT_THAT((*host)->NewConfig({}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no metrics")));
}

// The core set's one-pass groups that the metrics layer profiles on one launch (instruction counts
// only: the pipe instruction counters) and those it profiles on metrics_launches, per chip.
TEST(CuptiHost, TheCoreSetsInstructionCountGroupsArePerChip) {
  const std::map<std::string, std::pair<size_t, size_t>> expected = {  // chip -> (groups, instruction-only)
      {"GH100", {6, 3}},
      {"GA100", {5, 3}},
      {"GV100", {4, 2}}};
  for (const auto& [chip, want] : expected) {
    auto host = CuptiHost::Create(CUPTI_PROFILER_TYPE_RANGE_PROFILER, chip, {});
    ASSERT_TRUE(host.ok()) << chip << ": " << host.status();
    const ResolvedCatalog r = Resolve(chip, **host, MetricCatalog());
    const SinglePassPlan plan = PackSinglePass(WithoutDerived(r.InGroups({MetricGroup::kCore})), PassesOn(**host));
    EXPECT_EQ(plan.groups.size(), want.first) << chip;
    EXPECT_EQ(std::count_if(plan.groups.begin(), plan.groups.end(), CountsInstructionsOnly), want.second) << chip;
    // The group with the duration is never one of them.
    for (const auto& group : plan.groups) {
      const bool has_duration = std::any_of(group.begin(), group.end(),
                                            [](const ResolvedMetric& m) { return m.name == "duration_ns"; });
      if (has_duration) EXPECT_FALSE(CountsInstructionsOnly(group)) << chip;
    }
  }
}

}  // namespace
}  // namespace medprof::profiler
