#include "common/metric_names.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace medprof::metrics {
namespace {

MetricEntry E(std::string name, std::string unit, MetricGroup g, std::vector<std::string> candidates,
              bool percent = false) {
  return MetricEntry{std::move(name), std::move(unit), g, std::move(candidates), percent};
}

std::vector<MetricEntry> BuildCatalog() {
  using G = MetricGroup;
  std::vector<MetricEntry> c = {
      E("duration_ns", "ns", G::kCore, {"gpu__time_duration.sum"}),
      E("sm_cycles", "cycles", G::kCore, {"sm__cycles_elapsed.avg"}),
      E("sm_active_cycles", "cycles", G::kCore, {"sm__cycles_active.avg"}),
      E("elapsed_cycles", "cycles", G::kCore, {"gpc__cycles_elapsed.max"}),
      E("warp_instructions", "inst", G::kCore, {"smsp__inst_executed.sum"}),
      E("thread_instructions", "inst", G::kCore, {"smsp__thread_inst_executed.sum"}),
      E("ipc", "inst/cycle", G::kCore, {"sm__inst_executed.avg.per_cycle_active"}),
      E("issue_active_pct", "%", G::kCore, {"smsp__issue_active.avg.pct_of_peak_sustained_active"}, true),
      E("achieved_occupancy_pct", "%", G::kCore, {"sm__warps_active.avg.pct_of_peak_sustained_active"}, true),
      // Tensor Cores from HMMA/HGMMA only: Hopper's split metric excludes HFMA2.MMA (which nvcc
      // emits for constants in plain FP32 code, spec/cupti.md §2.4); older chips: HMMA pipe.
      E("tensor_pipe_pct", "%", G::kCore,
        {"sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active",
         "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
         "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"},
        true),
      E("fma_pipe_pct", "%", G::kCore, {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"}, true),
      E("l1_hit_pct", "%", G::kCore, {"l1tex__t_sector_hit_rate.pct"}, true),
      E("l2_hit_pct", "%", G::kCore, {"lts__t_sector_hit_rate.pct"}, true),
      // The hit rate's two parts (its raw counters): each counts in one pass where the rate itself
      // needs two (GH100). l2_sectors is also the L2's traffic in 32-byte sectors.
      E("l2_sectors_hit", "sector", G::kCore, {"lts__t_sectors_lookup_hit.sum"}),
      E("l2_sectors", "sector", G::kCore, {"lts__t_sectors.sum"}),
      E("dram_throughput_pct", "%", G::kCore,
        {"dram__throughput.avg.pct_of_peak_sustained_elapsed",
         "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"},
        true),
      E("dram_bytes_read", "bytes", G::kCore, {"dram__bytes_read.sum"}),
      E("dram_bytes_write", "bytes", G::kCore, {"dram__bytes_write.sum"}),
  };
  for (const char* p : {"fma", "alu", "lsu", "cbu", "fp64", "xu", "adu", "tensor", "uniform"}) {
    c.push_back(E(absl::StrCat("inst_pipe.", p), "inst", G::kCore,
                  {absl::StrCat("sm__inst_executed_pipe_", p, ".sum")}));
  }
  c.push_back(E("cpi", "cycles/inst", G::kStalls, {"smsp__average_warp_latency_per_inst_issued.ratio"}));
  for (const char* r :
       {"long_scoreboard", "math_pipe_throttle", "branch_resolving", "short_scoreboard", "mio_throttle",
        "lg_throttle", "wait", "barrier", "not_selected", "selected", "no_instruction", "dispatch_stall",
        "tex_throttle", "drain", "imc_miss", "membar", "misc", "sleeping", "gmma"}) {
    c.push_back(E(absl::StrCat("stall.", r), "cycles/issue", G::kStalls,
                  {absl::StrCat("smsp__average_warps_issue_stalled_", r, "_per_issue_active.ratio")}));
  }
  c.push_back(E("sm_throughput_pct", "%", G::kThroughput,
                {"sm__throughput.avg.pct_of_peak_sustained_elapsed"}, true));
  c.push_back(E("memory_throughput_pct", "%", G::kThroughput,
                {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"}, true));
  c.push_back(E("l1_throughput_pct", "%", G::kThroughput,
                {"l1tex__throughput.avg.pct_of_peak_sustained_active"}, true));
  c.push_back(E("l2_throughput_pct", "%", G::kThroughput,
                {"lts__throughput.avg.pct_of_peak_sustained_elapsed"}, true));
  for (const char* s : {"fp32", "fp16", "fp64", "integer", "bit", "conversion", "memory", "control", "misc"}) {
    c.push_back(E(absl::StrCat("sass.", s), "thread inst", G::kSass,
                  {absl::StrCat("smsp__sass_thread_inst_executed_op_", s, "_pred_on.sum")}));
  }
  // Work: the CUDA-core FLOPs' parts (DeriveFromParts makes flops.fp32/fp16/fp64 of them) ...
  for (const char* s : {"fadd", "fmul", "ffma", "hadd", "hmul", "hfma", "dadd", "dmul", "dfma"}) {
    c.push_back(E(absl::StrCat("sass.", s), "thread inst", G::kWork,
                  {absl::StrCat("smsp__sass_thread_inst_executed_op_", s, "_pred_on.sum")}));
  }
  // ... the roofline's L2 and L1 traffic, as Nsight Compute 2025.3's hierarchical roofline sections
  // (SpeedOfLight_Hierarchical*RooflineChart, printed by bench/gpu/roofline_metrics.sh) count it:
  // L2 = 32 bytes per cycle of the L2 slices' output to the crossbar (lts__lts2xbar_cycles_active:
  // bytes leaving L2 once, however many SMs a multicast delivers them to; 1 pass alone on GH100 and
  // GV100, 2 on GA100), L1 = 128 bytes per local/global writeback cycle
  // (l1tex__lsu_writeback_active_mem_lg, valid on GA100 only; the plain counter on GV100 and GH100,
  // where it needs 2 passes). In this group, not core: neither counts in one pass everywhere, and
  // the core set's one-pass packing and the legacy API's pass count stay as they were ...
  c.push_back(E("l2_xbar_cycles", "cycles", G::kWork, {"lts__lts2xbar_cycles_active.sum"}));
  c.push_back(E("l1_writeback_cycles", "cycles", G::kWork,
                {"l1tex__lsu_writeback_active_mem_lg.sum", "l1tex__lsu_writeback_active.sum"}));
  // ... and the Tensor Core FLOPs by input precision: the tensor path's op counters (one op = one
  // FLOP, an FMA counting 2; PENDING the H200 check of bench/gpu/roofline_check.sh against the
  // analytic 2*N*Cin*Cout*D*H*W*27 of the 3x3x3 convolutions). Nsight Compute's own Tensor roofline
  // (SpeedOfLight_HierarchicalTensorRooflineChart) counts pipe instructions times a constant and
  // cannot tell precisions apart; inst_pipe.tensor above keeps that count. Valid per chip
  // (tests/unit/worker/cupti_host_test.cc): GH100 all four (fp16: src_fp16, 2 passes; the _dst_fp32
  // split is not valid there); GA100 tf32/fp16/bf16; GV100 fp16 only. On GA100/GV100 fp16 counts
  // FP32 accumulation only (src_fp16_dst_fp32; LibTorch accumulates in FP32).
  for (const char* p : {"tf32", "fp16", "bf16", "fp8"}) {
    c.push_back(E(absl::StrCat("flops.tensor_", p), "flop", G::kWork,
                  {absl::StrCat("sm__ops_path_tensor_src_", p, ".sum"),
                   absl::StrCat("sm__ops_path_tensor_src_", p, "_dst_fp32.sum")}));
  }
  return c;
}

std::vector<MetricEntry> BuildPm() {
  using G = MetricGroup;
  return {
      E("sm_active_pct", "%", G::kCore, {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed"}, true),
      E("issue_active_pct", "%", G::kCore, {"sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed"},
        true),
      E("tensor_pipe_pct", "%", G::kCore,
        {"sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
         "sm__pipe_shared_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"},
        true),
      E("warps_active_pct", "%", G::kCore, {"sm__warps_active_realtime.avg.pct_of_peak_sustained_elapsed"},
        true),
      E("l2_throughput_pct", "%", G::kCore, {"lts__t_sectors.avg.pct_of_peak_sustained_elapsed"}, true),
      E("dram_throughput_pct", "%", G::kCore, {"dram__throughput.avg.pct_of_peak_sustained_elapsed"}, true),
      E("sm_clock_hz", "Hz", G::kCore, {"gpc__cycles_elapsed.avg.per_second"}),
  };
}

}  // namespace

const char* MetricGroupName(MetricGroup g) {
  switch (g) {
    case MetricGroup::kCore:
      return "core";
    case MetricGroup::kStalls:
      return "stalls";
    case MetricGroup::kThroughput:
      return "throughput";
    case MetricGroup::kSass:
      return "sass";
    case MetricGroup::kWork:
      return "work";
  }
  return "?";
}

const std::vector<MetricEntry>& MetricCatalog() {
  static const std::vector<MetricEntry> kCatalog = BuildCatalog();
  return kCatalog;
}

const std::vector<MetricEntry>& PmSamplingCatalog() {
  static const std::vector<MetricEntry> kPm = BuildPm();
  return kPm;
}

}  // namespace medprof::metrics
