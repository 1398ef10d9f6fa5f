#include "agent/profiler/kernel_aggregator.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "common/kernel_taxonomy.h"

namespace medprof::profiler {

KernelAggregator::KernelAggregator(KernelAggregatorOptions options, OpResolver resolver)
    : options_(std::move(options)), resolver_(std::move(resolver)) {}

std::string KernelAggregator::Demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || out == nullptr) return name;
  return std::string(out.get());
}

const std::string& KernelAggregator::DemangledLocked(const std::string& name) {
  auto it = demangled_.find(name);
  if (it != demangled_.end()) return it->second;
  return demangled_.emplace(name, Demangle(name)).first->second;
}

void KernelAggregator::BeginStep(int index, bool measured, uint64_t timestamp_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_measured_ && !windows_.empty()) windows_.back().end = timestamp_ns;
  open_measured_ = measured;
  if (measured) windows_.push_back(Window{timestamp_ns, UINT64_MAX, index});
}

void KernelAggregator::EndStep(uint64_t timestamp_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_measured_ && !windows_.empty()) windows_.back().end = timestamp_ns;
  open_measured_ = false;
}

const KernelAggregator::Window* KernelAggregator::FindWindow(uint64_t ts) const {
  // Last window whose begin <= ts.
  auto it = std::upper_bound(windows_.begin(), windows_.end(), ts,
                             [](uint64_t t, const Window& w) { return t < w.begin; });
  if (it == windows_.begin()) return nullptr;
  --it;
  return ts <= it->end ? &*it : nullptr;
}

void KernelAggregator::AddCorrelation(uint32_t correlation_id, uint64_t external_id) {
  correlations_[correlation_id] = external_id;
  while (correlations_.size() > options_.max_correlations) correlations_.erase(correlations_.begin());
}

bool KernelAggregator::ResolveOp(uint32_t correlation_id, OpKey* op) const {
  auto it = correlations_.find(correlation_id);
  if (it == correlations_.end()) return false;
  if (!resolver_ || !resolver_(it->second, op)) *op = OpKey{};
  return true;
}

void KernelAggregator::Count(const TraceRecord& r, int step, const OpKey& op) {
  const std::string& name = r.kind == RecordKind::kKernel ? DemangledLocked(r.name) : r.name;
  std::string key;
  key.reserve(name.size() + op.name.size() + op.phase.size() + 2);
  key.append(name).push_back('\0');
  key.append(op.name).push_back('\0');
  key.append(op.phase);
  const int64_t duration = r.end_ns >= r.start_ns ? static_cast<int64_t>(r.end_ns - r.start_ns) : 0;
  auto [it, inserted] = stats_.try_emplace(std::move(key));
  Stat& s = it->second;
  if (inserted) {
    s.name = name;
    s.op = op.name;
    s.phase = op.phase;
    s.min_ns = duration;
    s.max_ns = duration;
    if (r.kind == RecordKind::kKernel) {
      s.device_kernel = true;
      std::copy(std::begin(r.grid), std::end(r.grid), s.grid);
      std::copy(std::begin(r.block), std::end(r.block), s.block);
      s.registers = r.registers_per_thread;
      s.shared_bytes = r.static_shared_bytes + r.dynamic_shared_bytes;
      LaunchShape shape;
      shape.threads_per_block = int64_t{r.block[0]} * r.block[1] * r.block[2];
      shape.registers_per_thread = r.registers_per_thread;
      shape.shared_bytes = s.shared_bytes;
      shape.smem_carveout_bytes = r.shared_carveout_bytes;
      s.occupancy = TheoreticalOccupancy(options_.device, shape).occupancy;
    }
  }
  s.count += 1;
  s.total_ns += duration;
  if (r.kind == RecordKind::kKernel) {
    s.grid_ns[{static_cast<int32_t>(r.grid[0]), static_cast<int32_t>(r.grid[1]), static_cast<int32_t>(r.grid[2])}] +=
        duration;
  }
  s.min_ns = std::min(s.min_ns, duration);
  s.max_ns = std::max(s.max_ns, duration);
  if (r.kind == RecordKind::kKernel) CountSignature(r, name, step, op, duration);
  counters_.counted += 1;
  if (op.name.empty()) counters_.unattributed += 1;
  AddTimelineEvent(r, step, op);
}

