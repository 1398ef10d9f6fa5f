// Roofline (common/roofline.h): the binding roof, % of roof and bound class on hand-worked numbers
// (each checked in the comments), the roofs taken from a run's ceilings, and the compare summary.
#include "common/roofline.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::roofline {
namespace {

using ::medprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A chip with round ceilings: DRAM 4 TB/s, L2 10 TB/s, L1 20 TB/s, FP32 60 TFLOP/s, TF32 Tensor Core
// 400 TFLOP/s.
Roofs Chip() {
  return {{"dram", {4e12, true}},  {"l2", {1e13, true}},           {"l1", {2e13, false}},
          {"fp32", {6e13, false}}, {"tensor_tf32", {4e14, true}}};
}

// An elementwise kernel: 1 ms, 1 GFLOP FP32, 3.2 GB at every level.
// t_dram = 3.2e9 / 4e12 = 0.8 ms; t_l2 = 0.32 ms; t_l1 = 0.16 ms; t_c = 1e9 / 6e13 = 16.7 us.
// DRAM binds: 0.8 / 1 = 80 % >= 60 -> memory-bound. Intensity 1e9 / 3.2e9 = 0.3125 FLOP/B;
// achieved 1e9 / 1e-3 = 1e12 FLOP/s and 3.2e9 / 1e-3 = 3.2e12 B/s.
TEST(Roofline, ElementwiseKernelIsMemoryBoundAtEightyPercentOfDram) {
  auto p = Locate({{"duration_ns", 1e6}, {"flops.fp32", 1e9}, {"bytes.dram", 3.2e9}, {"bytes.l2", 3.2e9},
                   {"bytes.l1", 3.2e9}},
                  Chip());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->binding, "dram");
  EXPECT_DOUBLE_EQ(p->roof_ns, 8e5);
  EXPECT_DOUBLE_EQ(p->pct_of_roof, 80.0);
  EXPECT_EQ(p->bound, Bound::kMemory);
  EXPECT_DOUBLE_EQ(p->intensity.at("dram"), 0.3125);
  EXPECT_DOUBLE_EQ(p->flop_per_s, 1e12);
  EXPECT_DOUBLE_EQ(p->bytes_per_s.at("dram"), 3.2e12);
  EXPECT_EQ(Describe(*p), "memory-bound at 80 % of DRAM roof");
}

// A TF32 convolution: 1 ms, 300 GFLOP on Tensor Cores and 6 GFLOP FP32 (epilogue), 0.4 GB DRAM.
// t_c = 3e11 / 4e14 + 6e9 / 6e13 = 0.75 + 0.1 = 0.85 ms (Tensor Cores the larger part);
// t_dram = 4e8 / 4e12 = 0.1 ms. Compute binds at 85 %: compute-bound, named by its TF32 part.
// Attainable = 3.06e11 / 0.85 ms = 3.6e14 FLOP/s = min(compute 3.6e14, DRAM 4e12 * 765 = 3.06e15).
TEST(Roofline, TensorCoreConvolutionIsComputeBoundOnTheMixOfItsClasses) {
  auto p = Locate({{"duration_ns", 1e6}, {"flops.tensor_tf32", 3e11}, {"flops.fp32", 6e9}, {"bytes.dram", 4e8}},
                  Chip());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->flops, 3.06e11);
  EXPECT_EQ(p->binding, "tensor_tf32");
  EXPECT_NEAR(p->roof_ns, 8.5e5, 1e-6);
  EXPECT_NEAR(p->pct_of_roof, 85.0, 1e-9);
  EXPECT_EQ(p->bound, Bound::kCompute);
  EXPECT_DOUBLE_EQ(p->intensity.at("dram"), 765.0);
  EXPECT_NEAR(p->flops / (p->roof_ns * 1e-9), 3.6e14, 1e3);
  EXPECT_EQ(Describe(*p), "compute-bound at 85 % of TF32 Tensor Core roof");
}

// 1 ms for 1 GB of DRAM traffic: t_dram = 0.25 ms = 25 % < 60 -> latency-bound (DRAM still the
// closest roof).
TEST(Roofline, FarBelowEveryRoofIsLatencyBound) {
  auto p = Locate({{"duration_ns", 1e6}, {"bytes.dram", 1e9}, {"flops.fp32", 0}}, Chip());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->binding, "dram");
  EXPECT_DOUBLE_EQ(p->pct_of_roof, 25.0);
  EXPECT_EQ(p->bound, Bound::kLatency);
  EXPECT_EQ(Describe(*p), "latency-bound at 25 % of DRAM roof");
}

// The 60 % line itself: 2.4 GB in 1 ms = 0.6 ms of DRAM time -> memory-bound, not latency-bound.
TEST(Roofline, TheLatencyThresholdIsExclusive) {
  auto p = Locate({{"duration_ns", 1e6}, {"bytes.dram", 2.4e9}}, Chip());
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->pct_of_roof, 60.0);
  EXPECT_EQ(p->bound, Bound::kMemory);
}

