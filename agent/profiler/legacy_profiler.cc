// The legacy Profiling API + Perfworks backend of CounterSession (counter_session.h): the V100
// path. Compiled when the toolkit ships nvperf_host.h (CUDA 11.x-13.x); its call sequence is the
// one spec/cupti.md §1.6 lists (CUPTI samples autorange_profiling / userrange_profiling).
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/profiler/counter_session.h"
#include "agent/profiler/cupti_call.h"
#include "agent/profiler/range_profiler.h"
#include "common/status.h"

#if !defined(MEDPROF_NO_NVPERF) && __has_include(<nvperf_host.h>) && __has_include(<nvperf_cuda_host.h>) && \
    __has_include(<nvperf_target.h>)
#define MEDPROF_HAVE_NVPERF 1
#include <nvperf_cuda_host.h>
#include <nvperf_host.h>
#include <nvperf_target.h>
#else
#define MEDPROF_HAVE_NVPERF 0
#endif

namespace medprof::profiler {

#if MEDPROF_HAVE_NVPERF
namespace {

// The one checked-call macro for Perfworks (NVPA_Status).
absl::Status NvpwStatus(NVPA_Status status, const char* call) {
  if (status == NVPA_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, " failed: NVPA_Status ", static_cast<int>(status)));
}
#define MEDPROF_NVPW_CALL(call) NvpwStatus((call), #call)

class MetricsEvaluator {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsEvaluator>> Create(const std::string& chip,
                                                                  const std::vector<uint8_t>& availability) {
    // Device attributes come later from the counter data (SetDeviceAttributes) when evaluating.
    std::unique_ptr<MetricsEvaluator> e(new MetricsEvaluator());
    NVPW_CUDA_MetricsEvaluator_CalculateScratchBufferSize_Params s{
        NVPW_CUDA_MetricsEvaluator_CalculateScratchBufferSize_Params_STRUCT_SIZE};
    s.pChipName = chip.c_str();
    s.pCounterAvailabilityImage = availability.empty() ? nullptr : availability.data();
    MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_CUDA_MetricsEvaluator_CalculateScratchBufferSize(&s)));
    e->scratch_.resize(s.scratchBufferSize);
    NVPW_CUDA_MetricsEvaluator_Initialize_Params i{NVPW_CUDA_MetricsEvaluator_Initialize_Params_STRUCT_SIZE};
    i.pScratchBuffer = e->scratch_.data();
    i.scratchBufferSize = e->scratch_.size();
    i.pChipName = s.pChipName;
    i.pCounterAvailabilityImage = s.pCounterAvailabilityImage;
    MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_CUDA_MetricsEvaluator_Initialize(&i)));
    e->evaluator_ = i.pMetricsEvaluator;
    return e;
  }
  ~MetricsEvaluator() {
    if (evaluator_ == nullptr) return;
    NVPW_MetricsEvaluator_Destroy_Params d{NVPW_MetricsEvaluator_Destroy_Params_STRUCT_SIZE};
    d.pMetricsEvaluator = evaluator_;
    (void)NVPW_MetricsEvaluator_Destroy(&d);  // teardown
  }
  absl::StatusOr<NVPW_MetricEvalRequest> Request(const std::string& metric) {
    NVPW_MetricEvalRequest r{};
    NVPW_MetricsEvaluator_ConvertMetricNameToMetricEvalRequest_Params c{
        NVPW_MetricsEvaluator_ConvertMetricNameToMetricEvalRequest_Params_STRUCT_SIZE};
    c.pMetricsEvaluator = evaluator_;
    c.pMetricName = metric.c_str();
    c.pMetricEvalRequest = &r;
    c.metricEvalRequestStructSize = NVPW_MetricEvalRequest_STRUCT_SIZE;
    if (absl::Status s = MEDPROF_NVPW_CALL(NVPW_MetricsEvaluator_ConvertMetricNameToMetricEvalRequest(&c));
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(metric, ": ", s.message()));
    }
    return r;
  }
  // The raw counters behind `requests`, as names owned by the evaluator.
  absl::StatusOr<std::vector<const char*>> RawDependencies(
      const std::vector<NVPW_MetricEvalRequest>& requests) {
    NVPW_MetricsEvaluator_GetMetricRawDependencies_Params p{
        NVPW_MetricsEvaluator_GetMetricRawDependencies_Params_STRUCT_SIZE};
    p.pMetricsEvaluator = evaluator_;
    p.pMetricEvalRequests = requests.data();
    p.numMetricEvalRequests = requests.size();
    p.metricEvalRequestStructSize = NVPW_MetricEvalRequest_STRUCT_SIZE;
    p.metricEvalRequestStrideSize = sizeof(NVPW_MetricEvalRequest);
    MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_MetricsEvaluator_GetMetricRawDependencies(&p)));
    std::vector<const char*> out(p.numRawDependencies);
    p.ppRawDependencies = out.data();
    MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_MetricsEvaluator_GetMetricRawDependencies(&p)));
    return out;
  }
  NVPW_MetricsEvaluator* get() const { return evaluator_; }

 private:
  MetricsEvaluator() = default;
  std::vector<uint8_t> scratch_;
  NVPW_MetricsEvaluator* evaluator_ = nullptr;
};

