// CompareCache: finished comparisons kept for the next identical question.
//
// An entry is a comparison of one or more studies (never a run filter), keyed by the request's
// options and stamped with the StudyVersions it was computed from — read in the same snapshot as
// its rows. Find() serves it only to a caller holding exactly those versions, read in its own
// snapshot; since a study's revision moves with every write compare can see (server/store/
// migrations.cc, version 7), equal versions mean equal rows, so a stale comparison is never
// served, however the write reached the store. An entry whose versions no longer match is
// replaced by the next Put. At most `capacity` entries; the least recently used goes first.
//
// Thread-safe (one mutex, held only to look up or insert; results are shared, immutable).
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "server/domain/compare.h"
#include "server/domain/types.h"

namespace medprof::server {

class CompareCache {
 public:
  // At most `capacity` entries (DomainOptions::compare_cache_entries); 0 keeps none.
  explicit CompareCache(size_t capacity) : capacity_(capacity) {}

  // The key of a cacheable request (one or more studies, no run filter); "" = not cacheable.
  static std::string KeyOf(const CompareSpec& spec);

  // The comparison stored under `key` at exactly `versions`; null when there is none.
  std::shared_ptr<const CompareResult> Find(const std::string& key, const StudyVersions& versions);
  void Put(const std::string& key, const StudyVersions& versions, std::shared_ptr<const CompareResult> result);

  size_t hits() const;
  size_t misses() const;

 private:
  struct Entry {
    StudyVersions versions;
    std::shared_ptr<const CompareResult> result;
    std::list<std::string>::iterator lru;  // position in lru_
  };

  const size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // guarded by mu_
  std::list<std::string> lru_;                      // most recent first; guarded by mu_
  size_t hits_ = 0;                                 // guarded by mu_
  size_t misses_ = 0;                               // guarded by mu_
};

}  // namespace medprof::server
