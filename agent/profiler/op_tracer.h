// OpTracer: the LibTorch RecordFunction observer behind every backend's op aggregates.
//
// Start() installs one global at::RecordFunction callback (ops, autograd nodes and user
// scopes). For every op it measures inclusive host time and self time — a per-thread stack
// of open ops subtracts nested ops from their parent — and, when the op began inside a
// measured step, adds the sample to an OpAggregator under (op name, current sub-phase) taken
// from the PhaseTracker. An optional OpListener hears every op begin/end with that id (the
// CUPTI backend pushes it as an external correlation id, so kernels carry their op). With a
// ShapeTable, the tracer also asks LibTorch for each op's inputs and hands the listener the id of
// their shapes (dtype and sizes of every tensor input), so kernels carry the problem size too;
// that costs a copy of the op's input list per op, so only backends with a kernel trace ask.
//
// Only one OpTracer may be started per process at a time (RecordFunction callbacks are plain
// function pointers; the active tracer is a process-wide slot). Ownership: the tracer does
// not own the tracker, aggregator, listener or shape table; they must outlive it. Start/Stop from one
// thread, while no LibTorch op runs (LibTorch requires that for removing callbacks); the
// callbacks themselves are thread-safe. Only this file's .cc includes ATen.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/profiler/op_aggregator.h"
#include "agent/profiler/phase_tracker.h"
#include "agent/profiler/shape_table.h"

namespace medprof::profiler {

// Hears every op the tracer sees, on the thread that runs the op.
class OpListener {
 public:
  virtual ~OpListener() = default;
  // shape_id: the op's input shapes in the tracer's ShapeTable; 0 when not recorded.
  virtual void OnOpBegin(uint32_t op_id, uint32_t shape_id) = 0;
  virtual void OnOpEnd(uint32_t op_id) = 0;
};

class OpTracer {
 public:
  // `listener` and `shapes` may be null; without `shapes` no input shapes are recorded.
  static absl::StatusOr<std::unique_ptr<OpTracer>> Create(PhaseTracker* tracker, OpAggregator* ops,
                                                          OpListener* listener, ShapeTable* shapes = nullptr);
  ~OpTracer();  // Stop()s
  OpTracer(const OpTracer&) = delete;
  OpTracer& operator=(const OpTracer&) = delete;

  // Installs the RecordFunction callback. FAILED_PRECONDITION when another tracer is active.
  absl::Status Start();
  // Removes the callback; ops that are still open are dropped. Idempotent.
  void Stop();
  bool started() const { return handle_ != 0; }

  // Called by the RecordFunction callbacks (public for them; not for other callers).
  OpAggregator::Slot* BeginOp(const char* name, uint32_t shape_id, uint64_t session, bool* counted);
  ShapeTable* shapes() const { return shapes_; }
  void EndOp(OpAggregator::Slot* slot, bool counted, int64_t inclusive_ns, int64_t self_ns);

 private:
  OpTracer(PhaseTracker* tracker, OpAggregator* ops, OpListener* listener, ShapeTable* shapes)
      : tracker_(tracker), ops_(ops), listener_(listener), shapes_(shapes) {}

  PhaseTracker* tracker_;
  OpAggregator* ops_;
  OpListener* listener_;
  ShapeTable* shapes_;
  uint64_t handle_ = 0;  // at::CallbackHandle; 0 = not installed
};

}  // namespace medprof::profiler