// The host half of a legacy session: configuration image and counter-data prefix (NVPW only,
// no GPU needed).
struct LegacyHostImages {
  std::vector<uint8_t> config, prefix;
  size_t passes = 0;
};

absl::Status BuildLegacyHostImages(const CounterSessionOptions& o, LegacyHostImages* out) {
  const uint8_t* avail = o.availability.empty() ? nullptr : o.availability.data();
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<MetricsEvaluator> eval,
                           MetricsEvaluator::Create(o.chip, o.availability));
  std::vector<NVPW_MetricEvalRequest> requests;
  for (const std::string& m : o.metrics) {
    MEDPROF_ASSIGN_OR_RETURN(NVPW_MetricEvalRequest r, eval->Request(m));
    requests.push_back(r);
  }
  MEDPROF_ASSIGN_OR_RETURN(std::vector<const char*> raw, eval->RawDependencies(requests));
  std::vector<NVPA_RawMetricRequest> raw_requests;
  for (const char* name : raw) {
    NVPA_RawMetricRequest r{NVPA_RAW_METRIC_REQUEST_STRUCT_SIZE};
    r.pMetricName = name;
    r.isolated = true;
    r.keepInstances = true;
    raw_requests.push_back(r);
  }
  NVPW_CUDA_RawMetricsConfig_Create_V2_Params c{NVPW_CUDA_RawMetricsConfig_Create_V2_Params_STRUCT_SIZE};
  c.activityKind = NVPA_ACTIVITY_KIND_PROFILER;
  c.pChipName = o.chip.c_str();
  c.pCounterAvailabilityImage = avail;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_CUDA_RawMetricsConfig_Create_V2(&c)));
  NVPA_RawMetricsConfig* config = c.pRawMetricsConfig;
  struct ConfigGuard {
    NVPA_RawMetricsConfig* c;
    ~ConfigGuard() {
      NVPW_RawMetricsConfig_Destroy_Params d{NVPW_RawMetricsConfig_Destroy_Params_STRUCT_SIZE};
      d.pRawMetricsConfig = c;
      (void)NVPW_RawMetricsConfig_Destroy(&d);
    }
  } config_guard{config};
  if (avail != nullptr) {
    NVPW_RawMetricsConfig_SetCounterAvailability_Params a{
        NVPW_RawMetricsConfig_SetCounterAvailability_Params_STRUCT_SIZE};
    a.pRawMetricsConfig = config;
    a.pCounterAvailabilityImage = avail;
    MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_RawMetricsConfig_SetCounterAvailability(&a)));
  }
  NVPW_RawMetricsConfig_BeginPassGroup_Params bg{NVPW_RawMetricsConfig_BeginPassGroup_Params_STRUCT_SIZE};
  bg.pRawMetricsConfig = config;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_RawMetricsConfig_BeginPassGroup(&bg)));
  NVPW_RawMetricsConfig_AddMetrics_Params am{NVPW_RawMetricsConfig_AddMetrics_Params_STRUCT_SIZE};
  am.pRawMetricsConfig = config;
  am.pRawMetricRequests = raw_requests.data();
  am.numMetricRequests = raw_requests.size();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_RawMetricsConfig_AddMetrics(&am)));
  NVPW_RawMetricsConfig_EndPassGroup_Params eg{NVPW_RawMetricsConfig_EndPassGroup_Params_STRUCT_SIZE};
  eg.pRawMetricsConfig = config;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_RawMetricsConfig_EndPassGroup(&eg)));
  NVPW_RawMetricsConfig_GenerateConfigImage_Params gen{
      NVPW_RawMetricsConfig_GenerateConfigImage_Params_STRUCT_SIZE};
  gen.pRawMetricsConfig = config;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_RawMetricsConfig_GenerateConfigImage(&gen)));
  NVPW_RawMetricsConfig_GetConfigImage_Params gi{NVPW_RawMetricsConfig_GetConfigImage_Params_STRUCT_SIZE};
  gi.pRawMetricsConfig = config;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_RawMetricsConfig_GetConfigImage(&gi)));
  out->config.resize(gi.bytesCopied);
  gi.bytesAllocated = out->config.size();
  gi.pBuffer = out->config.data();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_RawMetricsConfig_GetConfigImage(&gi)));
  NVPW_RawMetricsConfig_GetNumPasses_Params np{NVPW_RawMetricsConfig_GetNumPasses_Params_STRUCT_SIZE};
  np.pRawMetricsConfig = config;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_RawMetricsConfig_GetNumPasses(&np)));
  out->passes = np.numPipelinedPasses + np.numIsolatedPasses;
  NVPW_CUDA_CounterDataBuilder_Create_Params cb{NVPW_CUDA_CounterDataBuilder_Create_Params_STRUCT_SIZE};
  cb.pChipName = o.chip.c_str();
  cb.pCounterAvailabilityImage = avail;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_CUDA_CounterDataBuilder_Create(&cb)));
  struct BuilderGuard {
    NVPA_CounterDataBuilder* b;
    ~BuilderGuard() {
      NVPW_CounterDataBuilder_Destroy_Params d{NVPW_CounterDataBuilder_Destroy_Params_STRUCT_SIZE};
      d.pCounterDataBuilder = b;
      (void)NVPW_CounterDataBuilder_Destroy(&d);
    }
  } builder_guard{cb.pCounterDataBuilder};
  NVPW_CounterDataBuilder_AddMetrics_Params ba{NVPW_CounterDataBuilder_AddMetrics_Params_STRUCT_SIZE};
  ba.pCounterDataBuilder = cb.pCounterDataBuilder;
  ba.pRawMetricRequests = raw_requests.data();
  ba.numMetricRequests = raw_requests.size();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_CounterDataBuilder_AddMetrics(&ba)));
  NVPW_CounterDataBuilder_GetCounterDataPrefix_Params gp{
      NVPW_CounterDataBuilder_GetCounterDataPrefix_Params_STRUCT_SIZE};
  gp.pCounterDataBuilder = cb.pCounterDataBuilder;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_CounterDataBuilder_GetCounterDataPrefix(&gp)));
  out->prefix.resize(gp.bytesCopied);
  gp.bytesAllocated = out->prefix.size();
  gp.pBuffer = out->prefix.data();
  return MEDPROF_NVPW_CALL(NVPW_CounterDataBuilder_GetCounterDataPrefix(&gp));
}

