#include "server/domain/run_import.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/chip_datasheet.h"
#include "common/kernel_taxonomy.h"
#include "common/status.h"
#include "common/text_check.h"
#include "common/request_limits.h"
#include "common/workload_config.h"
#include "server/domain/codec.h"
#include "server/domain/result_rows.h"

namespace medprof::server {
namespace {

constexpr size_t kMaxSourceChars = 32;
constexpr size_t kMaxKernels = 100000;
constexpr size_t kMaxMetrics = 2000000;
constexpr size_t kMaxKernelNameChars = 4096;
constexpr size_t kMaxMetricNameChars = 256;
constexpr size_t kMaxUnitChars = 64;

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

bool IsSignatureId(std::string_view id) {
  return id.size() == 12 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Signatures: ids well formed and unique, of a kernel the request has, counts and times in range.
absl::Status CheckSignatures(const ImportRunRequest& r) {
  if (r.signatures.size() > kMaxKernels) {
    return Invalid(absl::StrCat("signatures: ", r.signatures.size(), " rows (allowed at most ", kMaxKernels, ")"));
  }
  std::set<std::string> kernels, ids;
  for (const v1::KernelStat& k : r.kernels) kernels.insert(k.name());
  for (size_t i = 0; i < r.signatures.size(); ++i) {
    const v1::KernelSignature& s = r.signatures[i];
    const std::string where = absl::StrCat("signatures[", i, "]");
    if (!IsSignatureId(s.id())) return Invalid(absl::StrCat(where, ".id: '", s.id().substr(0, 32), "' (allowed: 12 hex digits)"));
    if (!ids.insert(s.id()).second) return Invalid(absl::StrCat(where, ".id: '", s.id(), "' appears twice"));
    if (!kernels.contains(s.kernel())) {
      return Invalid(absl::StrCat(where, ".kernel: '", s.kernel().substr(0, 64), "' is not one of the request's kernels"));
    }
    if (s.op().size() > kMaxKernelNameChars || s.shapes().size() > kMaxKernelNameChars || s.phase().size() > 64) {
      return Invalid(absl::StrCat(where, ": op and shapes at most ", kMaxKernelNameChars, " characters, phase 64"));
    }
    MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(s.op(), where + ".op"));
    MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(s.shapes(), where + ".shapes"));
    MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(s.phase(), where + ".phase"));
    if (s.count() < 1 || s.total_ns() < 0 || s.min_ns() < 0 || s.max_ns() < s.min_ns() || s.grid_size() > 3 ||
        s.block_size() > 3 || s.dynamic_shared_bytes() < 0) {
      return Invalid(absl::StrCat(where, ": count >= 1, 0 <= min_ns <= max_ns, total_ns >= 0, grid and block at most "
                                         "3 values, dynamic_shared_bytes >= 0"));
    }
  }
  return absl::OkStatus();
}

bool Printable(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= 0x20 && c != 0x7f; });
}

