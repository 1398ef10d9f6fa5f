#include "agent/profiler/op_aggregator.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/kernel_taxonomy.h"

namespace medprof::profiler {

uint32_t OpAggregator::Intern(std::string_view name, std::string_view phase) {
  std::string key;
  key.reserve(name.size() + phase.size() + 1);
  key.append(name);
  key.push_back('\0');
  key.append(phase);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  const auto id = static_cast<uint32_t>(entries_.size());
  entries_.push_back(Entry{OpKey{std::string(name), std::string(phase)}});
  index_.emplace(std::move(key), id);
  return id;
}

void OpAggregator::Add(uint32_t id, int64_t inclusive_ns, int64_t self_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id >= entries_.size()) return;
  Entry& e = entries_[id];
  e.count += 1;
  e.total_ns += inclusive_ns;
  e.self_ns += self_ns;
}

bool OpAggregator::Lookup(uint32_t id, OpKey* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id >= entries_.size()) return false;
  *out = entries_[id].key;
  return true;
}

size_t OpAggregator::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

v1::OpAggregates OpAggregator::Snapshot(int steps) const {
  std::vector<Entry> used;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Entry& e : entries_) {
      if (e.count > 0) used.push_back(e);
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
