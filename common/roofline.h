// Roofline: where a kernel, a launch signature or a phase stands against the chip's ceilings —
// its work (FLOPs by class), its traffic (bytes at DRAM, L2, L1), the roof that binds it, how close
// it comes, and whether it is memory-, compute- or latency-bound. docs/metrics.md ("Roofline") is
// the contract; the numbers are worked by hand in tests/unit/common/roofline_test.cc.
//
// Inputs are stored metric values (medprof names, docs/metrics.md) of one scope — a kernel's
// per-step aggregate, a signature's per-launch values or a phase range — and the run's ceilings
// (workload.proto Ceilings). Nothing here is stored: the server, the report and the worker's
// findings compute it when they read, so a run imported from Nsight Compute and a run whose
// ceilings were measured later get the same figures from the same counters.
//
// The model (hierarchical, time-based): each roof r gives the shortest time the scope could take
// on it alone —
//   memory level l:   t_l = bytes.l / roof_l                        (bytes/s)
//   compute:          t_c = Σ_k flops.k / roof_k over the FLOP classes k with a roof (a mix of
//                           Tensor Core and CUDA-core work shares the SMs' time)
// The binding roof is the one with the longest time; attainable FLOP/s = FLOPs / max t, which is
// min(compute roof, roof_l · intensity_l) over the levels; % of roof = 100 · max t / duration (the
// achieved share of the attainable, also for a copy with no FLOPs). Class: below kLatencyBoundPct %
// of its roof a scope is latency-bound (far below every roof: Nsight Compute's SOL rule says
// "below 60 % of peak typically indicates latency issues"); else memory-bound when a level binds,
// compute-bound when compute binds.
//
// Pure; thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::roofline {

// The memory levels (Ceiling.name, metric bytes.<level>), outermost first.
inline constexpr std::string_view kLevels[] = {"dram", "l2", "l1"};
// The FLOP classes (Ceiling.name, metric flops.<class>): CUDA-core fp32/fp16/fp64 from SASS op
// counts (fp16 includes bf16's HFMA2.BF16: the SASS counters do not tell them apart), Tensor Core
// work by input precision.
inline constexpr std::string_view kFlopClasses[] = {"fp32",        "fp16",        "fp64",       "tensor_tf32",
                                                     "tensor_fp16", "tensor_bf16", "tensor_fp8"};
inline constexpr double kLatencyBoundPct = 60;

enum class Bound { kUnknown, kMemory, kCompute, kLatency };
// "memory-bound", "compute-bound", "latency-bound", "unknown".
const char* BoundName(Bound b);

// The roof used for one ceiling: the node's measurement when there is one, else the datasheet's.
struct Roof {
  double per_second = 0;  // bytes/s (levels) or FLOP/s (classes)
  bool measured = false;
};
using Roofs = std::map<std::string, Roof>;  // ceiling name -> roof

// The roofline's counters made from their parts, each when its parts are in `values` — the one place
// they are made: the worker's metrics layer (per range, per median, per signature, through
// DeriveFromParts in agent/profiler/metric_catalog.h) and the Nsight Compute importer (per launch):
//   bytes.dram = dram_bytes_read + dram_bytes_write (else dram_bytes, ncu's dram__bytes.sum)
//   bytes.l2   = 32 * l2_xbar_cycles (ncu's L2 roofline: 32 bytes per cycle of L2 output to the
//                crossbar)
//   bytes.l1   = 128 * l1_writeback_cycles (ncu's L1 roofline: 128 bytes per local/global
//                writeback cycle)
//   flops.fp32 = sass.fadd + sass.fmul + 2 * sass.ffma; flops.fp16 from hadd/hmul/hfma, flops.fp64
//                from dadd/dmul/dfma (ncu's roofline sections count the same way)
void DeriveWorkAndTraffic(std::map<std::string, double>* values);
// The unit of each name DeriveWorkAndTraffic makes ("bytes", "flop"): counters, summed by aggregates.
const std::map<std::string, std::string>& DerivedWorkUnits();

// The roofs of a run's ceilings; a ceiling with neither a measured nor a datasheet value is left out.
Roofs RoofsOf(const v1::Ceilings& ceilings);

struct Point {
  double duration_ns = 0;
  double flops = 0;                              // Σ flops.<class>
  std::map<std::string, double> flops_by_class;  // classes with a value
  std::map<std::string, double> bytes;           // level -> bytes (levels with a value)
  std::map<std::string, double> intensity;       // level -> FLOP/byte (bytes > 0)
  double flop_per_s = 0;
  std::map<std::string, double> bytes_per_s;     // level -> achieved bytes/s
  // The binding roof: a level ("dram", "l2", "l1") or, when compute binds, the FLOP class with the
  // largest share of t_c ("tensor_tf32", ...); "" when no roof applies.
  std::string binding;
  double roof_ns = 0;      // max t over the roofs
  double pct_of_roof = 0;  // 100 * roof_ns / duration_ns
  Bound bound = Bound::kUnknown;
  std::vector<std::string> unroofed;  // FLOP classes or levels with work but no roof on this chip
};

// The point of one scope. INVALID_ARGUMENT naming `duration_ns` when it is missing or <= 0.
// A scope with no FLOP or byte counters, or none with a roof, is Bound::kUnknown with no binding.
absl::StatusOr<Point> Locate(const std::map<std::string, double>& values, const Roofs& roofs);

// Points combined as compare cells show them, each weighted by its duration.
struct Summary {
  double duration_ns = 0;        // Σ over the points with a known bound
  double pct_of_roof = 0;        // time-weighted mean % of roof
  std::map<Bound, double> share;  // share (0..1) of that time per bound
};
Summary Summarize(const std::vector<Point>& points);

// A ceiling's name for people: "DRAM", "L2", "L1", "FP32", "TF32 Tensor Core", ...
std::string RoofLabel(std::string_view ceiling);

// "memory-bound at 62 % of DRAM roof", "compute-bound at 81 % of TF32 Tensor Core roof",
// "latency-bound at 12 % of DRAM roof"; "" for Bound::kUnknown. Findings use it.
std::string Describe(const Point& p);

}  // namespace medprof::roofline