absl::Status CheckRequest(const ImportRunRequest& r) {
  if (r.study_id.size() > 64) return Invalid("study_id: at most 64 characters");
  MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(r.study_name, "study_name"));
  MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(r.gpu, "gpu"));
  if (r.study_name.size() > limits::kMaxStudyNameChars) {
    return Invalid(absl::StrCat("study_name: ", r.study_name.size(), " characters (allowed at most ",
                                limits::kMaxStudyNameChars, ")"));
  }
  if (r.preset.empty() || !config::PresetFor(r.preset).ok()) {
    return Invalid(absl::StrCat("preset: ", r.preset.empty() ? "required" : absl::StrCat("unknown preset '", r.preset.substr(0, 64), "'"),
                                " (allowed: ", config::PresetList(), ")"));
  }
  if (r.gpu.empty() || r.gpu.size() > limits::kMaxGpuNameChars || !Printable(r.gpu) ||
      absl::StripAsciiWhitespace(r.gpu) != r.gpu) {
    return Invalid(absl::StrCat("gpu: required, 1..", limits::kMaxGpuNameChars,
                                " printable characters without leading or trailing spaces (e.g. \"NVIDIA H200\")"));
  }
  if (!v1::Phase_IsValid(r.phase)) {
    return Invalid(absl::StrCat("phase: ", static_cast<int>(r.phase), " is not a phase (allowed: forward|train|sample)"));
  }
  if (r.source.empty() || r.source.size() > kMaxSourceChars ||
      !std::all_of(r.source.begin(), r.source.end(), [](char c) {
        return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '.' || c == '-';
      })) {
    return Invalid(absl::StrCat("source: required, 1..", kMaxSourceChars, " of [a-z0-9_.-] (e.g. ncu)"));
  }
  if (r.steps < 0 || r.steps > limits::kMaxSteps) {
    return Invalid(absl::StrCat("steps: ", r.steps, " is out of range (allowed 1..", limits::kMaxSteps, "; unset = 1)"));
  }
  if (r.kernels.empty() || r.kernels.size() > kMaxKernels) {
    return Invalid(absl::StrCat("kernels: ", r.kernels.size(), " rows (allowed 1..", kMaxKernels,
                                "): an import needs the kernels' durations"));
  }
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const v1::KernelStat& k = r.kernels[i];
    const std::string where = absl::StrCat("kernels[", i, "]");
    if (k.name().empty() || k.name().size() > kMaxKernelNameChars) {
      return Invalid(absl::StrCat(where, ".name: required, at most ", kMaxKernelNameChars, " characters"));
    }
    MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(k.name(), absl::StrCat(where, ".name")));
    MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(k.op(), absl::StrCat(where, ".op")));
    if (k.count() < 1) return Invalid(absl::StrCat(where, ".count: ", k.count(), " (at least 1 launch)"));
    if (k.total_ns() < 0 || k.min_ns() < 0 || k.max_ns() < k.min_ns()) {
      return Invalid(absl::StrCat(where, ": times must be non-negative with min_ns <= max_ns (total ", k.total_ns(),
                                  ", min ", k.min_ns(), ", max ", k.max_ns(), ")"));
    }
    taxonomy::Category c;
    if (!k.category().empty() && !taxonomy::ParseCategory(k.category(), &c)) {
      return Invalid(absl::StrCat(where, ".category: unknown category '", k.category().substr(0, 32),
                                  "' (leave it empty to classify by name)"));
    }
    if (!(k.theoretical_occupancy() >= 0 && k.theoretical_occupancy() <= 1)) {
      return Invalid(absl::StrCat(where, ".theoretical_occupancy: ", k.theoretical_occupancy(), " (allowed 0..1)"));
    }
  }
  MEDPROF_RETURN_IF_ERROR(CheckSignatures(r));
  if (r.metrics.size() > kMaxMetrics) {
    return Invalid(absl::StrCat("metrics: ", r.metrics.size(), " rows (allowed at most ", kMaxMetrics, ")"));
  }
  for (size_t i = 0; i < r.metrics.size(); ++i) {
    const v1::MetricValue& m = r.metrics[i];
    const std::string where = absl::StrCat("metrics[", i, "]");
    MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(m.scope(), absl::StrCat(where, ".scope")));
    MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(m.name(), absl::StrCat(where, ".name")));
    MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(m.unit(), absl::StrCat(where, ".unit")));
    const bool scope_ok = m.scope() == "run" ||
                          (absl::StartsWith(m.scope(), "phase:") && m.scope().size() > 6 && m.scope().size() <= 64) ||
                          (absl::StartsWith(m.scope(), "kernel:") && m.scope().size() > 7 &&
                           m.scope().size() <= 7 + kMaxKernelNameChars) ||
                          (absl::StartsWith(m.scope(), "signature:") && IsSignatureId(m.scope().substr(10)));
    if (!scope_ok) {
      return Invalid(absl::StrCat(where, ".scope: '", m.scope().substr(0, 64),
                                  "' (allowed: run, phase:<name>, kernel:<kernel name>, signature:<12 hex digits>)"));
    }
    if (m.name().empty() || m.name().size() > kMaxMetricNameChars) {
      return Invalid(absl::StrCat(where, ".name: required, at most ", kMaxMetricNameChars, " characters"));
    }
    if (!std::isfinite(m.value())) return Invalid(absl::StrCat(where, ".value: not a finite number"));
    if (m.unit().size() > kMaxUnitChars) {
      return Invalid(absl::StrCat(where, ".unit: at most ", kMaxUnitChars, " characters"));
    }
  }
  return absl::OkStatus();
}

std::vector<SignatureRow> SignatureRows(const std::vector<v1::KernelSignature>& signatures, int steps) {
  std::vector<SignatureRow> rows;
  for (const v1::KernelSignature& s : signatures) rows.push_back(SignatureRowOf(s, steps));
  return rows;
}

// The profiler's sub-phase name of kernels in a step phase, for rows that do not say.
std::string SubPhase(v1::Phase phase) {
  switch (phase) {
    case v1::PHASE_FORWARD: return "fwd";
    case v1::PHASE_SAMPLE: return "sample_step";
    default: return "";
  }
}

}  // namespace

