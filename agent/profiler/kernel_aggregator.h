// KernelAggregator: the trace layer's aggregation, per (kernel, op, phase), over measured steps.
//
// Input: TraceRecords in any order and in batches (one batch = one completed CUPTI buffer),
// plus the measured-step windows (BeginStep/EndStep, timestamps in the tracer's clock).
// A device record (kernel, memcpy, memset) counts when its start lies inside a measured
// step's window. Its op and phase come from the external correlation id that was pushed when
// the launching API ran: record.correlation_id -> external id (from kExternalCorrelation
// records) -> (op, phase) through the resolver (the OpAggregator's ids, `id + 1`). Device and
// correlation records travel in different CUPTI buffers, so a device record whose correlation
// has not arrived yet waits (bounded by `max_pending`; the oldest are then counted without an
// op) until Finish().
//
// Output: KernelStat per (demangled name, op, phase): count, total/min/max ns, grid, block,
// registers and shared memory of the first launch, its theoretical occupancy (occupancy.h) and
// its taxonomy category (common/kernel_taxonomy.h, with the op); memcpy/memset appear as
// "[memcpy HtoD]"-style names. Also a bounded raw timeline of the first `timeline_steps`
// measured steps (for Chrome-trace/Perfetto export).
//
// Launch signatures (launch_signature.h): every kernel launch is also counted under its signature
// (kernel, grid, block, dynamic shared memory, op, phase, op input shapes): count, total/min/max ns,
// and the positions of its launches among all launches of its kernel in the first measured step
// (launch order = correlation id order). Signatures() returns them; the metrics layer profiles them.
//
// Thread-safe: Add (the CUPTI buffer thread), BeginStep/EndStep (the workload thread) and the
// readers may run concurrently (one mutex).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/profiler/launch_signature.h"
#include "agent/profiler/occupancy.h"
#include "agent/profiler/op_aggregator.h"
#include "agent/profiler/trace_records.h"
#include "medprof/v1/results.pb.h"

namespace medprof::profiler {

struct KernelAggregatorOptions {
  DeviceLimits device;                // for theoretical occupancy; unknown -> occupancy 0
  int timeline_steps = 3;             // measured steps kept in the raw timeline
  size_t timeline_max_events = 200000;  // hard cap on timeline events
  size_t max_pending = 1 << 16;       // device records waiting for their correlation record
  size_t max_correlations = 1 << 20;  // correlation -> external id entries kept (oldest dropped)
  size_t max_signatures = 1 << 16;    // distinct launch signatures kept (later ones count in their kernel only)
  size_t max_ordinals = 64;           // launch positions kept per signature
};

// Resolves an external correlation id to the op and phase it stands for.
using OpResolver = std::function<bool(uint64_t external_id, OpKey* out)>;

struct TimelineEvent {
  RecordKind kind = RecordKind::kKernel;
  std::string name;  // demangled
  std::string op;
  std::string phase;
  int step = 0;      // measured-step index
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t device_id = 0;
  uint32_t stream_id = 0;
  uint32_t thread_id = 0;
  uint32_t correlation_id = 0;
};

struct KernelAggregatorCounters {
  int64_t device_records = 0;   // kernels + memcpy + memset seen
  int64_t counted = 0;          // of those, inside measured steps
  int64_t outside_steps = 0;    // outside every measured step (warm-up, setup, between steps)
  int64_t unattributed = 0;     // counted without an op (no correlation record)
  int64_t pending = 0;          // waiting for a correlation record now
  int64_t dropped = 0;          // records CUPTI reported as dropped
  int64_t timeline_events = 0;
  int64_t timeline_truncated = 0;  // events not kept because of timeline_max_events
};

class KernelAggregator {
 public:
  KernelAggregator(KernelAggregatorOptions options, OpResolver resolver);
  KernelAggregator(const KernelAggregator&) = delete;
  KernelAggregator& operator=(const KernelAggregator&) = delete;

  // Step windows. Only measured steps are kept; `index` is the measured-step index.
  void BeginStep(int index, bool measured, uint64_t timestamp_ns);
  void EndStep(uint64_t timestamp_ns);

  void Add(const std::vector<TraceRecord>& batch);
  void AddDropped(uint64_t records);
  // Counts every record still waiting for its correlation, without an op.
  void Finish();

  v1::KernelAggregates Snapshot() const;
  // Launch signatures of device kernels, by total time (descending).
  v1::KernelSignatures Signatures() const;
  // Per device-kernel name: the grid (x, y, z) whose launches took the most time in the
  // measured steps — the launch shape the metrics layer profiles.
  std::map<std::string, std::array<int32_t, 3>> DominantGrids() const;
  std::vector<TimelineEvent> Timeline() const;
  KernelAggregatorCounters counters() const;

  // "_Z3fooi" -> "foo(int)"; names that are not mangled come back unchanged.
  static std::string Demangle(const std::string& name);

 private:
  struct Window {
    uint64_t begin = 0;
    uint64_t end = UINT64_MAX;  // open until EndStep
    int index = 0;
  };
  struct Stat {
    std::string name, op, phase;
    int64_t count = 0, total_ns = 0, min_ns = 0, max_ns = 0;
    int32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
    int32_t registers = 0, shared_bytes = 0;
    double occupancy = 0.0;
    bool device_kernel = false;
    std::map<std::array<int32_t, 3>, int64_t> grid_ns;  // time per launch grid
  };
  struct Pending {
    TraceRecord record;
    int step = 0;
  };
  struct SigStat {
    int64_t count = 0, total_ns = 0, min_ns = 0, max_ns = 0;
  };
  // A kernel launch of the first measured step: its correlation id (launch order) and signature.
  struct FirstStepLaunch {
    uint32_t correlation_id = 0;
    const LaunchSignature* signature = nullptr;
  };

  // All called with mu_ held.
  const Window* FindWindow(uint64_t ts) const;
  void AddCorrelation(uint32_t correlation_id, uint64_t external_id);
  bool ResolveOp(uint32_t correlation_id, OpKey* op) const;
  void Count(const TraceRecord& r, int step, const OpKey& op);
  void AddTimelineEvent(const TraceRecord& r, int step, const OpKey& op);
  void CountSignature(const TraceRecord& r, const std::string& name, int step, const OpKey& op, int64_t duration);
  const std::string& DemangledLocked(const std::string& name);

  const KernelAggregatorOptions options_;
  const OpResolver resolver_;
  mutable std::mutex mu_;
  std::vector<Window> windows_;  // measured steps, by begin
  bool open_measured_ = false;
  std::map<uint32_t, uint64_t> correlations_;  // correlation id -> external id (ordered: prune oldest)
  std::vector<Pending> pending_;
  std::unordered_map<std::string, Stat> stats_;  // name \0 op \0 phase
  std::unordered_map<std::string, std::string> demangled_;
  std::map<LaunchSignature, SigStat> signatures_;
  std::map<std::string, std::vector<FirstStepLaunch>> first_step_;  // kernel name -> its launches
  std::vector<TimelineEvent> timeline_;
  KernelAggregatorCounters counters_;
};

}  // namespace medprof::profiler
