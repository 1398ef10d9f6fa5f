#include "agent/profiler/op_aggregator.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/kernel_taxonomy.h"

namespace medprof::profiler {

OpAggregator::Slot* OpAggregator::InternSlot(std::string_view name, std::string_view phase) {
  std::string key;
  key.reserve(name.size() + phase.size() + 1);
  key.append(name);
  key.push_back('\0');
  key.append(phase);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) return &slots_[it->second];
  const auto id = static_cast<uint32_t>(slots_.size());
  slots_.emplace_back(id, OpKey{std::string(name), std::string(phase)});
  index_.emplace(std::move(key), id);
  return &slots_.back();
}

void OpAggregator::Add(Slot* slot, int64_t inclusive_ns, int64_t self_ns) {
  slot->count.fetch_add(1, std::memory_order_relaxed);
  slot->total_ns.fetch_add(inclusive_ns, std::memory_order_relaxed);
  slot->self_ns.fetch_add(self_ns, std::memory_order_relaxed);
}

void OpAggregator::Add(uint32_t id, int64_t inclusive_ns, int64_t self_ns) {
  Slot* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (id >= slots_.size()) return;
    slot = &slots_[id];
  }
  Add(slot, inclusive_ns, self_ns);
}

bool OpAggregator::Lookup(uint32_t id, OpKey* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id >= slots_.size()) return false;
  *out = slots_[id].key;
  return true;
}

size_t OpAggregator::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_.size();
}

v1::OpAggregates OpAggregator::Snapshot(int steps) const {
  struct Entry {
    OpKey key;
    int64_t count, total_ns, self_ns;
  };
  std::vector<Entry> used;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Slot& s : slots_) {
      const int64_t count = s.count.load(std::memory_order_relaxed);
      if (count > 0) {
        used.push_back(Entry{s.key, count, s.total_ns.load(std::memory_order_relaxed),
                             s.self_ns.load(std::memory_order_relaxed)});
      }
    }
  }
  std::sort(used.begin(), used.end(), [](const Entry& a, const Entry& b) {
    if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
    if (a.key.name != b.key.name) return a.key.name < b.key.name;
    return a.key.phase < b.key.phase;
  });
  v1::OpAggregates out;
  out.set_steps(steps);
  for (const Entry& e : used) {
    v1::OpStat* s = out.add_ops();
    s->set_name(e.key.name);
    s->set_phase(e.key.phase);
    s->set_category(std::string(taxonomy::CategoryName(taxonomy::ClassifyOp(e.key.name))));
    s->set_count(e.count);
    s->set_total_ns(e.total_ns);
    s->set_self_ns(e.self_ns);
  }
  return out;
}

}  // namespace medprof::profiler
