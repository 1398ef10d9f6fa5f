// CeilingsCache: the node's measured roofline ceilings (workload.proto Ceilings), kept per GPU in
// the agent's work directory so that the worker measures them once per node and GPU, not once per
// run, and again whenever what they were measured under changes.
//
// A file <dir>/ceilings-v<kFormat>-<gpu uuid>.pb holds the binary Ceilings message with the driver
// version, SM and memory clocks and power cap it was measured under (its own fields). Load hits
// only when all four equal the key's; a missing file, a different key or an unreadable/corrupt file
// is a miss, and GetOrMeasure measures again and replaces the file (durably: temp + fsync +
// rename). Changing how ceilings are measured bumps kFormat, which leaves old files unread.
//
// The clocks in the key are the ones the caller chooses to key on (the worker uses the maximum SM
// and memory clocks NVML reports: the current clock moves with load and temperature from one
// reading to the next, and keying on it would re-measure on every run).
//
// Stateless apart from the files; two workers on one GPU never run at once (the agent runs one job
// per device), so no file lock. Thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::worker {

struct CeilingsKey {
  std::string gpu_uuid;  // "GPU-xxxxxxxx-...": names the file; [A-Za-z0-9-] only
  std::string driver_version;
  uint32_t sm_clock_mhz = 0;
  uint32_t mem_clock_mhz = 0;
  uint32_t power_limit_w = 0;
};

// Measures the ceilings (Ceilings.ceilings and their methods); the cache sets the key fields,
// from_cache and measure_ms.
using CeilingsMeasurement = std::function<absl::StatusOr<v1::Ceilings>()>;

class CeilingsCache {
 public:
  static constexpr int kFormat = 2;  // 2: the L2 roof is a read rate (was a read+write copy)

  explicit CeilingsCache(std::string dir) : dir_(std::move(dir)) {}

  // The file of `key`'s GPU; INVALID_ARGUMENT naming gpu_uuid when it is empty or has other
  // characters than [A-Za-z0-9-].
  absl::StatusOr<std::string> PathFor(const CeilingsKey& key) const;

  // The cached ceilings (from_cache true). NOT_FOUND when there is no file or it was measured under
  // another key (the message names the first field that differs, old and new value); DATA_LOSS when
  // the file cannot be parsed.
  absl::StatusOr<v1::Ceilings> Load(const CeilingsKey& key) const;

  // Writes `ceilings` with `key`'s fields set; creates the directory.
  absl::Status Store(const CeilingsKey& key, const v1::Ceilings& ceilings) const;

  // Load; on a miss, measure (measure_ms set), Store, and say in *why ("" on a hit) why it was
  // measured. A failed Store is reported in *why and does not fail the call; a failed measurement
  // is returned as it is.
  absl::StatusOr<v1::Ceilings> GetOrMeasure(const CeilingsKey& key, const CeilingsMeasurement& measure,
                                            std::string* why) const;

 private:
  const std::string dir_;
};

}  // namespace medprof::worker