absl::Status InitializeNvpwHost() {
  static const absl::Status host = [] {
    NVPW_InitializeHost_Params p{NVPW_InitializeHost_Params_STRUCT_SIZE};
    return MEDPROF_NVPW_CALL(NVPW_InitializeHost(&p));
  }();
  return host;
}

// A one-pass kernel session runs as one user-replay pass spanning every profiled launch
// (Enable/Disable around each) instead of CUPTI's kernel replay, which saves and restores device
// memory around each launch and stops inside a train step's first cuDNN convolution (docs/metrics.md).
// MEDPROF_LEGACY_ONE_PASS_REPLAY=kernel in the worker's environment keeps kernel replay, to compare.
bool OnePassUserReplay() {
  const char* v = std::getenv("MEDPROF_LEGACY_ONE_PASS_REPLAY");
  return v == nullptr || std::string_view(v) != "kernel";
}

class LegacySession final : public CounterSession {
 public:
  static absl::StatusOr<std::unique_ptr<LegacySession>> Create(const CounterSessionOptions& o) {
    MEDPROF_RETURN_IF_ERROR(InitializeCuptiProfiler());
    MEDPROF_RETURN_IF_ERROR(InitializeNvpwHost());
    std::unique_ptr<LegacySession> s(new LegacySession(o));
    MEDPROF_RETURN_IF_ERROR(s->Build());
    s->one_pass_user_ = o.replay == CUPTI_KernelReplay && s->passes_ == 1 && OnePassUserReplay();
    MEDPROF_RETURN_IF_ERROR(s->BeginSession());
    return s;
  }
  ~LegacySession() override {
    if (!session_) return;
    (void)EndOnePass();  // teardown
    CUpti_Profiler_UnsetConfig_Params u{CUpti_Profiler_UnsetConfig_Params_STRUCT_SIZE};
    u.ctx = o_.ctx;
    (void)cuptiProfilerUnsetConfig(&u);  // teardown
    CUpti_Profiler_EndSession_Params e{CUpti_Profiler_EndSession_Params_STRUCT_SIZE};
    e.ctx = o_.ctx;
    (void)cuptiProfilerEndSession(&e);
  }

