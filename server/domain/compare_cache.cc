#include "server/domain/compare_cache.h"

#include "absl/strings/str_cat.h"

namespace medprof::server {
namespace {

// Length-prefixed, so that no field's text can imitate another field.
void Field(std::string& key, const std::string& value) { absl::StrAppend(&key, value.size(), ":", value, ";"); }

}  // namespace

std::string CompareCache::KeyOf(const CompareSpec& spec) {
  if (!spec.request.run_ids.empty()) return "";
  std::string key;
  for (const std::string& study : spec.studies) Field(key, study);
  Field(key, spec.baseline);
  Field(key, spec.request.baseline_gpu);
  absl::StrAppend(&key, static_cast<int>(spec.request.phase), ";", spec.top_categories, ";", spec.top_kernels);
  return key;
}

std::shared_ptr<const CompareResult> CompareCache::Find(const std::string& key, const StudyVersions& versions) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.versions != versions) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.result;
}

void CompareCache::Put(const std::string& key, const StudyVersions& versions,
                       std::shared_ptr<const CompareResult> result) {
  if (capacity_ == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    it->second.versions = versions;
    it->second.result = std::move(result);
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  if (entries_.size() >= capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(key);
  entries_.emplace(key, Entry{versions, std::move(result), lru_.begin()});
}

size_t CompareCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

size_t CompareCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace medprof::server
