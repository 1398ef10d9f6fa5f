#include "agent/worker/workload_factory.h"

#include <utility>

#include "agent/worker/config_mapping.h"
#include "workloads/meddpm/workload.h"

namespace medprof::worker {

std::string_view WorkloadKindName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kMedDdpm: return "meddpm";
  }
  return "unknown";
}

WorkloadKind WorkloadKindOf(const v1::WorkloadConfig& effective) {
  (void)effective;  // no field of WorkloadConfig names another model yet
  return WorkloadKind::kMedDdpm;
}

absl::StatusOr<std::unique_ptr<workload::Workload>> CreateWorkload(const v1::WorkloadConfig& effective,
                                                                   v1::DeviceKind device) {
  switch (WorkloadKindOf(effective)) {
    case WorkloadKind::kMedDdpm: {
      auto created = meddpm::Workload::Create(ToWorkloadOptions(effective, device));
      if (!created.ok()) return created.status();
      return std::unique_ptr<workload::Workload>(*std::move(created));
    }
  }
  return absl::InternalError("no workload implementation for this job");
}

}  // namespace medprof::worker