  CounterApi api() const override { return CounterApi::kLegacy; }
  size_t passes() const override { return passes_; }

  // BeginPass/EndPass belong to user (and application) replay only: with kernel replay CUPTI
  // replays each kernel itself and refuses them (CUPTI_ERROR_INVALID_OPERATION on the H200).
  absl::Status Start() override {
    if (o_.replay != CUPTI_KernelReplay) {
      CUpti_Profiler_BeginPass_Params b{CUpti_Profiler_BeginPass_Params_STRUCT_SIZE};
      b.ctx = o_.ctx;
      MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerBeginPass(&b)));
    }
    CUpti_Profiler_EnableProfiling_Params e{CUpti_Profiler_EnableProfiling_Params_STRUCT_SIZE};
    e.ctx = o_.ctx;
    return MEDPROF_CUPTI_CALL(cuptiProfilerEnableProfiling(&e));
  }
  absl::StatusOr<bool> Stop() override {
    CUpti_Profiler_DisableProfiling_Params d{CUpti_Profiler_DisableProfiling_Params_STRUCT_SIZE};
    d.ctx = o_.ctx;
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerDisableProfiling(&d)));
    if (o_.replay == CUPTI_KernelReplay) return true;  // every pass ran inside the launch
    CUpti_Profiler_EndPass_Params e{CUpti_Profiler_EndPass_Params_STRUCT_SIZE};
    e.ctx = o_.ctx;
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerEndPass(&e)));
    return e.allPassesSubmitted != 0;
  }
  absl::Status PushRange(const char* name) override {
    CUpti_Profiler_PushRange_Params p{CUpti_Profiler_PushRange_Params_STRUCT_SIZE};
    p.ctx = o_.ctx;
    p.pRangeName = name;
    return MEDPROF_CUPTI_CALL(cuptiProfilerPushRange(&p));
  }
  absl::Status PopRange() override {
    CUpti_Profiler_PopRange_Params p{CUpti_Profiler_PopRange_Params_STRUCT_SIZE};
    p.ctx = o_.ctx;
    return MEDPROF_CUPTI_CALL(cuptiProfilerPopRange(&p));
  }
  absl::StatusOr<std::vector<RangeValues>> Decode(size_t* dropped) override {
    MEDPROF_RETURN_IF_ERROR(EndOnePass());
    CUpti_Profiler_FlushCounterData_Params f{CUpti_Profiler_FlushCounterData_Params_STRUCT_SIZE};
    f.ctx = o_.ctx;
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerFlushCounterData(&f)));
    if (dropped != nullptr) *dropped = 0;  // the legacy API reports no dropped ranges
    NVPW_CounterData_GetNumRanges_Params n{NVPW_CounterData_GetNumRanges_Params_STRUCT_SIZE};
    n.pCounterDataImage = counter_data_.data();
    MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_CounterData_GetNumRanges(&n)));
    MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<MetricsEvaluator> eval,
                             MetricsEvaluator::Create(o_.chip, o_.availability));
    std::vector<NVPW_MetricEvalRequest> requests;
    for (const std::string& m : o_.metrics) {
      MEDPROF_ASSIGN_OR_RETURN(NVPW_MetricEvalRequest r, eval->Request(m));
      requests.push_back(r);
    }
    NVPW_MetricsEvaluator_SetDeviceAttributes_Params a{
        NVPW_MetricsEvaluator_SetDeviceAttributes_Params_STRUCT_SIZE};
    a.pMetricsEvaluator = eval->get();
    a.pCounterDataImage = counter_data_.data();
    a.counterDataImageSize = counter_data_.size();
    MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_MetricsEvaluator_SetDeviceAttributes(&a)));
    std::vector<RangeValues> out;
    for (size_t r = 0; r < n.numRanges; ++r) {
      RangeValues rv;
      NVPW_Profiler_CounterData_GetRangeDescriptions_Params d{
          NVPW_Profiler_CounterData_GetRangeDescriptions_Params_STRUCT_SIZE};
      d.pCounterDataImage = counter_data_.data();
      d.rangeIndex = r;
      MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_Profiler_CounterData_GetRangeDescriptions(&d)));
      std::vector<const char*> parts(d.numDescriptions);
      d.ppDescriptions = parts.data();
      MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_Profiler_CounterData_GetRangeDescriptions(&d)));
      for (size_t i = 0; i < parts.size(); ++i)
        absl::StrAppend(&rv.name, i ? "/" : "", parts[i] ? parts[i] : "");
      rv.values.assign(requests.size(), 0.0);
      NVPW_MetricsEvaluator_EvaluateToGpuValues_Params e{
          NVPW_MetricsEvaluator_EvaluateToGpuValues_Params_STRUCT_SIZE};
      e.pMetricsEvaluator = eval->get();
      e.pMetricEvalRequests = requests.data();
      e.numMetricEvalRequests = requests.size();
      e.metricEvalRequestStructSize = NVPW_MetricEvalRequest_STRUCT_SIZE;
      e.metricEvalRequestStrideSize = sizeof(NVPW_MetricEvalRequest);
      e.pCounterDataImage = counter_data_.data();
      e.counterDataImageSize = counter_data_.size();
      e.rangeIndex = r;
      e.isolated = true;
      e.pMetricValues = rv.values.data();
      MEDPROF_RETURN_IF_ERROR(MEDPROF_NVPW_CALL(NVPW_MetricsEvaluator_EvaluateToGpuValues(&e)));
      out.push_back(std::move(rv));
    }
    return out;
  }

 private:
  explicit LegacySession(const CounterSessionOptions& o) : o_(o) {}

  // Configuration image, counter-data prefix and image (NVPW + legacy target calls).
  absl::Status Build() {
    LegacyHostImages images;
    MEDPROF_RETURN_IF_ERROR(BuildLegacyHostImages(o_, &images));
    config_image_ = std::move(images.config);
    prefix_ = std::move(images.prefix);
    passes_ = images.passes;
    // Counter-data image and its scratch buffer.
    CUpti_Profiler_CounterDataImageOptions opts{CUpti_Profiler_CounterDataImageOptions_STRUCT_SIZE};
    opts.pCounterDataPrefix = prefix_.data();
    opts.counterDataPrefixSize = prefix_.size();
    opts.maxNumRanges = static_cast<uint32_t>(o_.max_ranges);
    opts.maxNumRangeTreeNodes = static_cast<uint32_t>(o_.max_ranges);
    opts.maxRangeNameLength = 64;
    CUpti_Profiler_CounterDataImage_CalculateSize_Params cs{
        CUpti_Profiler_CounterDataImage_CalculateSize_Params_STRUCT_SIZE};
    cs.pOptions = &opts;
    cs.sizeofCounterDataImageOptions = CUpti_Profiler_CounterDataImageOptions_STRUCT_SIZE;
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerCounterDataImageCalculateSize(&cs)));
    counter_data_.assign(cs.counterDataImageSize, 0);
    CUpti_Profiler_CounterDataImage_Initialize_Params ci{
        CUpti_Profiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    ci.sizeofCounterDataImageOptions = CUpti_Profiler_CounterDataImageOptions_STRUCT_SIZE;
    ci.pOptions = &opts;
    ci.counterDataImageSize = counter_data_.size();
    ci.pCounterDataImage = counter_data_.data();
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerCounterDataImageInitialize(&ci)));
    CUpti_Profiler_CounterDataImage_CalculateScratchBufferSize_Params ss{
        CUpti_Profiler_CounterDataImage_CalculateScratchBufferSize_Params_STRUCT_SIZE};
    ss.counterDataImageSize = counter_data_.size();
    ss.pCounterDataImage = counter_data_.data();
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerCounterDataImageCalculateScratchBufferSize(&ss)));
    scratch_.assign(ss.counterDataScratchBufferSize, 0);
    CUpti_Profiler_CounterDataImage_InitializeScratchBuffer_Params is{
        CUpti_Profiler_CounterDataImage_InitializeScratchBuffer_Params_STRUCT_SIZE};
    is.counterDataImageSize = counter_data_.size();
    is.pCounterDataImage = counter_data_.data();
    is.counterDataScratchBufferSize = scratch_.size();
    is.pCounterDataScratchBuffer = scratch_.data();
    return MEDPROF_CUPTI_CALL(cuptiProfilerCounterDataImageInitializeScratchBuffer(&is));
  }

  absl::Status BeginSession() {
    CUpti_Profiler_BeginSession_Params b{CUpti_Profiler_BeginSession_Params_STRUCT_SIZE};
    b.ctx = o_.ctx;
    b.counterDataImageSize = counter_data_.size();
    b.pCounterDataImage = counter_data_.data();
    b.counterDataScratchBufferSize = scratch_.size();
    b.pCounterDataScratchBuffer = scratch_.data();
    b.range = o_.range;
    b.replayMode = one_pass_user_ ? CUPTI_UserReplay : o_.replay;
    b.maxRangesPerPass = o_.max_ranges;
    b.maxLaunchesPerPass = o_.max_ranges;
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerBeginSession(&b)));
    session_ = true;
    CUpti_Profiler_SetConfig_Params s{CUpti_Profiler_SetConfig_Params_STRUCT_SIZE};
    s.ctx = o_.ctx;
    s.pConfig = config_image_.data();
    s.configSize = config_image_.size();
    s.minNestingLevel = 1;
    s.numNestingLevels = 1;
    s.passIndex = 0;
    s.targetNestingLevel = 1;
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerSetConfig(&s)));
    if (!one_pass_user_) return absl::OkStatus();
    CUpti_Profiler_BeginPass_Params bp{CUpti_Profiler_BeginPass_Params_STRUCT_SIZE};
    bp.ctx = o_.ctx;
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerBeginPass(&bp)));
    pass_open_ = true;
    return absl::OkStatus();
  }

  // Ends the one user-replay pass (one_pass_user_) before its ranges are read; a no-op otherwise.
  absl::Status EndOnePass() {
    if (!pass_open_) return absl::OkStatus();
    pass_open_ = false;
    CUpti_Profiler_EndPass_Params e{CUpti_Profiler_EndPass_Params_STRUCT_SIZE};
    e.ctx = o_.ctx;
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiProfilerEndPass(&e)));
    if (e.allPassesSubmitted == 0) {
      return absl::InternalError("legacy profiling API: a one-pass configuration still wants passes after its pass");
    }
    return absl::OkStatus();
  }

  const CounterSessionOptions o_;
  std::vector<uint8_t> config_image_, prefix_, counter_data_, scratch_;
  size_t passes_ = 0;
  bool session_ = false;
  bool one_pass_user_ = false;  // one user-replay pass over every profiled launch (see above)
  bool pass_open_ = false;
};

}  // namespace

