#include "agent/worker/ceilings_cache.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/status.h"

namespace medprof::worker {
namespace {

void SetKey(const CeilingsKey& key, v1::Ceilings* c) {
  c->set_driver_version(key.driver_version);
  c->set_sm_clock_mhz(key.sm_clock_mhz);
  c->set_mem_clock_mhz(key.mem_clock_mhz);
  c->set_power_limit_w(key.power_limit_w);
}

// "" when `cached` was measured under `key`, else which field changed.
std::string KeyChange(const CeilingsKey& key, const v1::Ceilings& cached) {
  if (cached.driver_version() != key.driver_version) {
    return absl::StrCat("driver ", cached.driver_version(), " -> ", key.driver_version);
  }
  if (cached.sm_clock_mhz() != key.sm_clock_mhz) {
    return absl::StrCat("SM clock ", cached.sm_clock_mhz(), " -> ", key.sm_clock_mhz, " MHz");
  }
  if (cached.mem_clock_mhz() != key.mem_clock_mhz) {
    return absl::StrCat("memory clock ", cached.mem_clock_mhz(), " -> ", key.mem_clock_mhz, " MHz");
  }
  if (cached.power_limit_w() != key.power_limit_w) {
    return absl::StrCat("power cap ", cached.power_limit_w(), " -> ", key.power_limit_w, " W");
  }
  return "";
}

}  // namespace

absl::StatusOr<std::string> CeilingsCache::PathFor(const CeilingsKey& key) const {
  const bool ok = !key.gpu_uuid.empty() && key.gpu_uuid.size() <= 128 &&
                  std::all_of(key.gpu_uuid.begin(), key.gpu_uuid.end(),
                              [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-'; });
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("ceilings cache: gpu_uuid \"", key.gpu_uuid,
                                                   "\" must be 1..128 of [A-Za-z0-9-]"));
  }
  return absl::StrCat(dir_, "/ceilings-v", kFormat, "-", key.gpu_uuid, ".pb");
}

absl::StatusOr<v1::Ceilings> CeilingsCache::Load(const CeilingsKey& key) const {
  MEDPROF_ASSIGN_OR_RETURN(const std::string path, PathFor(key));
  if (!PathExists(path)) return absl::NotFoundError(absl::StrCat("no cached ceilings in ", path));
  MEDPROF_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  v1::Ceilings cached;
  if (!cached.ParseFromString(bytes) || cached.ceilings_size() == 0) {
    return absl::DataLossError(absl::StrCat(path, ": not a Ceilings message with ceilings (", bytes.size(), " bytes)"));
  }
  if (const std::string change = KeyChange(key, cached); !change.empty()) {
    return absl::NotFoundError(absl::StrCat("cached ceilings were measured under another setting: ", change));
  }
  cached.set_from_cache(true);
  cached.set_measure_ms(0);
  return cached;
}

absl::Status CeilingsCache::Store(const CeilingsKey& key, const v1::Ceilings& ceilings) const {
  MEDPROF_ASSIGN_OR_RETURN(const std::string path, PathFor(key));
  MEDPROF_RETURN_IF_ERROR(MakeDirs(dir_));
  v1::Ceilings stored = ceilings;
  SetKey(key, &stored);
  stored.set_from_cache(false);
  return WriteFileDurably(path, stored.SerializeAsString());
}

absl::StatusOr<v1::Ceilings> CeilingsCache::GetOrMeasure(const CeilingsKey& key, const CeilingsMeasurement& measure,
                                                         std::string* why) const {
  MEDPROF_RETURN_IF_ERROR(PathFor(key).status());  // a key that names no file is the caller's error
  absl::StatusOr<v1::Ceilings> cached = Load(key);
  if (cached.ok()) {
    why->clear();
    return cached;
  }
  *why = std::string(cached.status().message());
  const int64_t begin = MonotonicNs();
  MEDPROF_ASSIGN_OR_RETURN(v1::Ceilings measured, measure());
  measured.set_measure_ms((MonotonicNs() - begin) / 1'000'000);
  SetKey(key, &measured);
  measured.set_from_cache(false);
  if (absl::Status s = Store(key, measured); !s.ok()) absl::StrAppend(why, "; not cached: ", s.message());
  return measured;
}

}  // namespace medprof::worker
