#include "agent/profiler/counter_session.h"

#include "absl/strings/str_cat.h"
#include "agent/profiler/cupti_host.h"
#include "agent/profiler/range_profiler.h"
#include "common/status.h"

namespace medprof::profiler {

// legacy_profiler.cc
absl::StatusOr<std::unique_ptr<CounterSession>> NewLegacyCounterSession(const CounterSessionOptions& options);

namespace {

// The range-profiler backend: host configuration (its own host object, which evaluates the
// counter data) plus the target object of the context.
class RangeSession final : public CounterSession {
 public:
  static absl::StatusOr<std::unique_ptr<RangeSession>> Create(const CounterSessionOptions& o) {
    std::unique_ptr<RangeSession> s(new RangeSession());
    MEDPROF_ASSIGN_OR_RETURN(s->host_,
                             CuptiHost::Create(CUPTI_PROFILER_TYPE_RANGE_PROFILER, o.chip, o.availability));
    MEDPROF_ASSIGN_OR_RETURN(s->config_, s->host_->NewConfig(o.metrics));
    MEDPROF_ASSIGN_OR_RETURN(s->target_, RangeProfilerTarget::Enable(o.ctx));
    MEDPROF_RETURN_IF_ERROR(s->target_->Configure(s->config_.get(), o.range, o.replay, o.max_ranges));
    return s;
  }
  CounterApi api() const override { return CounterApi::kRangeProfiler; }
  size_t passes() const override { return config_->passes(); }
  absl::Status Start() override { return target_->Start(); }
  absl::StatusOr<bool> Stop() override { return target_->Stop(); }
  absl::Status PushRange(const char* name) override { return target_->PushRange(name); }
  absl::Status PopRange() override { return target_->PopRange(); }
  absl::StatusOr<std::vector<RangeValues>> Decode(size_t* dropped) override {
    return target_->Decode(dropped);
  }

 private:
  RangeSession() = default;
  std::unique_ptr<CuptiHost> host_;
  std::unique_ptr<CuptiHost::Config> config_;
  std::unique_ptr<RangeProfilerTarget> target_;  // destroyed first (declared last)
};

}  // namespace

const char* CounterApiName(CounterApi api) {
  return api == CounterApi::kLegacy ? "legacy profiling API" : "range profiler";
}

CounterApi DefaultCounterApi(int cc_major, int cc_minor) {
  return cc_major * 10 + cc_minor >= 75 ? CounterApi::kRangeProfiler : CounterApi::kLegacy;
}

absl::StatusOr<std::unique_ptr<CounterSession>> NewCounterSession(CounterApi api,
                                                                  const CounterSessionOptions& options) {
  if (options.metrics.empty()) return absl::InvalidArgumentError("counter session: no metrics");
  if (options.max_ranges < 1 || options.max_ranges > 100000) {
    return absl::InvalidArgumentError(absl::StrCat("counter session: max_ranges ", options.max_ranges,
                                                   " is out of range (allowed 1..100000)"));
  }
  if (api == CounterApi::kLegacy) return NewLegacyCounterSession(options);
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<RangeSession> s, RangeSession::Create(options));
  return std::unique_ptr<CounterSession>(std::move(s));
}

}  // namespace medprof::profiler