bool LegacyCounterApiCompiled() { return true; }

absl::StatusOr<size_t> LegacyConfigPasses(const std::string& chip, const std::vector<std::string>& metrics) {
  MEDPROF_RETURN_IF_ERROR(InitializeNvpwHost());
  CounterSessionOptions o;
  o.chip = chip;
  o.metrics = metrics;
  LegacyHostImages images;
  MEDPROF_RETURN_IF_ERROR(BuildLegacyHostImages(o, &images));
  return images.passes;
}

absl::StatusOr<std::vector<std::string>> MetricRawCounters(const std::string& chip, const std::string& metric) {
  MEDPROF_RETURN_IF_ERROR(InitializeNvpwHost());
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<MetricsEvaluator> eval, MetricsEvaluator::Create(chip, {}));
  MEDPROF_ASSIGN_OR_RETURN(NVPW_MetricEvalRequest request, eval->Request(metric));
  MEDPROF_ASSIGN_OR_RETURN(std::vector<const char*> raw, eval->RawDependencies({request}));
  return std::vector<std::string>(raw.begin(), raw.end());
}

absl::StatusOr<std::unique_ptr<CounterSession>> NewLegacyCounterSession(
    const CounterSessionOptions& options) {
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<LegacySession> s, LegacySession::Create(options));
  return std::unique_ptr<CounterSession>(std::move(s));
}

#else  // !MEDPROF_HAVE_NVPERF

bool LegacyCounterApiCompiled() { return false; }

absl::StatusOr<size_t> LegacyConfigPasses(const std::string&, const std::vector<std::string>&) {
  return absl::UnimplementedError(
      "legacy profiling API: this worker was built with a CUDA toolkit without nvperf_host.h");
}

absl::StatusOr<std::vector<std::string>> MetricRawCounters(const std::string&, const std::string&) {
  return absl::UnimplementedError(
      "legacy profiling API: this worker was built with a CUDA toolkit without nvperf_host.h");
}

absl::StatusOr<std::unique_ptr<CounterSession>> NewLegacyCounterSession(const CounterSessionOptions&) {
  return absl::UnimplementedError(
      "legacy profiling API: this worker was built with a CUDA toolkit without nvperf_host.h");
}

#endif

}  // namespace medprof::profiler
