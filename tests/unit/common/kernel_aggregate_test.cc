// AggregateKernel (common/kernel_aggregate.h): a kernel's row from its measured launch signatures,
// on a worked example whose numbers are checked by hand in the comments.
#include "common/kernel_aggregate.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace medprof::aggregate {
namespace {

bool Counter(const std::string& name) {
  static const std::map<std::string, std::string> kUnits = {
      {"duration_ns", "ns"},  {"sm_cycles", "cycles"}, {"warp_instructions", "inst"}, {"dram_bytes", "bytes"},
      {"tensor_pipe_pct", "%"}, {"ipc", "inst/cycle"}, {"launch.duration_spread_pct", "%"}};
  auto u = kUnits.find(name);
  return u != kUnits.end() && IsCounterUnit(u->second);
}

// Kernel K: 1000 ns of trace time per step. Signature A: 2 launches a step, 600 ns; B: 4 launches,
// 300 ns; a third signature (100 ns) was not measured, so the coverage is 900 / 1000 = 90 %.
std::vector<SignatureSample> Example() {
  SignatureSample a{{{"duration_ns", 290}, {"sm_cycles", 500}, {"tensor_pipe_pct", 40}, {"ipc", 2.0},
                     {"dram_bytes", 100}, {"launch.samples", 3}, {"launch.grid_x", 32},
                     {"launch.duration_spread_pct", 1.0}},
                    2,
                    600};
  SignatureSample b{{{"duration_ns", 80}, {"sm_cycles", 150}, {"tensor_pipe_pct", 10}, {"ipc", 0.5},
                     {"launch.samples", 2}, {"launch.duration_spread_pct", 4.0}},
                    4,
                    300};
  return {a, b};
}

TEST(AggregateKernel, WorkedExample) {
  const std::map<std::string, double> k = AggregateKernel(Example(), 1000, Counter);
  EXPECT_DOUBLE_EQ(k.at("coverage_pct"), 90.0);
  // Counters per step, extrapolated to the whole kernel: (290*2 + 80*4) / 0.9 = 900 / 0.9 = 1000 ns
  // (the trace's own 1000 ns); cycles (500*2 + 150*4) / 0.9 = 1600 / 0.9 = 1777.8.
  EXPECT_DOUBLE_EQ(k.at("duration_ns"), 1000.0);
  EXPECT_NEAR(k.at("sm_cycles"), 1777.7778, 1e-3);
  // Only A has DRAM bytes: its own coverage 600 / 1000, so 100*2 / 0.6 = 333.3.
  EXPECT_NEAR(k.at("dram_bytes"), 333.3333, 1e-3);
  // Rates weighted by measured time per step, w = duration * launches: A 580, B 320, Σ 900.
  // tensor (40*580 + 10*320) / 900 = 26400 / 900 = 29.33 %; ipc (2*580 + 0.5*320) / 900 = 1.4667.
  EXPECT_NEAR(k.at("tensor_pipe_pct"), 29.3333, 1e-3);
  EXPECT_NEAR(k.at("ipc"), 1.4667, 1e-3);
  EXPECT_NEAR(k.at("launch.duration_spread_pct"), (1.0 * 580 + 4.0 * 320) / 900, 1e-9);
  EXPECT_DOUBLE_EQ(k.at("launch.samples"), 2.0);  // the fewest of any signature
  EXPECT_DOUBLE_EQ(k.at("launches_per_step"), 6.0);
  EXPECT_DOUBLE_EQ(k.at("signatures.profiled"), 2.0);
  EXPECT_EQ(k.count("launch.grid_x"), 0u);  // per signature only
}

TEST(AggregateKernel, OneSignatureWithOneLaunchIsThatLaunch) {
  const SignatureSample a = Example()[0];
  SignatureSample one{a.values, 1, 290};
  const std::map<std::string, double> k = AggregateKernel({one}, 290, Counter);
  for (const std::string name : {"duration_ns", "sm_cycles", "tensor_pipe_pct", "ipc", "dram_bytes"}) {
    EXPECT_DOUBLE_EQ(k.at(name), a.values.at(name)) << name;
  }
  EXPECT_DOUBLE_EQ(k.at("coverage_pct"), 100.0);
}

TEST(AggregateKernel, OneSignatureWithManyLaunchesSumsCountersAndKeepsRates) {
  const SignatureSample a = Example()[0];
  SignatureSample five{a.values, 5, 1450};
  const std::map<std::string, double> k = AggregateKernel({five}, 1450, Counter);
  EXPECT_DOUBLE_EQ(k.at("duration_ns"), 5 * 290.0);
  EXPECT_DOUBLE_EQ(k.at("sm_cycles"), 5 * 500.0);
  EXPECT_DOUBLE_EQ(k.at("tensor_pipe_pct"), 40.0);
  EXPECT_DOUBLE_EQ(k.at("ipc"), 2.0);
}

TEST(AggregateKernel, NothingMeasuredOrNoTimeGivesNoRow) {
  EXPECT_TRUE(AggregateKernel({}, 1000, Counter).empty());
  EXPECT_TRUE(AggregateKernel(Example(), 0, Counter).empty());
}

TEST(IsCounterUnit, ByUnit) {
  EXPECT_TRUE(IsCounterUnit("ns"));
  EXPECT_TRUE(IsCounterUnit("thread inst"));
  EXPECT_TRUE(IsCounterUnit("flop"));
  EXPECT_FALSE(IsCounterUnit("%"));
  EXPECT_FALSE(IsCounterUnit("byte/second"));
  EXPECT_TRUE(IsCounterUnit("", "dram__bytes_read.sum"));
  EXPECT_FALSE(IsCounterUnit("", "sm__throughput.avg.pct_of_peak_sustained_elapsed"));
}

}  // namespace
}  // namespace medprof::aggregate
