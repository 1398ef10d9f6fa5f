// common/ncu_csv: the `ncu --csv --page raw` parser, unit conversion, metric mapping and the
// per-kernel / per-run aggregation, on a hand-made export in ncu's exact format
// (tests/testdata/ncu/tiny_raw.csv: 4 launches of 3 kernels, ==PROF== lines, thousands
// separators, n/a, a units row with usecond / Mbyte / Kbyte / Kbyte/block).
#include "common/ncu_csv.h"
#include "common/kernel_aggregate.h"

#include <sys/resource.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <streambuf>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::ncu {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kConv[] = "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x32x16";

std::string ReadTestData(const std::string& name) {
  const char* src = std::getenv("MEDPROF_SOURCE_DIR");
  std::ifstream in(std::string(src == nullptr ? "." : src) + "/tests/testdata/ncu/" + name, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// (scope, name) -> metric.
std::map<std::pair<std::string, std::string>, NcuMetric> ByKey(const NcuRun& run) {
  std::map<std::pair<std::string, std::string>, NcuMetric> out;
  for (const NcuMetric& m : run.metrics) out[{m.scope, m.name}] = m;
  return out;
}

using MetricMap = std::map<std::pair<std::string, std::string>, NcuMetric>;

// The metric, or a NaN-valued one (which fails every comparison) when absent.
NcuMetric At(MetricMap& m, const std::string& scope, const std::string& name) {
  auto it = m.find({scope, name});
  if (it == m.end()) {
    ADD_FAILURE() << "no metric " << scope << " / " << name;
    return NcuMetric{scope, name, std::nan(""), "<absent>"};
  }
  return it->second;
}

TEST(NcuCsvTest, ParsesHeaderUnitsAndLaunchRowsSkippingProfLines) {
  auto t = ParseNcuCsv(ReadTestData("tiny_raw.csv"));
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_EQ(t->columns.size(), 27u);
  EXPECT_EQ(t->columns[4], "Kernel Name");
  EXPECT_EQ(t->units[t->ColumnIndex("gpu__time_duration.sum")], "usecond");
  EXPECT_EQ(t->units[0], "");
  ASSERT_EQ(t->rows.size(), 4u);
  EXPECT_EQ(t->rows[1][4],
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)");
  EXPECT_EQ(t->rows[0][t->ColumnIndex("Grid Size")], "(2,048, 1, 1)");
  EXPECT_THAT(t->row_lines, ElementsAre(5, 6, 7, 8));
  EXPECT_EQ(t->ColumnIndex("no such column"), -1);
}

TEST(NcuCsvTest, SummarizesKernelsWithTaxonomyAndFirstLaunchShape) {
  auto t = ParseNcuCsv(ReadTestData("tiny_raw.csv"));
  ASSERT_THAT(t.status(), IsOk());
  auto run = SummarizeNcu(*t);
  ASSERT_THAT(run.status(), IsOk());
  EXPECT_EQ(run->launches, 4);
  EXPECT_EQ(run->gpu_time_ns, 2600000);
  EXPECT_EQ(run->host, "gpu-node-7");
  EXPECT_EQ(run->process, "medprof-worker");
  EXPECT_EQ(run->compute_capability, "9.0");
  EXPECT_EQ(run->device_name, "NVIDIA H200");
  ASSERT_EQ(run->kernels.size(), 3u);
  const NcuKernel& conv = run->kernels[0];
  EXPECT_EQ(conv.name, kConv);
  EXPECT_EQ(conv.category, "conv");
  EXPECT_EQ(conv.count, 2);
  EXPECT_EQ(conv.total_ns, 2500000);
  EXPECT_EQ(conv.min_ns, 1249500);
  EXPECT_EQ(conv.max_ns, 1250500);
  EXPECT_THAT(conv.grid, ElementsAre(2048, 1, 1));
  EXPECT_THAT(conv.block, ElementsAre(128, 1, 1));
  EXPECT_EQ(conv.registers, 128);
  EXPECT_EQ(conv.shared_bytes, 16380);  // 16.38 Kbyte/block
  EXPECT_DOUBLE_EQ(conv.theoretical_occupancy, 0.25);
  EXPECT_EQ(run->kernels[1].category, "layout");  // cudnn nchwToNhwcKernel, 60 us
  EXPECT_EQ(run->kernels[1].total_ns, 60000);
  EXPECT_EQ(run->kernels[2].category, "elementwise");
  EXPECT_EQ(run->kernels[2].total_ns, 40000);
  EXPECT_THAT(run->kernels[2].grid, ElementsAre(4096, 1, 1));
}

// The export covers two steps: the kernel's counters are per step; a kernel with one signature
// gets the same rates as the signature.
TEST(NcuCsvTest, KernelCountersArePerStep) {
  auto t = ParseNcuCsv(ReadTestData("tiny_raw.csv"));
  ASSERT_THAT(t.status(), IsOk());
  auto run = SummarizeNcu(*t, /*steps=*/2);
  ASSERT_THAT(run.status(), IsOk());
  auto m = ByKey(*run);
  const std::string k = std::string("kernel:") + kConv;
  EXPECT_DOUBLE_EQ(At(m, k, "duration_ns").value, 1250000);
  EXPECT_DOUBLE_EQ(At(m, k, "launches_per_step").value, 1);
  const int32_t grid[3] = {2048, 1, 1}, block[3] = {128, 1, 1};
  const std::string sig = "signature:" + aggregate::SignatureId(kConv, "", "", "", grid, block, 0);
  EXPECT_DOUBLE_EQ(At(m, k, "tensor_pipe_pct").value, At(m, sig, "tensor_pipe_pct").value);
}

TEST(NcuCsvTest, MapsMetricsToMedprofNamesWithUnitConversion) {
  auto t = ParseNcuCsv(ReadTestData("tiny_raw.csv"));
  ASSERT_THAT(t.status(), IsOk());
  auto run = SummarizeNcu(*t);
  ASSERT_THAT(run.status(), IsOk());
  auto m = ByKey(*run);
  const std::string k = std::string("kernel:") + kConv;

  // Run scope: sums of counters, duration-weighted means of percentages (".avg").
  EXPECT_DOUBLE_EQ(At(m, "run", "gpu_time_ns").value, 2600000);
  EXPECT_NEAR(At(m, "run", "share.conv").value, 2500000.0 / 2600000.0, 1e-12);
  EXPECT_NEAR(At(m, "run", "share.layout").value, 60000.0 / 2600000.0, 1e-12);
  EXPECT_NEAR(At(m, "run", "share.elementwise").value, 40000.0 / 2600000.0, 1e-12);
  EXPECT_DOUBLE_EQ(At(m, "run", "metrics.kernels_profiled").value, 3);
  EXPECT_DOUBLE_EQ(At(m, "run", "sm_cycles").value, 3591000);
  EXPECT_EQ(At(m, "run", "sm_cycles").unit, "cycles");
  EXPECT_DOUBLE_EQ(At(m, "run", "warp_instructions").value, 4920000);
  EXPECT_NEAR(At(m, "run", "dram_bytes_read").value, 66e6, 1e-3);
  EXPECT_NEAR(At(m, "run", "dram_bytes_write").value, 1048500, 1e-6);
  EXPECT_NEAR(At(m, "run", "dram_bytes").value, 67048500, 1e-3);
  EXPECT_EQ(At(m, "run", "dram_bytes").unit, "bytes");
  EXPECT_NEAR(At(m, "run", "tensor_pipe_pct.avg").value, 197499.4 / 2600.0, 1e-9);
  EXPECT_NEAR(At(m, "run", "l2_hit_pct.avg").value, 184799.8 / 2600.0, 1e-9);
  EXPECT_EQ(At(m, "run", "l2_hit_pct.avg").unit, "%");
  EXPECT_EQ((m.count({"run", "ncu.smsp__pcsamp_sample_count"})), 0u);  // unknowns stay per kernel

  // Kernel scope: the aggregate over all launches per step (one step here): counters summed, rates
  // duration-weighted, every launch measured.
  EXPECT_DOUBLE_EQ(At(m, k, "duration_ns").value, 2500000);
  EXPECT_EQ(At(m, k, "duration_ns").unit, "ns");
  EXPECT_DOUBLE_EQ(At(m, k, "sm_cycles").value, 3454000);
  EXPECT_DOUBLE_EQ(At(m, k, "warp_instructions").value, 4800000);
  EXPECT_NEAR(At(m, k, "dram_bytes").value, 26024000, 1e-3);
  EXPECT_DOUBLE_EQ(At(m, k, "coverage_pct").value, 100);
  EXPECT_DOUBLE_EQ(At(m, k, "launches_per_step").value, 2);
  // Signature scope: its two launches (one grid and block) per launch.
  const int32_t grid[3] = {2048, 1, 1}, block[3] = {128, 1, 1};
  const std::string sig = "signature:" + aggregate::SignatureId(kConv, "", "", "", grid, block, 0);
  EXPECT_DOUBLE_EQ(At(m, sig, "duration_ns").value, 1250000);
  EXPECT_DOUBLE_EQ(At(m, sig, "sm_cycles").value, 1727000);
  EXPECT_DOUBLE_EQ(At(m, sig, "warp_instructions").value, 2400000);
  ASSERT_EQ(run->signatures.size(), 3u);
  EXPECT_EQ(run->signatures[0].kernel, kConv);
  EXPECT_EQ(run->signatures[0].count, 2);
  EXPECT_THAT(run->warnings, ::testing::Contains(::testing::HasSubstr("grouped by kernel + grid + block")));
  EXPECT_NEAR(At(m, k, "tensor_pipe_pct").value, 197499.4 / 2500.0, 1e-9);
  EXPECT_NEAR(At(m, k, "fma_pipe_pct").value, (3.10 * 1250.5 + 2.90 * 1249.5) / 2500.0, 1e-9);
  EXPECT_NEAR(At(m, k, "stall.long_scoreboard").value, 4499.95 / 2500.0, 1e-9);
  EXPECT_EQ(At(m, k, "stall.long_scoreboard").unit, "cycles/issue");
  EXPECT_NEAR(At(m, k, "l1_hit_pct").value, (12.40 * 1250.5 + 12.60 * 1249.5) / 2500.0, 1e-9);
  EXPECT_DOUBLE_EQ(At(m, k, "ncu.smsp__pcsamp_sample_count").value, 1024);
  EXPECT_DOUBLE_EQ(At(m, k, "ncu.launch__registers_per_thread").value, 128);
  EXPECT_EQ(At(m, k, "ncu.launch__registers_per_thread").unit, "register/thread");
  // n/a values are skipped, not zeros: the elementwise kernel has no pcsamp value at all.
  const std::string ew = std::string("kernel:") + run->kernels[2].name;
  EXPECT_EQ((m.count({ew, "ncu.smsp__pcsamp_sample_count"})), 0u);
  EXPECT_DOUBLE_EQ(At(m, ew, "dram_throughput_pct").value, 88.0);
  // The string column is environment, not a metric.
  EXPECT_EQ((m.count({k, "ncu.device__attribute_display_name"})), 0u);
}

TEST(NcuCsvTest, NormalizesUnits) {
  EXPECT_DOUBLE_EQ(NormalizeUnit(1.5, "usecond").value, 1500);
  EXPECT_EQ(NormalizeUnit(1.5, "usecond").unit, "ns");
  EXPECT_DOUBLE_EQ(NormalizeUnit(2, "msecond").value, 2e6);
  EXPECT_DOUBLE_EQ(NormalizeUnit(4.0e-05, "second").value, 40000);
  EXPECT_DOUBLE_EQ(NormalizeUnit(7, "nsecond").value, 7);
  EXPECT_DOUBLE_EQ(NormalizeUnit(3, "Kbyte").value, 3000);
  EXPECT_EQ(NormalizeUnit(3, "Kbyte").unit, "byte");
  EXPECT_DOUBLE_EQ(NormalizeUnit(2, "Gbyte/second").value, 2e9);
  EXPECT_EQ(NormalizeUnit(2, "Gbyte/second").unit, "byte/second");
  EXPECT_DOUBLE_EQ(NormalizeUnit(1.2, "Mcycle").value, 1.2e6);
  EXPECT_DOUBLE_EQ(NormalizeUnit(1.98, "Ghz").value, 1.98e9);
  EXPECT_EQ(NormalizeUnit(50, "%").unit, "%");
  EXPECT_EQ(NormalizeUnit(5, "furlong").unit, "furlong");
  EXPECT_DOUBLE_EQ(NormalizeUnit(5, "furlong").value, 5);
}

TEST(NcuCsvTest, ParsesNumbersAsNcuPrintsThem) {
  EXPECT_EQ(ParseNcuNumber("1,234,567.5"), 1234567.5);
  EXPECT_EQ(ParseNcuNumber(" 42 "), 42);
  EXPECT_EQ(ParseNcuNumber("4.0e-05"), 4.0e-05);
  EXPECT_EQ(ParseNcuNumber("n/a"), std::nullopt);
  EXPECT_EQ(ParseNcuNumber(""), std::nullopt);
  EXPECT_EQ(ParseNcuNumber("NVIDIA H200"), std::nullopt);
  EXPECT_EQ(ParseNcuNumber("inf"), std::nullopt);
}

TEST(NcuCsvTest, MapsFamiliesAndKeepsUnknownNames) {
  EXPECT_EQ(MapNcuMetric("smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio", "").name,
            "stall.mio_throttle");
  EXPECT_EQ(MapNcuMetric("sm__inst_executed_pipe_fma.sum", "inst").name, "inst_pipe.fma");
  EXPECT_EQ(MapNcuMetric("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "").name, "sass.ffma");
  EXPECT_EQ(MapNcuMetric("lts__t_sector_hit_rate.pct", "%").name, "l2_hit_pct");
  const MetricMapping unknown = MapNcuMetric("sm__warps_launched.sum", "warp");
  EXPECT_EQ(unknown.name, "ncu.sm__warps_launched.sum");
  EXPECT_EQ(unknown.unit, "warp");
  EXPECT_FALSE(unknown.known);
  // HMMA+HGMMA+QGMMA cycles win over HMMA cycles when both are exported.
  EXPECT_LT(MapNcuMetric("sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active", "%").priority,
            MapNcuMetric("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "%").priority);
}

// An export with the roofline's raw counters gets the same flops.* and bytes.* as the worker stores
// (roofline::DeriveWorkAndTraffic). Two launches of one kernel in one step, per launch:
// fadd 1e6 + fmul 2e6 + 2 x ffma 3e6 = 9e6 FP32 FLOPs; 5e8 TF32 Tensor Core ops; DRAM 10 MB;
// L2 32 x 625 000 L2-to-crossbar cycles = 20 MB; L1 128 x 1e5 writeback cycles = 12.8 MB. Kernel counters are per step
// (both launches summed), the signature's per launch.
TEST(NcuCsvTest, RooflineWorkAndTrafficFromTheRawCounters) {
  const std::string csv =
      "\"ID\",\"Kernel Name\",\"Block Size\",\"Grid Size\",\"gpu__time_duration.sum\",\"dram__bytes.sum\","
      "\"lts__lts2xbar_cycles_active.sum\",\"l1tex__lsu_writeback_active_mem_lg.sum\","
      "\"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum\",\"smsp__sass_thread_inst_executed_op_fmul_pred_on.sum\","
      "\"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum\",\"sm__ops_path_tensor_src_tf32_dst_fp32.sum\"\n"
      "\"\",\"\",\"\",\"\",\"usecond\",\"Mbyte\",\"cycle\",\"cycle\",\"inst\",\"inst\",\"inst\",\"\"\n"
      "\"0\",\"k\",\"(128, 1, 1)\",\"(64, 1, 1)\",\"100\",\"10\",\"625,000\",\"100,000\",\"1,000,000\",\"2,000,000\","
      "\"3,000,000\",\"500,000,000\"\n"
      "\"1\",\"k\",\"(128, 1, 1)\",\"(64, 1, 1)\",\"100\",\"10\",\"625,000\",\"100,000\",\"1,000,000\",\"2,000,000\","
      "\"3,000,000\",\"500,000,000\"\n";
  auto t = ParseNcuCsv(csv);
  ASSERT_THAT(t.status(), IsOk());
  auto run = SummarizeNcu(*t, /*steps=*/1);
  ASSERT_THAT(run.status(), IsOk());
  auto m = ByKey(*run);
  EXPECT_DOUBLE_EQ(At(m, "kernel:k", "flops.fp32").value, 2 * 9e6);
  EXPECT_EQ(At(m, "kernel:k", "flops.fp32").unit, "flop");
  EXPECT_DOUBLE_EQ(At(m, "kernel:k", "flops.tensor_tf32").value, 2 * 5e8);
  EXPECT_DOUBLE_EQ(At(m, "kernel:k", "bytes.dram").value, 2 * 10e6);
  EXPECT_DOUBLE_EQ(At(m, "kernel:k", "bytes.l2").value, 2 * 20e6);
  EXPECT_DOUBLE_EQ(At(m, "kernel:k", "bytes.l1").value, 2 * 12.8e6);
  const int32_t grid[3] = {64, 1, 1}, block[3] = {128, 1, 1};
  const std::string sig = "signature:" + aggregate::SignatureId("k", "", "", "", grid, block, 0);
  EXPECT_DOUBLE_EQ(At(m, sig, "flops.fp32").value, 9e6);
  EXPECT_DOUBLE_EQ(At(m, sig, "bytes.l1").value, 12.8e6);
}

TEST(NcuCsvTest, AcceptsCrlfBomAndNoUnitsRow) {
  const std::string text =
      "\xEF\xBB\xBF\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\r\n"
      "\"0\",\"k, with \"\"comma\"\"\",\"1,000\"\r\n"
      "\"1\",\"k, with \"\"comma\"\"\",\"3,000\"\r\n";
  auto t = ParseNcuCsv(text);
  ASSERT_THAT(t.status(), IsOk());
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0][1], "k, with \"comma\"");
  auto run = SummarizeNcu(*t);
  ASSERT_THAT(run.status(), IsOk());
  ASSERT_EQ(run->kernels.size(), 1u);
  EXPECT_EQ(run->kernels[0].count, 2);
  EXPECT_EQ(run->kernels[0].total_ns, 4000);  // no unit: taken as ns
}

TEST(NcuCsvTest, RefusesWhatIsNotARawPageExport) {
  EXPECT_THAT(ParseNcuCsv("").status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no header row")));
  EXPECT_THAT(ParseNcuCsv("==PROF== nothing profiled\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--page raw")));
  EXPECT_THAT(
      ParseNcuCsv("\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n").status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("details page")));
  EXPECT_THAT(ParseNcuCsv("\"ID\",\"Name\"\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"Kernel Name\"")));
  EXPECT_THAT(ParseNcuCsv("\"ID\",\"Kernel Name\",\"x\"\n\"0\",\"k\"\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 2: 2 fields, but the header (line 1) has 3")));
  EXPECT_THAT(ParseNcuCsv("\"ID\",\"Kernel Name\"\n\"0\",\"never closed\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 2: a quoted field is not closed")));
  EXPECT_THAT(ParseNcuCsv("\"ID\",\"Kernel Name\",\"ID\"\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("column 3 'ID' appears twice")));
}

// Numbers at the edge of a double (what a fuzzer feeds) neither overflow nor become NaN metrics.
TEST(NcuCsvTest, HugeValuesSaturateInsteadOfOverflowing) {
  auto t = ParseNcuCsv(
      "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\",\"sm__cycles_elapsed.avg\",\"lts__t_sector_hit_rate.pct\"\n"
      "\"\",\"\",\"second\",\"cycle\",\"%\"\n"
      "\"0\",\"k\",\"1e290\",\"1e308\",\"1e308\"\n"
      "\"1\",\"k\",\"1e290\",\"1e308\",\"50\"\n"
      "\"2\",\"j\",\"1e290\",\"1\",\"50\"\n");
  ASSERT_THAT(t.status(), IsOk());
  auto run = SummarizeNcu(*t);
  ASSERT_THAT(run.status(), IsOk());
  EXPECT_EQ(run->launches, 3);
  EXPECT_EQ(run->gpu_time_ns, INT64_MAX);
  for (const NcuMetric& m : run->metrics) EXPECT_TRUE(std::isfinite(m.value)) << m.scope << " " << m.name;
  MetricMap m = ByKey(*run);
  EXPECT_DOUBLE_EQ(At(m, "kernel:k", "l2_hit_pct").value, 75);  // 1e308 % clamps to 100
}

TEST(NcuCsvTest, SummaryNeedsLaunchesAndDurations) {
  auto no_rows = ParseNcuCsv("\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"nsecond\"\n");
  ASSERT_THAT(no_rows.status(), IsOk());
  EXPECT_THAT(SummarizeNcu(*no_rows).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no kernel launches")));
  auto no_dur = ParseNcuCsv("\"ID\",\"Kernel Name\",\"sm__cycles_elapsed.avg\"\n\"0\",\"k\",\"5\"\n");
  ASSERT_THAT(no_dur.status(), IsOk());
  EXPECT_THAT(SummarizeNcu(*no_dur).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no gpu__time_duration.sum column")));
  auto bad_dur = ParseNcuCsv("\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"0\",\"k\",\"5\"\n\"1\",\"k\",\"n/a\"\n");
  ASSERT_THAT(bad_dur.status(), IsOk());
  EXPECT_THAT(SummarizeNcu(*bad_dur).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 3: gpu__time_duration.sum 'n/a'")));
}

}  // namespace
}  // namespace medprof::ncu

namespace medprof::ncu {
namespace {

// The real export from the H200 (tests/testdata/ncu/README.md): 60 launches of 14 kernels of
// one opt1 forward step; expected values recomputed from the CSV by hand (Python csv module).
TEST(NcuCsvRealExportTest, H200Opt1ForwardSummarizes) {
  const std::string text = ReadTestData("h200_opt1_forward_raw.csv");
  ASSERT_GT(text.size(), 100000u);
  auto t = ParseNcuCsv(text);
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_EQ(t->columns.size(), 301u);
  EXPECT_EQ(t->units[t->ColumnIndex("gpu__time_duration.sum")], "ns");
  auto run = SummarizeNcu(*t);
  ASSERT_THAT(run.status(), IsOk());
  EXPECT_EQ(run->launches, 60);
  EXPECT_EQ(run->kernels.size(), 14u);
  EXPECT_EQ(run->gpu_time_ns, 18957120);
  EXPECT_EQ(run->device_name, "NVIDIA H200");
  EXPECT_EQ(run->compute_capability, "9.0");

  const NcuKernel& top = run->kernels[0];
  EXPECT_THAT(top.name, ::testing::StartsWith("void at::<unnamed>::RowwiseMomentsCUDAKernel<float>"));
  EXPECT_EQ(top.category, "norm");
  EXPECT_EQ(top.count, 6);
  EXPECT_EQ(top.total_ns, 7791136);
  EXPECT_EQ(top.min_ns, 57824);
  EXPECT_EQ(top.max_ns, 3383392);
  EXPECT_THAT(top.grid, ElementsAre(32, 1, 1));
  EXPECT_THAT(top.block, ElementsAre(512, 1, 1));
  EXPECT_EQ(top.registers, 27);
  const NcuKernel& conv = run->kernels[1];
  EXPECT_THAT(conv.name, ::testing::StartsWith("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw"));
  EXPECT_EQ(conv.category, "conv");
  EXPECT_EQ(conv.count, 6);
  EXPECT_EQ(conv.total_ns, 6286912);
  EXPECT_THAT(conv.grid, ElementsAre(1, 16384, 1));
  EXPECT_EQ(run->kernels[3].category, "layout");  // cudnn::nchwToNhwcKernel

  MetricMap m = ByKey(*run);
  const std::string k = "kernel:" + conv.name;
  EXPECT_NEAR(At(m, k, "tensor_pipe_pct").value, 55.910627, 1e-5);
  EXPECT_NEAR(At(m, k, "l2_hit_pct").value, 93.027944, 1e-5);
  EXPECT_NEAR(At(m, k, "sm_cycles").value, 1875542.18 * 6, 1e-2);  // six launches, one step
  EXPECT_NEAR(At(m, k, "warp_instructions").value, 300993024.0 * 6, 1e-1);
  EXPECT_NEAR(At(m, k, "duration_ns").value, 6286912.0, 1e-6);
  // ncu reads 444.30 % L2 hits on a tiny launch: percentages are clamped to 0..100.
  EXPECT_NEAR(At(m, "kernel:" + top.name, "l2_hit_pct").value, 0.363229, 1e-5);
  EXPECT_NEAR(At(m, "run", "sm_cycles").value, 36227154.38, 1e-3);
  EXPECT_NEAR(At(m, "run", "warp_instructions").value, 4383690962.0, 1e-1);
  EXPECT_NEAR(At(m, "run", "tensor_pipe_pct.avg").value, 18.773583, 1e-5);
  EXPECT_NEAR(At(m, "run", "share.conv").value, (6286912.0 + 56032.0) / 18957120.0, 1e-9);
  // Device properties and NVTX columns are not metrics; launch attributes are kept as ncu.*.
  for (const NcuMetric& metric : run->metrics) {
    EXPECT_FALSE(absl::StrContains(metric.name, "device__attribute_")) << metric.name;
    EXPECT_FALSE(absl::StrContains(metric.name, "Domain")) << metric.name;
  }
  EXPECT_DOUBLE_EQ(At(m, k, "ncu.launch__registers_per_thread").value, 168);
}

}  // namespace
}  // namespace medprof::ncu

namespace medprof::ncu {
namespace {

// Issue 22 case 7: import-ncu streams. SummarizeNcuStream gives what ParseNcuCsv + SummarizeNcu
// give (same kernels, metrics and refusals), holds one record at a time, and stops at the line
// where the export can no longer fit one import request instead of reading everything first.

absl::StatusOr<NcuRun> Whole(const std::string& text) {
  auto t = ParseNcuCsv(text);
  if (!t.ok()) return t.status();
  return SummarizeNcu(*t);
}

absl::StatusOr<NcuRun> Streamed(const std::string& text, size_t max_request = 15 << 20) {
  std::istringstream in(text);
  return SummarizeNcuStream(in, size_t{1} << 30, max_request);
}

TEST(NcuCsvStreamTest, SameResultAsTheWholeText) {
  for (const std::string& text :
       {ReadTestData("tiny_raw.csv"), ReadTestData("h200_opt1_forward_raw.csv"),
        std::string("\xEF\xBB\xBF\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\r\n"
                    "\"0\",\"k, with \"\"comma\"\"\nand a line\",\"1,000\"\r\n\"1\",\"j\",\"3,000\"\r\n")}) {
    auto whole = Whole(text);
    auto streamed = Streamed(text);
    ASSERT_THAT(whole.status(), IsOk());
    ASSERT_THAT(streamed.status(), IsOk());
    EXPECT_EQ(streamed->launches, whole->launches);
    EXPECT_EQ(streamed->gpu_time_ns, whole->gpu_time_ns);
    EXPECT_EQ(streamed->host, whole->host);
    ASSERT_EQ(streamed->kernels.size(), whole->kernels.size());
    for (size_t i = 0; i < whole->kernels.size(); ++i) {
      EXPECT_EQ(streamed->kernels[i].name, whole->kernels[i].name);
      EXPECT_EQ(streamed->kernels[i].total_ns, whole->kernels[i].total_ns);
      EXPECT_EQ(streamed->kernels[i].grid, whole->kernels[i].grid);
    }
    ASSERT_EQ(streamed->metrics.size(), whole->metrics.size());
    for (size_t i = 0; i < whole->metrics.size(); ++i) {
      EXPECT_EQ(streamed->metrics[i].scope, whole->metrics[i].scope);
      EXPECT_EQ(streamed->metrics[i].name, whole->metrics[i].name);
      EXPECT_DOUBLE_EQ(streamed->metrics[i].value, whole->metrics[i].value);
    }
    EXPECT_EQ(streamed->warnings, whole->warnings);
  }
}

TEST(NcuCsvStreamTest, SameRefusals) {
  for (const std::string& text :
       {std::string(""), std::string("\"ID\",\"Kernel Name\",\"x\"\n\"0\",\"k\"\n"),
        std::string("\"ID\",\"Kernel Name\"\n\"0\",\"never closed\n"),
        std::string("\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"0\",\"k\",\"5\"\n\"1\",\"k\",\"n/a\"\n"),
        std::string("\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"nsecond\"\n"),
        std::string("\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n")}) {
    auto whole = Whole(text);
    auto streamed = Streamed(text);
    ASSERT_FALSE(whole.ok()) << text;
    EXPECT_THAT(streamed.status(), StatusIs(absl::StatusCode::kInvalidArgument, std::string(whole.status().message())))
        << text;
  }
}

// An export made row by row as it is read, counting the bytes handed out.
class GeneratedExport : public std::streambuf {
 public:
  GeneratedExport(std::string header, size_t rows, std::function<std::string(size_t)> row)
      : header_(std::move(header)), rows_(rows), row_(std::move(row)) {}
  size_t produced() const { return produced_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (next_ > rows_) return traits_type::eof();
    buf_ = next_ == 0 ? header_ : row_(next_ - 1);
    ++next_;
    produced_ += buf_.size();
    setg(buf_.data(), buf_.data(), buf_.data() + buf_.size());
    return traits_type::to_int_type(*gptr());
  }

 private:
  std::string header_;
  size_t rows_;
  std::function<std::string(size_t)> row_;
  size_t next_ = 0, produced_ = 0;
  std::string buf_;
};

const char kHeader[] =
    "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\",\"sm__cycles_elapsed.avg\",\"dram__bytes.sum\","
    "\"lts__t_sector_hit_rate.pct\",\"smsp__inst_executed.sum\",\"unknown__metric_a.sum\"\n"
    "\"\",\"\",\"nsecond\",\"cycle\",\"byte\",\"%\",\"inst\",\"\"\n";

std::string Row(size_t i, const std::string& kernel) {
  return absl::StrCat("\"", i, "\",\"", kernel, "\",\"", 1000 + i % 7, "\",\"", 5000 + i % 11, "\",\"", 4096 + i,
                      "\",\"", 50 + i % 40, "\",\"", 100 + i, "\",\"", i, "\"\n");
}

TEST(NcuCsvStreamTest, StopsAtTheLineWhereTheExportNoLongerFitsOneRequest) {
  // A kernel name per launch, 2 GB if read to the end: the stream stops after about 1 MiB.
  GeneratedExport gen(kHeader, 20'000'000, [](size_t i) {
    return Row(i, absl::StrCat("void distinct_kernel_", i, "<float, 128>(Params<float>)"));
  });
  std::istream in(&gen);
  auto run = SummarizeNcuStream(in, size_t{4} << 30, size_t{1} << 20);
  EXPECT_THAT(run.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("stopped here: the kernels and mapped metrics so far already need")));
  EXPECT_LT(gen.produced(), size_t{8} << 20) << "read only up to the limit, not the whole export";
}

TEST(NcuCsvStreamTest, ALargeExportOfFewKernelsStreamsInBoundedMemory) {
  constexpr size_t kRows = 300'000;  // ~19 MB of CSV
  GeneratedExport gen(kHeader, kRows, [](size_t i) { return Row(i, absl::StrCat("kernel_", i % 3)); });
  std::istream in(&gen);
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  auto run = SummarizeNcuStream(in, size_t{1} << 30, size_t{15} << 20);
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  ASSERT_THAT(run.status(), IsOk());
  EXPECT_EQ(run->launches, static_cast<int64_t>(kRows));
  EXPECT_EQ(run->kernels.size(), 3u);
  EXPECT_GT(gen.produced(), size_t{15} << 20);
  // The table of 300,000 launches would take hundreds of MB; the stream holds one record.
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 32 * 1024) << "peak RSS grew by KiB";
}

}  // namespace
}  // namespace medprof::ncu
