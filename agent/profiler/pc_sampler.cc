#include "agent/profiler/pc_sampler.h"

#include <cupti_pcsampling.h>

#include <cstdlib>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "agent/profiler/cupti_call.h"
#include "agent/profiler/kernel_aggregator.h"
#include "common/status.h"

namespace medprof::profiler {
namespace {

CUpti_PCSamplingConfigurationInfo Attr(CUpti_PCSamplingConfigurationAttributeType type) {
  CUpti_PCSamplingConfigurationInfo a{};
  a.attributeType = type;
  return a;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PcSampler>> PcSampler::Enable(CUcontext ctx, const PcSamplerOptions& options) {
  if (options.period_exponent < 5 || options.period_exponent > 31) {
    return absl::InvalidArgumentError(absl::StrCat("pc sampling: period exponent ", options.period_exponent,
                                                   " is out of range (allowed 5..31)"));
  }
  std::unique_ptr<PcSampler> s(new PcSampler());
  s->ctx_ = ctx;
  s->max_pcs_ = options.max_pcs;
  CUpti_PCSamplingEnableParams e{CUpti_PCSamplingEnableParamsSize};
  e.ctx = ctx;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPCSamplingEnable(&e)));
  s->enabled_ = true;

  size_t num_reasons = 0;
  CUpti_PCSamplingGetNumStallReasonsParams n{CUpti_PCSamplingGetNumStallReasonsParamsSize};
  n.ctx = ctx;
  n.numStallReasons = &num_reasons;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPCSamplingGetNumStallReasons(&n)));
  s->reason_indices_.assign(num_reasons, 0);
  s->reason_storage_.assign(num_reasons, std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE, 0));
  std::vector<char*> names(num_reasons);
  for (size_t i = 0; i < num_reasons; ++i) names[i] = s->reason_storage_[i].data();
  CUpti_PCSamplingGetStallReasonsParams r{CUpti_PCSamplingGetStallReasonsParamsSize};
  r.ctx = ctx;
  r.numStallReasons = num_reasons;
  r.stallReasonIndex = s->reason_indices_.data();
  r.stallReasons = names.data();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPCSamplingGetStallReasons(&r)));
  for (size_t i = 0; i < num_reasons; ++i) s->reason_names_.emplace_back(names[i]);

  // The output buffer: max_pcs PC records, each with room for every stall reason.
  s->pc_data_.assign(sizeof(CUpti_PCSamplingPCData) * s->max_pcs_, 0);
  s->pc_storage_.assign(s->max_pcs_, std::vector<uint8_t>(sizeof(CUpti_PCSamplingStallReason) * num_reasons));
  auto* pcs = reinterpret_cast<CUpti_PCSamplingPCData*>(s->pc_data_.data());
  for (size_t i = 0; i < s->max_pcs_; ++i) {
    pcs[i].size = sizeof(CUpti_PCSamplingPCData);
    pcs[i].stallReason = reinterpret_cast<CUpti_PCSamplingStallReason*>(s->pc_storage_[i].data());
  }
  s->data_.assign(sizeof(CUpti_PCSamplingData), 0);
  auto* data = reinterpret_cast<CUpti_PCSamplingData*>(s->data_.data());
  data->size = sizeof(CUpti_PCSamplingData);
  data->collectNumPcs = s->max_pcs_;
  data->pPcData = pcs;

  std::vector<CUpti_PCSamplingConfigurationInfo> attrs;
  auto period = Attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD);
  period.attributeData.samplingPeriodData.samplingPeriod = options.period_exponent;
  attrs.push_back(period);
  auto mode = Attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE);
  mode.attributeData.collectionModeData.collectionMode = CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
  attrs.push_back(mode);
  auto scratch = Attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE);
  scratch.attributeData.scratchBufferSizeData.scratchBufferSize = options.scratch_bytes;
  attrs.push_back(scratch);
  auto hw = Attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE);
  hw.attributeData.hardwareBufferSizeData.hardwareBufferSize = options.hardware_bytes;
  attrs.push_back(hw);
  auto buffer = Attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER);
  buffer.attributeData.samplingDataBufferData.samplingDataBuffer = data;
  attrs.push_back(buffer);
  CUpti_PCSamplingConfigurationInfoParams c{CUpti_PCSamplingConfigurationInfoParamsSize};
  c.ctx = ctx;
  c.numAttributes = attrs.size();
  c.pPCSamplingConfigurationInfo = attrs.data();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPCSamplingSetConfigurationAttribute(&c)));
  return s;
}

PcSampler::~PcSampler() {
  if (!enabled_) return;
  CUpti_PCSamplingDisableParams d{CUpti_PCSamplingDisableParamsSize};
  d.ctx = ctx_;
  (void)cuptiPCSamplingDisable(&d);  // teardown
}

absl::Status PcSampler::Drain(bool keep, StallSamples* samples) {
  if (!enabled_) return absl::FailedPreconditionError("pc sampling is not enabled");
  auto* data = reinterpret_cast<CUpti_PCSamplingData*>(data_.data());
  std::unordered_map<std::string, std::string> demangled;
  for (int round = 0; round < 100000; ++round) {
    CUpti_PCSamplingGetDataParams g{CUpti_PCSamplingGetDataParamsSize};
    g.ctx = ctx_;
    g.pcSamplingData = data;
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiPCSamplingGetData(&g)));
    if (data->hardwareBufferFull != 0) hardware_buffer_full_ = true;
    for (size_t i = 0; i < data->totalNumPcs && i < max_pcs_; ++i) {
      CUpti_PCSamplingPCData& pc = data->pPcData[i];
      if (keep && samples != nullptr && pc.functionName != nullptr) {
        auto [it, fresh] = demangled.try_emplace(pc.functionName);
        if (fresh) it->second = KernelAggregator::Demangle(pc.functionName);
        for (size_t r = 0; r < pc.stallReasonCount; ++r) {
          const uint32_t index = pc.stallReason[r].pcSamplingStallReasonIndex;
          // Reason indices are CUPTI's; map through the table read at Enable.
          for (size_t k = 0; k < reason_indices_.size(); ++k) {
            if (reason_indices_[k] == index) {
              samples->Add(it->second, reason_names_[k], pc.stallReason[r].samples);
              break;
            }
          }
        }
      }
      // functionName may be shared between records (and activity records): CUPTI says free it
      // only after all processing; the handful of names is left for the process exit.
    }
    if (keep && samples != nullptr) samples->AddDropped(data->droppedSamples);
    if (data->remainingNumPcs == 0) break;
  }
  return absl::OkStatus();
}

absl::Status PcSampler::Disable(StallSamples* samples, bool keep) {
  if (!enabled_) return absl::OkStatus();
  absl::Status drained = Drain(keep, samples);
  CUpti_PCSamplingDisableParams d{CUpti_PCSamplingDisableParamsSize};
  d.ctx = ctx_;
  absl::Status s = MEDPROF_CUPTI_CALL(cuptiPCSamplingDisable(&d));
  enabled_ = false;
  return drained.ok() ? s : drained;
}

}  // namespace medprof::profiler