// A copy has no FLOPs: its % of roof is its share of the DRAM roof (3.6e9 / 4e12 = 0.9 ms of 1 ms).
TEST(Roofline, ACopyWithoutFlopsStillHasItsPercentOfTheBandwidthRoof) {
  auto p = Locate({{"duration_ns", 1e6}, {"bytes.dram", 3.6e9}}, Chip());
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->pct_of_roof, 90.0);
  EXPECT_EQ(p->bound, Bound::kMemory);
  EXPECT_DOUBLE_EQ(p->flop_per_s, 0.0);
}

TEST(Roofline, WorkWithoutARoofIsNamedAndLeavesTheBoundUnknown) {
  auto p = Locate({{"duration_ns", 1e6}, {"flops.tensor_fp8", 1e12}, {"bytes.l1", 1e9}}, {{"dram", {4e12, true}}});
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(p->unroofed, ElementsAre("tensor_fp8", "l1"));
  EXPECT_EQ(p->bound, Bound::kUnknown);
  EXPECT_EQ(p->binding, "");
  EXPECT_EQ(Describe(*p), "");
  // No counters at all: nothing to place, no error.
  auto none = Locate({{"duration_ns", 5}}, Chip());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->bound, Bound::kUnknown);
}

TEST(Roofline, AScopeWithoutDurationIsRefusedNamingTheField) {
  EXPECT_THAT(Locate({{"flops.fp32", 1e9}}, Chip()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duration_ns")));
  EXPECT_THAT(Locate({{"duration_ns", 0}}, Chip()).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duration_ns")));
}

TEST(Roofline, RoofsPreferTheMeasuredValueThenTheDatasheet) {
  v1::Ceilings c;
  auto add = [&](const char* name, double measured, double datasheet) {
    v1::Ceiling* x = c.add_ceilings();
    x->set_name(name);
    x->set_measured(measured);
    x->set_datasheet(datasheet);
  };
  add("dram", 4.3e12, 4.8e12);
  add("tensor_fp8", 0, 1.9789e15);
  add("l1", 0, 0);
  const Roofs r = RoofsOf(c);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r.at("dram").per_second, 4.3e12);
  EXPECT_TRUE(r.at("dram").measured);
  EXPECT_DOUBLE_EQ(r.at("tensor_fp8").per_second, 1.9789e15);
  EXPECT_FALSE(r.at("tensor_fp8").measured);
}

// The three kernels above, 1 ms each, and one with no roof: (80 + 85 + 25) / 3 = 63.33 % of roof,
// a third of the placed time memory-, compute- and latency-bound each; the unplaced kernel is out.
TEST(Roofline, SummaryWeightsByTimeAndSharesTheBounds) {
  std::vector<Point> points;
  for (const std::map<std::string, double>& v :
       std::vector<std::map<std::string, double>>{
           {{"duration_ns", 1e6}, {"flops.fp32", 1e9}, {"bytes.dram", 3.2e9}},
           {{"duration_ns", 1e6}, {"flops.tensor_tf32", 3e11}, {"flops.fp32", 6e9}, {"bytes.dram", 4e8}},
           {{"duration_ns", 1e6}, {"bytes.dram", 1e9}},
           {{"duration_ns", 7e6}, {"flops.tensor_fp8", 1e12}}}) {
    auto p = Locate(v, Chip());
    ASSERT_TRUE(p.ok());
    points.push_back(*p);
  }
  const Summary s = Summarize(points);
  EXPECT_DOUBLE_EQ(s.duration_ns, 3e6);
  EXPECT_NEAR(s.pct_of_roof, 190.0 / 3, 1e-9);
  EXPECT_DOUBLE_EQ(s.share.at(Bound::kMemory), 1.0 / 3);
  EXPECT_DOUBLE_EQ(s.share.at(Bound::kCompute), 1.0 / 3);
  EXPECT_DOUBLE_EQ(s.share.at(Bound::kLatency), 1.0 / 3);
}

// fadd 1 + fmul 2 + 2 x ffma 3 = 9; read + write = 30 wins over dram_bytes; an export with only
// dram__bytes.sum (dram_bytes) gets it as bytes.dram; 128 B per L1 writeback cycle.
TEST(Roofline, WorkAndTrafficFromTheirParts) {
  std::map<std::string, double> v = {{"sass.fadd", 1}, {"sass.fmul", 2}, {"sass.ffma", 3}, {"dram_bytes_read", 10},
                                     {"dram_bytes_write", 20}, {"dram_bytes", 99}, {"l1_writeback_cycles", 2}};
  DeriveWorkAndTraffic(&v);
  EXPECT_DOUBLE_EQ(v.at("flops.fp32"), 9);
  EXPECT_DOUBLE_EQ(v.at("bytes.dram"), 30);
  EXPECT_DOUBLE_EQ(v.at("bytes.l1"), 256);
  EXPECT_FALSE(v.count("flops.fp16"));
  std::map<std::string, double> ncu = {{"dram_bytes", 99}};
  DeriveWorkAndTraffic(&ncu);
  EXPECT_DOUBLE_EQ(ncu.at("bytes.dram"), 99);
  for (const auto& [name, unit] : DerivedWorkUnits()) EXPECT_TRUE(unit == "flop" || unit == "bytes") << name;
}

}  // namespace
}  // namespace medprof::roofline