absl::StatusOr<ImportRunResult> RunImporter::Import(const CallContext& ctx, const ImportRunRequest& r) {
  MEDPROF_RETURN_IF_ERROR(CheckRequest(r));
  const v1::Phase phase = r.phase == v1::PHASE_UNSPECIFIED ? v1::PHASE_TRAIN : r.phase;
  const int steps = r.steps == 0 ? 1 : r.steps;
  const int64_t now = core_.clock.NowUnixMs();

  std::vector<KernelRow> kernels;
  kernels.reserve(r.kernels.size());
  int64_t total_ns = 0;
  for (const v1::KernelStat& k : r.kernels) {
    KernelRow row = KernelRowOf(k);
    if (row.phase.empty()) row.phase = SubPhase(phase);
    if (total_ns > INT64_MAX - row.total_ns) return Invalid("kernels: total_ns overflows");
    total_ns += row.total_ns;
    kernels.push_back(std::move(row));
  }
  if (total_ns <= 0) return Invalid("kernels: total_ns sums to 0 (the import has no kernel time to compare)");
  std::vector<MetricRow> metrics;
  metrics.reserve(r.metrics.size());
  for (const v1::MetricValue& m : r.metrics) metrics.push_back(MetricRow{m.scope(), m.name(), m.value(), m.unit()});

  const int64_t step_ns = total_ns / steps;
  std::vector<StepRow> step_rows;
  for (int i = 0; i < steps; ++i) {
    step_rows.push_back(StepRow{.phase = static_cast<int>(phase), .step = i, .wall_ns = step_ns, .device_ns = step_ns});
  }

  v1::WorkloadConfig effective;
  effective.set_preset(r.preset);
  effective.set_phase(phase);
  effective.set_steps(steps);
  v1::Environment env = r.environment;
  env.set_gpu_name(r.gpu);
  (*env.mutable_extra())["source"] = r.source;
  // An import has no measurement of the node: the datasheet's roofs where the GPU is known.
  const bool sheet = roofline::FillDatasheet(r.gpu, env.mutable_ceilings());
  if (env.ceilings().note().empty()) {
    env.mutable_ceilings()->set_note(sheet ? "imported: datasheet ceilings, not measured on the node"
                                           : absl::StrCat("imported: no ceilings (no datasheet for '", r.gpu, "')"));
  }
  v1::RunSummary summary;
  summary.set_measured_steps(steps);
  summary.set_step_ms_median(static_cast<double>(step_ns) / 1e6);
  summary.set_step_ms_mean(static_cast<double>(step_ns) / 1e6);
  summary.set_step_ms_min(static_cast<double>(step_ns) / 1e6);
  summary.set_step_ms_max(static_cast<double>(step_ns) / 1e6);
  auto layer = [&](const char* name, bool ran, std::string reason) {
    v1::LayerStatus* l = summary.add_layers();
    l->set_layer(name);
    l->set_ran(ran);
    l->set_reason(std::move(reason));
  };
  layer("trace", false,
        absl::StrCat("imported from ", r.source, ": kernel durations only (step time = their sum / steps), no timeline"));
  layer("sampling", false, absl::StrCat("imported from ", r.source, ": no PC or PM sampling"));
  layer("metrics", !metrics.empty(), metrics.empty() ? absl::StrCat("imported from ", r.source, ": no metric columns") : "");

  ImportRunResult out;
  out.job_id = NewId("job");
  out.run_id = NewId("run");
  out.kernels = static_cast<int>(kernels.size());
  out.metrics = static_cast<int>(metrics.size());
  out.step_ms = static_cast<double>(step_ns) / 1e6;
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    if (r.study_id.empty()) {
      StudyRecord study;
      study.study_id = NewId("st");
      study.name = r.study_name.empty() ? absl::StrCat("imported from ", r.source) : r.study_name;
      study.project = ctx.project;
      study.created_unix_ms = now;
      MEDPROF_RETURN_IF_ERROR(tx.InsertStudy(study));
      out.study_id = study.study_id;
    } else {
      MEDPROF_ASSIGN_OR_RETURN(StudyRecord study, OpenStudy(tx, r.study_id, "import"));
      out.study_id = study.study_id;
    }
    const std::string origin = absl::StrCat("import:", r.source);
    auto [job, run] =
        NewArrivedRun(out.study_id, out.job_id, out.run_id, r.preset, origin, origin, ToJson(effective), now);
    job.state = JobState::kQueued;  // inserted as created, then moved to succeeded with its event
    MEDPROF_RETURN_IF_ERROR(tx.InsertJob(job));
    run.state = RunState::kSucceeded;
    run.finished_unix_ms = now;
    MEDPROF_RETURN_IF_ERROR(tx.InsertRun(run));
    run.effective_json = ToJson(effective);
    run.environment_json = ToJson(env);
    run.summary_json = ToJson(summary);
    run.gpu_name = r.gpu;
    run.backend = r.source;
    run.worker_started_unix_ms = now;
    MEDPROF_RETURN_IF_ERROR(tx.UpdateRunResults(run));
    MEDPROF_RETURN_IF_ERROR(tx.InsertSteps(run.run_id, step_rows));
    MEDPROF_RETURN_IF_ERROR(tx.InsertKernels(run.run_id, kernels));
    MEDPROF_RETURN_IF_ERROR(tx.InsertMetrics(run.run_id, metrics));
    MEDPROF_RETURN_IF_ERROR(tx.InsertSignatures(run.run_id, SignatureRows(r.signatures, steps)));

    job.state = JobState::kSucceeded;
    return RecordJobChange(tx, now, job, run.run_id,
                           absl::StrCat("imported from ", r.source, ": ", kernels.size(), " kernels, ", metrics.size(),
                                        " metric values on ", r.gpu));
  }));
  core_.events.Notify();
  return out;
}

}  // namespace medprof::server
