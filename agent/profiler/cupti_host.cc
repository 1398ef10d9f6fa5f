#include "agent/profiler/cupti_host.h"

#include "absl/strings/str_cat.h"
#include "agent/profiler/cupti_call.h"
#include "common/status.h"

namespace medprof::profiler {
namespace {

void Deinitialize(CUpti_Profiler_Host_Object* object) {
  if (object == nullptr) return;
  CUpti_Profiler_Host_Deinitialize_Params p{CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
  p.pHostObject = object;
  (void)cuptiProfilerHostDeinitialize(&p);  // teardown: nothing to do on failure
}

}  // namespace

std::vector<const char*> CStrings(const std::vector<std::string>& names) {
  std::vector<const char*> out;
  out.reserve(names.size());
  for (const std::string& n : names) out.push_back(n.c_str());
  return out;
}

absl::StatusOr<std::unique_ptr<CuptiHost>> CuptiHost::Create(CUpti_ProfilerType type, const std::string& chip,
                                                             const std::vector<uint8_t>& availability) {
  std::unique_ptr<CuptiHost> h(new CuptiHost(type, chip, availability));
  MEDPROF_ASSIGN_OR_RETURN(h->object_, h->NewObject());
  return h;
}

CuptiHost::~CuptiHost() { Deinitialize(object_); }

absl::StatusOr<CUpti_Profiler_Host_Object*> CuptiHost::NewObject() {
  CUpti_Profiler_Host_Initialize_Params p{CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  p.profilerType = type_;
  p.pChipName = chip_.c_str();
  p.pCounterAvailabilityImage = availability_.empty() ? nullptr : availability_.data();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerHostInitialize(&p)));
  return p.pHostObject;
}

std::string CuptiHost::Validity(const std::string& metric) {
  CUpti_Profiler_Host_GetMetricProperties_Params p{
      CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE};
  p.pHostObject = object_;
  p.pMetricName = metric.c_str();
  const CUptiResult r = cuptiProfilerHostGetMetricProperties(&p);
  if (r != CUPTI_SUCCESS) {
    const char* name = nullptr;
    if (cuptiGetResultString(r, &name) != CUPTI_SUCCESS || name == nullptr) name = "CUPTI_ERROR";
    return name;
  }
  // GetMetricProperties accepts a base name; a config needs the rollup to exist too: check
  // by adding it to a scratch host object.
  auto scratch = NewObject();
  if (!scratch.ok()) return std::string(scratch.status().message());
  const char* names[] = {metric.c_str()};
  CUpti_Profiler_Host_ConfigAddMetrics_Params a{CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  a.pHostObject = *scratch;
  a.ppMetricNames = names;
  a.numMetrics = 1;
  const CUptiResult add = cuptiProfilerHostConfigAddMetrics(&a);
  Deinitialize(*scratch);
  if (add != CUPTI_SUCCESS) {
    const char* name = nullptr;
    if (cuptiGetResultString(add, &name) != CUPTI_SUCCESS || name == nullptr) name = "CUPTI_ERROR";
    return name;
  }
  return "";
}

CuptiHost::Config::~Config() { Deinitialize(object_); }

absl::StatusOr<std::unique_ptr<CuptiHost::Config>> CuptiHost::NewConfig(
    const std::vector<std::string>& metrics) {
  if (metrics.empty()) return absl::InvalidArgumentError("profiler configuration: no metrics");
  std::unique_ptr<Config> cfg(new Config());
  MEDPROF_ASSIGN_OR_RETURN(cfg->object_, NewObject());
  cfg->metrics_ = metrics;
  std::vector<const char*> names = CStrings(metrics);
  CUpti_Profiler_Host_ConfigAddMetrics_Params a{CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  a.pHostObject = cfg->object_;
  a.ppMetricNames = names.data();
  a.numMetrics = names.size();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerHostConfigAddMetrics(&a)));
  CUpti_Profiler_Host_GetConfigImageSize_Params s{CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
  s.pHostObject = cfg->object_;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerHostGetConfigImageSize(&s)));
  cfg->image_.resize(s.configImageSize);
  CUpti_Profiler_Host_GetConfigImage_Params g{CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  g.pHostObject = cfg->object_;
  g.configImageSize = cfg->image_.size();
  g.pConfigImage = cfg->image_.data();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerHostGetConfigImage(&g)));
  CUpti_Profiler_Host_GetNumOfPasses_Params p{CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
  p.configImageSize = cfg->image_.size();
  p.pConfigImage = cfg->image_.data();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerHostGetNumOfPasses(&p)));
  cfg->passes_ = p.numOfPasses;
  return cfg;
}

absl::StatusOr<std::vector<double>> CuptiHost::Config::Evaluate(const std::vector<uint8_t>& counter_data,
                                                                size_t index) const {
  std::vector<const char*> names = CStrings(metrics_);
  std::vector<double> values(metrics_.size(), 0.0);
  CUpti_Profiler_Host_EvaluateToGpuValues_Params p{
      CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
  p.pHostObject = object_;
  p.pCounterDataImage = counter_data.data();
  p.counterDataImageSize = counter_data.size();
  p.rangeIndex = index;
  p.ppMetricNames = names.data();
  p.numMetrics = names.size();
  p.pMetricValues = values.data();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerHostEvaluateToGpuValues(&p)));
  return values;
}

}  // namespace medprof::profiler