void KernelAggregator::CountSignature(const TraceRecord& r, const std::string& name, int step, const OpKey& op,
                                      int64_t duration) {
  LaunchSignature key;
  key.kernel = name;
  key.op = op.name;
  key.phase = op.phase;
  key.shapes = op.shapes;
  for (int i = 0; i < 3; ++i) {
    key.grid[i] = r.grid[i];
    key.block[i] = r.block[i];
  }
  key.dynamic_shared_bytes = r.dynamic_shared_bytes;
  auto it = signatures_.find(key);
  if (it == signatures_.end()) {
    if (signatures_.size() >= options_.max_signatures) return;
    it = signatures_.emplace(std::move(key), SigStat{0, 0, duration, duration}).first;
  }
  SigStat& s = it->second;
  s.count += 1;
  s.total_ns += duration;
  s.min_ns = std::min(s.min_ns, duration);
  s.max_ns = std::max(s.max_ns, duration);
  if (!windows_.empty() && step == windows_.front().index) {
    first_step_[name].push_back(FirstStepLaunch{r.correlation_id, &it->first});
  }
}

v1::KernelSignatures KernelAggregator::Signatures() const {
  std::lock_guard<std::mutex> lock(mu_);
  // Positions in the first measured step, in launch order.
  std::map<const LaunchSignature*, std::vector<int32_t>> ordinals;
  for (const auto& [name, launches] : first_step_) {
    std::vector<FirstStepLaunch> sorted = launches;
    std::sort(sorted.begin(), sorted.end(),
              [](const FirstStepLaunch& a, const FirstStepLaunch& b) { return a.correlation_id < b.correlation_id; });
    for (size_t i = 0; i < sorted.size(); ++i) {
      std::vector<int32_t>& mine = ordinals[sorted[i].signature];
      if (mine.size() < options_.max_ordinals) mine.push_back(static_cast<int32_t>(i));
    }
  }
  std::vector<std::pair<const LaunchSignature*, const SigStat*>> order;
  for (const auto& [key, stat] : signatures_) order.emplace_back(&key, &stat);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second->total_ns != b.second->total_ns) return a.second->total_ns > b.second->total_ns;
    return *a.first < *b.first;
  });
  v1::KernelSignatures out;
  out.set_steps(static_cast<int32_t>(windows_.size()));
  for (const auto& [key, stat] : order) {
    v1::KernelSignature* s = out.add_signatures();
    s->set_id(key->Id());
    s->set_kernel(key->kernel);
    s->set_op(key->op);
    s->set_phase(key->phase);
    s->set_shapes(key->shapes);
    for (int32_t g : key->grid) s->add_grid(g);
    for (int32_t b : key->block) s->add_block(b);
    s->set_dynamic_shared_bytes(key->dynamic_shared_bytes);
    s->set_count(stat->count);
    s->set_total_ns(stat->total_ns);
    s->set_min_ns(stat->min_ns);
    s->set_max_ns(stat->max_ns);
    if (auto o = ordinals.find(key); o != ordinals.end()) {
      for (int32_t v : o->second) s->add_ordinals(v);
    }
  }
  return out;
}

std::map<std::string, std::array<int32_t, 3>> KernelAggregator::DominantGrids() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::map<std::array<int32_t, 3>, int64_t>> by_name;
  for (const auto& [key, s] : stats_) {
    if (!s.device_kernel) continue;
    for (const auto& [grid, ns] : s.grid_ns) by_name[s.name][grid] += ns;
  }
  std::map<std::string, std::array<int32_t, 3>> out;
  for (const auto& [name, grids] : by_name) {
    auto best = std::max_element(grids.begin(), grids.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    out[name] = best->first;
  }
  return out;
}

void KernelAggregator::AddTimelineEvent(const TraceRecord& r, int step, const OpKey& op) {
  if (windows_.empty() || step >= windows_.front().index + options_.timeline_steps) return;
  if (timeline_.size() >= options_.timeline_max_events) {
    counters_.timeline_truncated += 1;
    return;
  }
  TimelineEvent e;
  e.kind = r.kind;
  e.name = r.kind == RecordKind::kKernel ? DemangledLocked(r.name) : r.name;
  e.op = op.name;
  e.phase = op.phase;
  e.step = step;
  e.start_ns = r.start_ns;
  e.end_ns = r.end_ns;
  e.device_id = r.device_id;
  e.stream_id = r.stream_id;
  e.thread_id = r.thread_id;
  e.correlation_id = r.correlation_id;
  timeline_.push_back(std::move(e));
  counters_.timeline_events = static_cast<int64_t>(timeline_.size());
}

