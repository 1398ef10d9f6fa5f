#include "server/domain/query_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "common/status.h"
#include "server/domain/compare.h"

namespace medprof::server {
double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return QuantileOfSorted(values, q);
}

double QuantileOfSorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double h = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

// A comparison already made is served on the caller's thread: one short read of the studies'
// revisions and a copy. Making one (reading every run's rows, the bootstrap) is what costs CPU,
// and runs on the query pool.
absl::StatusOr<CompareResult> QueryEngine::Compare(const CallContext&, const CompareRequest& r) {
  QueryTimer timer(core_, "compare");
  MEDPROF_ASSIGN_OR_RETURN(const CompareSpec spec, ValidateCompare(r));
  const std::string key = CompareCache::KeyOf(spec);
  if (!key.empty()) {
    std::shared_ptr<const CompareResult> cached;
    MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
      MEDPROF_ASSIGN_OR_RETURN(StudyVersions versions, ReadStudyVersions(tx, spec));
      cached = cache_.Find(key, versions);
      return absl::OkStatus();
    }));
    if (cached != nullptr) return *cached;
  }
  return core_.query_pool.Call([&] { return MakeCompare(spec, key); });
}

// The rows are read in one snapshot with the studies' versions: the versions a result is stored
// under are those of the rows it was computed from.
absl::StatusOr<CompareResult> QueryEngine::MakeCompare(const CompareSpec& spec, const std::string& key) {
  StudyVersions versions;
  CompareRows rows;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(versions, ReadStudyVersions(tx, spec));
    MEDPROF_ASSIGN_OR_RETURN(rows, LoadCompareRows(tx, spec));
    return absl::OkStatus();
  }));
  MEDPROF_ASSIGN_OR_RETURN(CompareResult out, BuildCompare(spec, rows));
  if (!key.empty()) cache_.Put(key, versions, std::make_shared<const CompareResult>(out));
  return out;
}

}  // namespace medprof::server
