#include "agent/profiler/pm_sampler.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/profiler/cupti_call.h"
#include "agent/profiler/range_profiler.h"
#include "common/status.h"

namespace medprof::profiler {

absl::StatusOr<std::unique_ptr<PmSampler>> PmSampler::Enable(int device_index, const std::string& chip,
                                                             const std::vector<std::string>& metrics,
                                                             uint64_t interval_ns, uint32_t max_samples) {
  if (metrics.empty()) return absl::InvalidArgumentError("pm sampling: no metrics");
  MEDPROF_RETURN_IF_ERROR(InitializeCuptiProfiler());
  std::unique_ptr<PmSampler> s(new PmSampler());
  CUpti_PmSampling_GetCounterAvailability_Params a{
      CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
  a.deviceIndex = static_cast<size_t>(device_index);
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPmSamplingGetCounterAvailability(&a)));
  std::vector<uint8_t> availability(a.counterAvailabilityImageSize);
  a.pCounterAvailabilityImage = availability.data();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPmSamplingGetCounterAvailability(&a)));
  MEDPROF_ASSIGN_OR_RETURN(s->host_, CuptiHost::Create(CUPTI_PROFILER_TYPE_PM_SAMPLING, chip, availability));
  MEDPROF_ASSIGN_OR_RETURN(s->config_, s->host_->NewConfig(metrics));
  if (s->config_->passes() != 1) {
    return absl::UnimplementedError(absl::StrCat("pm sampling: the metric set needs ", s->config_->passes(),
                                                 " passes on ", chip,
                                                 "; PM sampling takes single-pass sets only"));
  }
  CUpti_PmSampling_Enable_Params e{CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
  e.deviceIndex = static_cast<size_t>(device_index);
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPmSamplingEnable(&e)));
  s->object_ = e.pPmSamplingObject;

  // GA100 and Turing only trigger on SM clock cycles (spec/cupti.md §0): ~1.4 GHz.
  const bool sysclk = chip == "GA100" || absl::StartsWith(chip, "TU");
  CUpti_PmSampling_SetConfig_Params c{CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE};
  c.pPmSamplingObject = s->object_;
  c.configSize = s->config_->image().size();
  c.pConfig = s->config_->image().data();
  c.hardwareBufferSize = 256ull << 20;
  c.samplingInterval = sysclk ? interval_ns * 14 / 10 : interval_ns;
  c.triggerMode = sysclk ? CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL
                         : CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
  c.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPmSamplingSetConfig(&c)));

  std::vector<const char*> names = CStrings(metrics);
  CUpti_PmSampling_GetCounterDataSize_Params z{CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
  z.pPmSamplingObject = s->object_;
  z.pMetricNames = names.data();
  z.numMetrics = names.size();
  z.maxSamples = max_samples;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPmSamplingGetCounterDataSize(&z)));
  s->counter_data_.assign(z.counterDataSize, 0);
  CUpti_PmSampling_CounterDataImage_Initialize_Params i{
      CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
  i.pPmSamplingObject = s->object_;
  i.counterDataSize = s->counter_data_.size();
  i.pCounterData = s->counter_data_.data();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPmSamplingCounterDataImageInitialize(&i)));
  return s;
}

PmSampler::~PmSampler() {
  if (object_ == nullptr) return;
  if (started_) (void)Stop();
  CUpti_PmSampling_Disable_Params d{CUpti_PmSampling_Disable_Params_STRUCT_SIZE};
  d.pPmSamplingObject = object_;
  (void)cuptiPmSamplingDisable(&d);  // teardown
}

absl::Status PmSampler::Start() {
  CUpti_PmSampling_Start_Params p{CUpti_PmSampling_Start_Params_STRUCT_SIZE};
  p.pPmSamplingObject = object_;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPmSamplingStart(&p)));
  started_ = true;
  return absl::OkStatus();
}

absl::Status PmSampler::Stop() {
  if (!started_) return absl::OkStatus();
  started_ = false;
  CUpti_PmSampling_Stop_Params p{CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
  p.pPmSamplingObject = object_;
  return MEDPROF_CUPTI_CALL(cuptiPmSamplingStop(&p));
}

absl::StatusOr<std::vector<PmSample>> PmSampler::Decode(bool* overflow) {
  CUpti_PmSampling_DecodeData_Params d{CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE};
  d.pPmSamplingObject = object_;
  d.pCounterDataImage = counter_data_.data();
  d.counterDataImageSize = counter_data_.size();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPmSamplingDecodeData(&d)));
  if (overflow != nullptr) *overflow = d.overflow != 0;
  CUpti_PmSampling_GetCounterDataInfo_Params info{CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE};
  info.pCounterDataImage = counter_data_.data();
  info.counterDataImageSize = counter_data_.size();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPmSamplingGetCounterDataInfo(&info)));
  std::vector<PmSample> out;
  for (size_t k = 0; k < info.numCompletedSamples; ++k) {
    CUpti_PmSampling_CounterData_GetSampleInfo_Params si{
        CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE};
    si.pPmSamplingObject = object_;
    si.pCounterDataImage = counter_data_.data();
    si.counterDataImageSize = counter_data_.size();
    si.sampleIndex = k;
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPmSamplingCounterDataGetSampleInfo(&si)));
    PmSample s;
    s.start_ns = si.startTimestamp;
    s.end_ns = si.endTimestamp;
    MEDPROF_ASSIGN_OR_RETURN(s.values, config_->Evaluate(counter_data_, k));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace medprof::profiler
