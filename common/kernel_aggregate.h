// Kernel aggregates from launch signatures: how the metrics of the launch signatures measured for
// one kernel (a launch of each, medians over steps) become the kernel's own row — an aggregate over
// all of the kernel's launches in one step. docs/metrics.md ("Signatures and kernel aggregates")
// states the contract; the worker's metrics layer and the Nsight Compute importer both use it.
//
// For a kernel with measured signatures i (per-launch values v_i, n_i launches per step, trace time
// t_i per step) and trace time T per step over all its signatures, measured or not:
//   coverage       C = Σ t_i / T   (stored as coverage_pct = 100 C)
//   counters       Σ v_i · n_i / C            (per step; cycles, instructions, bytes, time, SASS
//                                              counts: IsCounterUnit; C < 1 extrapolates the unmeasured
//                                              signatures at the measured ones' rate per unit of time;
//                                              C is taken over the signatures that have the metric)
//   rates, pcts    Σ v_i · w_i / Σ w_i,  w_i = duration_ns_i · n_i (t_i when duration is missing)
//   launch.samples min over signatures; other launch.* fields are per signature and left out
// plus signatures.profiled (the count of measured signatures) and launches_per_step (Σ n_i).
// A kernel with one signature and one launch per step gets exactly its launch's values.
//
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace medprof::aggregate {

struct SignatureSample {
  std::map<std::string, double> values;  // per launch, medprof names
  double launches_per_step = 0;
  double trace_ns_per_step = 0;
};

// Whether a medprof metric name adds up over launches (a counter) or is averaged (a rate).
using CounterPredicate = std::function<bool(const std::string& name)>;

// Counters add up over launches; rates and percentages are averaged. By unit: ns, cycles, inst,
// bytes, sectors, flop and the like are counters; "%" and any "x/y" unit are rates. An empty unit
// counts as a counter when the Perfworks name ends in ".sum".
bool IsCounterUnit(std::string_view unit, std::string_view perfworks = "");

// The 12-hex-digit id of a launch signature (FNV-1a over the fields; results.proto KernelSignature.id).
// The worker and the Nsight Compute importer name signatures with it; an importer signature has
// no op, phase or shapes.
std::string SignatureId(std::string_view kernel, std::string_view op, std::string_view phase, std::string_view shapes,
                        const int32_t (&grid)[3], const int32_t (&block)[3], int32_t dynamic_shared_bytes);

// The kernel's aggregate (see the header comment). Empty when `measured` is empty or T <= 0.
std::map<std::string, double> AggregateKernel(const std::vector<SignatureSample>& measured, double kernel_ns_per_step,
                                              const CounterPredicate& is_counter);

}  // namespace medprof::aggregate
