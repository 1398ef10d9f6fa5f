#include "agent/profiler/shape_table.h"

namespace medprof::profiler {

uint32_t ShapeTable::Intern(uint64_t hash, const std::function<std::string()>& describe) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(hash);
  if (it != ids_.end()) return it->second;
  if (texts_.size() >= kMaxEntries) return 0;
  texts_.push_back(describe());
  const auto id = static_cast<uint32_t>(texts_.size());
  ids_.emplace(hash, id);
  return id;
}

std::string ShapeTable::Lookup(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return id == 0 || id > texts_.size() ? std::string() : texts_[id - 1];
}

size_t ShapeTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return texts_.size();
}

}  // namespace medprof::profiler