void KernelAggregator::Add(const std::vector<TraceRecord>& batch) {
  std::lock_guard<std::mutex> lock(mu_);
  // Correlation records first: a device record in the same batch must find its op.
  for (const TraceRecord& r : batch) {
    if (r.kind == RecordKind::kExternalCorrelation) AddCorrelation(r.correlation_id, r.external_id);
  }
  for (const TraceRecord& r : batch) {
    if (r.kind == RecordKind::kExternalCorrelation) continue;
    const Window* w = FindWindow(r.start_ns);
    if (r.kind == RecordKind::kApi) {
      // Host-side launch calls only feed the timeline.
      if (w == nullptr) continue;
      OpKey op;
      if (!ResolveOp(r.correlation_id, &op)) op = OpKey{};
      AddTimelineEvent(r, w->index, op);
      continue;
    }
    counters_.device_records += 1;
    if (w == nullptr) {
      counters_.outside_steps += 1;
      continue;
    }
    OpKey op;
    if (ResolveOp(r.correlation_id, &op)) {
      Count(r, w->index, op);
    } else {
      pending_.push_back(Pending{r, w->index});
    }
  }
  // Retry the records that were waiting; the oldest give up when too many wait.
  std::vector<Pending> still;
  for (Pending& p : pending_) {
    OpKey op;
    if (ResolveOp(p.record.correlation_id, &op)) {
      Count(p.record, p.step, op);
    } else {
      still.push_back(std::move(p));
    }
  }
  if (still.size() > options_.max_pending) {
    const size_t excess = still.size() - options_.max_pending;
    for (size_t i = 0; i < excess; ++i) Count(still[i].record, still[i].step, OpKey{});
    still.erase(still.begin(), still.begin() + static_cast<std::ptrdiff_t>(excess));
  }
  pending_ = std::move(still);
  counters_.pending = static_cast<int64_t>(pending_.size());
}

void KernelAggregator::AddDropped(uint64_t records) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_.dropped += static_cast<int64_t>(records);
}

void KernelAggregator::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Pending& p : pending_) Count(p.record, p.step, OpKey{});
  pending_.clear();
  counters_.pending = 0;
}

v1::KernelAggregates KernelAggregator::Snapshot() const {
  std::vector<const Stat*> stats;
  v1::KernelAggregates out;
  std::lock_guard<std::mutex> lock(mu_);
  stats.reserve(stats_.size());
  for (const auto& [key, s] : stats_) stats.push_back(&s);
  std::sort(stats.begin(), stats.end(), [](const Stat* a, const Stat* b) {
    if (a->total_ns != b->total_ns) return a->total_ns > b->total_ns;
    if (a->name != b->name) return a->name < b->name;
    if (a->op != b->op) return a->op < b->op;
    return a->phase < b->phase;
  });
  for (const Stat* s : stats) {
    v1::KernelStat* k = out.add_kernels();
    k->set_name(s->name);
    k->set_op(s->op);
    k->set_phase(s->phase);
    k->set_category(std::string(taxonomy::CategoryName(taxonomy::ClassifyKernel(s->name, s->op))));
    k->set_count(s->count);
    k->set_total_ns(s->total_ns);
    k->set_min_ns(s->min_ns);
    k->set_max_ns(s->max_ns);
    if (s->device_kernel) {
      for (int32_t g : s->grid) k->add_grid(g);
      for (int32_t b : s->block) k->add_block(b);
      k->set_registers(s->registers);
      k->set_shared_bytes(s->shared_bytes);
      k->set_theoretical_occupancy(s->occupancy);
    }
  }
  out.set_dropped_records(counters_.dropped);
  out.set_steps(static_cast<int32_t>(windows_.size()));
  return out;
}

std::vector<TimelineEvent> KernelAggregator::Timeline() const {
  std::lock_guard<std::mutex> lock(mu_);
  return timeline_;
}

KernelAggregatorCounters KernelAggregator::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

}  // namespace medprof::profiler
