#include "agent/profiler/range_profiler.h"

#include <cupti_target.h>

#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/profiler/cupti_call.h"
#include "common/status.h"

namespace medprof::profiler {
namespace {

const char* Level(CUpti_Profiler_Support_Level l) {
  switch (l) {
    case CUPTI_PROFILER_CONFIGURATION_SUPPORTED:
      return "supported";
    case CUPTI_PROFILER_CONFIGURATION_DISABLED:
      return "disabled by the system";
    case CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED:
      return "unsupported";
    default:
      return "unknown";
  }
}

}  // namespace

absl::Status InitializeCuptiProfiler() {
  static std::once_flag once;
  static absl::Status status;
  std::call_once(once, [] {
    CUpti_Profiler_Initialize_Params p{CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    status = MEDPROF_CUPTI_CALL(cuptiProfilerInitialize(&p));
  });
  return status;
}

absl::StatusOr<std::string> ChipName(int device_index) {
  MEDPROF_RETURN_IF_ERROR(InitializeCuptiProfiler());
  CUpti_Device_GetChipName_Params p{CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  p.deviceIndex = static_cast<size_t>(device_index);
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiDeviceGetChipName(&p)));
  return std::string(p.pChipName != nullptr ? p.pChipName : "");
}

absl::StatusOr<std::vector<uint8_t>> CounterAvailability(CUcontext ctx) {
  MEDPROF_RETURN_IF_ERROR(InitializeCuptiProfiler());
  CUpti_Profiler_GetCounterAvailability_Params p{CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
  p.ctx = ctx;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerGetCounterAvailability(&p)));
  std::vector<uint8_t> image(p.counterAvailabilityImageSize);
  p.pCounterAvailabilityImage = image.data();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerGetCounterAvailability(&p)));
  return image;
}

absl::Status DeviceSupported(int device_index, CUpti_Profiler_API api) {
  MEDPROF_RETURN_IF_ERROR(InitializeCuptiProfiler());
  CUpti_Profiler_DeviceSupported_Params p{CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
  p.cuDevice = static_cast<CUdevice>(device_index);
  p.api = api;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerDeviceSupported(&p)));
  if (p.isSupported == CUPTI_PROFILER_CONFIGURATION_SUPPORTED) return absl::OkStatus();
  std::vector<std::string> why;
  const std::pair<const char*, CUpti_Profiler_Support_Level> aspects[] = {
      {"architecture", p.architecture},
      {"SLI", p.sli},
      {"vGPU", p.vGpu},
      {"confidential compute", p.confidentialCompute},
      {"CMP board", p.cmp},
      {"WSL", p.wsl}};
  for (const auto& [name, level] : aspects) {
    if (level != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why.push_back(absl::StrCat(name, " ", Level(level)));
  }
  return absl::UnimplementedError(absl::StrCat("cuptiProfilerDeviceSupported: not supported on device ",
                                               device_index, ": ", absl::StrJoin(why, ", ")));
}

absl::StatusOr<std::unique_ptr<RangeProfilerTarget>> RangeProfilerTarget::Enable(CUcontext ctx) {
  MEDPROF_RETURN_IF_ERROR(InitializeCuptiProfiler());
  std::unique_ptr<RangeProfilerTarget> t(new RangeProfilerTarget());
  CUpti_RangeProfiler_Enable_Params p{CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
  p.ctx = ctx;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiRangeProfilerEnable(&p)));
  t->object_ = p.pRangeProfilerObject;
  return t;
}

