// OpAggregator: per-(op, phase) totals of LibTorch ops over the measured steps.
//
// Each distinct (op name, sub-phase) pair gets a small stable id on first sight (Intern). The
// RecordFunction observer adds one sample per finished op: inclusive host time and self time
// (inclusive minus the time of ops nested inside it). The same ids tag GPU work: the CUPTI
// backend pushes `id + 1` as the external correlation id while an op runs, so a kernel is
// attributed to the innermost op and its phase with one table lookup (Lookup).
//
// No LibTorch dependency; usable from tests. Thread-safe: all methods may be called from any
// thread. Interning takes a mutex; adding to a Slot (the hot path, once per op) is lock-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "medprof/v1/results.pb.h"

namespace medprof::profiler {

struct OpKey {
  std::string name;   // RecordFunction name, e.g. "aten::conv3d"; "" for "no op" (phase only)
  std::string phase;  // "fwd" | "bwd" | "optim" | "sample_step" | ""
  std::string shapes;  // the op's input shapes (shape_table.h) where the launch carried them; else ""
};

class OpAggregator {
 public:
  // One (name, phase) pair's counters. Its address is stable for the aggregator's lifetime.
  struct Slot {
    Slot(uint32_t slot_id, OpKey slot_key) : id(slot_id), key(std::move(slot_key)) {}
    const uint32_t id;
    const OpKey key;
    std::atomic<int64_t> count{0};
    std::atomic<int64_t> total_ns{0};
    std::atomic<int64_t> self_ns{0};
  };

  OpAggregator() = default;
  OpAggregator(const OpAggregator&) = delete;
  OpAggregator& operator=(const OpAggregator&) = delete;

  // Returns the slot of (name, phase), creating it on first use. Ids are dense, from 0.
  Slot* InternSlot(std::string_view name, std::string_view phase);
  uint32_t Intern(std::string_view name, std::string_view phase) { return InternSlot(name, phase)->id; }
  // Adds one finished op invocation (lock-free).
  static void Add(Slot* slot, int64_t inclusive_ns, int64_t self_ns);
  // Same by id. Unknown ids are ignored.
  void Add(uint32_t id, int64_t inclusive_ns, int64_t self_ns);
  // The (name, phase) of an id; false when the id was never handed out.
  bool Lookup(uint32_t id, OpKey* out) const;
  // Number of ids handed out.
  size_t size() const;

  // Ops with at least one sample, by total time (descending; ties by name, phase), with the
  // taxonomy category of each op. `steps` is recorded as the number of steps covered.
  v1::OpAggregates Snapshot(int steps) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, uint32_t> index_;  // name + '\0' + phase -> id
  std::deque<Slot> slots_;                           // by id; guarded by mu_ (the deque, not the counters)
};

}  // namespace medprof::profiler