RangeProfilerTarget::~RangeProfilerTarget() {
  if (object_ == nullptr) return;
  CUpti_RangeProfiler_Disable_Params p{CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
  p.pRangeProfilerObject = object_;
  (void)cuptiRangeProfilerDisable(&p);  // teardown
}

absl::Status RangeProfilerTarget::Configure(CuptiHost::Config* config, CUpti_ProfilerRange range,
                                            CUpti_ProfilerReplayMode replay, size_t max_ranges) {
  config_ = config;
  std::vector<const char*> names = CStrings(config->metrics());
  CUpti_RangeProfiler_GetCounterDataSize_Params s{CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
  s.pRangeProfilerObject = object_;
  s.pMetricNames = names.data();
  s.numMetrics = names.size();
  s.maxNumOfRanges = max_ranges;
  s.maxNumRangeTreeNodes = static_cast<uint32_t>(max_ranges);
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiRangeProfilerGetCounterDataSize(&s)));
  counter_data_.assign(s.counterDataSize, 0);
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params i{
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
  i.pRangeProfilerObject = object_;
  i.counterDataSize = counter_data_.size();
  i.pCounterData = counter_data_.data();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiRangeProfilerCounterDataImageInitialize(&i)));
  CUpti_RangeProfiler_SetConfig_Params c{CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
  c.pRangeProfilerObject = object_;
  c.configSize = config->image().size();
  c.pConfig = config->image().data();
  c.counterDataImageSize = counter_data_.size();
  c.pCounterDataImage = counter_data_.data();
  c.range = range;
  c.replayMode = replay;
  c.maxRangesPerPass = max_ranges;
  c.numNestingLevels = 1;
  c.minNestingLevel = 1;
  c.passIndex = 0;
  c.targetNestingLevel = 1;
  return MEDPROF_CUPTI_CALL(cuptiRangeProfilerSetConfig(&c));
}

absl::Status RangeProfilerTarget::Start() {
  CUpti_RangeProfiler_Start_Params p{CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
  p.pRangeProfilerObject = object_;
  return MEDPROF_CUPTI_CALL(cuptiRangeProfilerStart(&p));
}

absl::StatusOr<bool> RangeProfilerTarget::Stop() {
  CUpti_RangeProfiler_Stop_Params p{CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
  p.pRangeProfilerObject = object_;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiRangeProfilerStop(&p)));
  return p.isAllPassSubmitted != 0;
}

absl::Status RangeProfilerTarget::PushRange(const char* name) {
  CUpti_RangeProfiler_PushRange_Params p{CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
  p.pRangeProfilerObject = object_;
  p.pRangeName = name;
  return MEDPROF_CUPTI_CALL(cuptiRangeProfilerPushRange(&p));
}

absl::Status RangeProfilerTarget::PopRange() {
  CUpti_RangeProfiler_PopRange_Params p{CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
  p.pRangeProfilerObject = object_;
  return MEDPROF_CUPTI_CALL(cuptiRangeProfilerPopRange(&p));
}

absl::StatusOr<std::vector<RangeValues>> RangeProfilerTarget::Decode(size_t* dropped) {
  CUpti_RangeProfiler_DecodeData_Params d{CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
  d.pRangeProfilerObject = object_;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiRangeProfilerDecodeData(&d)));
  if (dropped != nullptr) *dropped = d.numOfRangeDropped;
  CUpti_RangeProfiler_GetCounterDataInfo_Params info{
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
  info.pCounterDataImage = counter_data_.data();
  info.counterDataImageSize = counter_data_.size();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiRangeProfilerGetCounterDataInfo(&info)));
  std::vector<RangeValues> out;
  for (size_t r = 0; r < info.numTotalRanges; ++r) {
    CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri{
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
    ri.pCounterDataImage = counter_data_.data();
    ri.counterDataImageSize = counter_data_.size();
    ri.rangeIndex = r;
    ri.rangeDelimiter = "/";
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiRangeProfilerCounterDataGetRangeInfo(&ri)));
    RangeValues rv;
    rv.name = ri.rangeName != nullptr ? ri.rangeName : "";
    // The header does not say who owns rangeName; it is small and read once per range, so
    // it is left to CUPTI rather than risk a double free.
    MEDPROF_ASSIGN_OR_RETURN(rv.values, config_->Evaluate(counter_data_, r));
    out.push_back(std::move(rv));
  }
  return out;
}

}  // namespace medprof::profiler
