#include "server/domain/query_engine.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/kernel_taxonomy.h"
#include "common/status.h"
#include "common/workload_config.h"
#include "server/domain/codec.h"

namespace medprof::server {
namespace {

constexpr int kMaxRunsCompared = 10000;

struct CellKey {
  std::string gpu;
  int phase;
  std::string preset;
  bool operator<(const CellKey& o) const {
    return std::tie(gpu, phase, preset) < std::tie(o.gpu, o.phase, o.preset);
  }
};

struct CellAcc {
  int n = 0;
  std::vector<double> step_ms;
  std::map<std::string, double> kernel_ns;
  std::map<std::string, double> op_ns;
  std::vector<std::string> notes;
  int missing_summaries = 0;
};

size_t PresetRank(const std::string& preset) {
  const auto& names = config::PresetNames();
  return static_cast<size_t>(std::find(names.begin(), names.end(), preset) - names.begin());
}

void AddNote(std::vector<std::string>& notes, const std::string& note) {
  if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
}

}  // namespace

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double h = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (h - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

absl::StatusOr<CompareResult> QueryEngine::Compare(const CallContext&, const CompareRequest& r) {
  MEDPROF_RETURN_IF_ERROR(RequireId(r.study_id, "study_id"));
  const std::string baseline = r.baseline_preset.empty() ? "baseline" : r.baseline_preset;
  if (!config::PresetFor(baseline).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("baseline_preset: unknown preset '", baseline.substr(0, 64),
                                                   "' (allowed: ", config::PresetList(), ")"));
  }
  if (!v1::Phase_IsValid(r.phase)) {
    return absl::InvalidArgumentError(absl::StrCat("phase: ", static_cast<int>(r.phase),
                                                   " is not a phase (allowed: unset|forward|train|sample)"));
  }
  if (r.top_categories < 0 || r.top_categories > 12) {
    return absl::InvalidArgumentError(absl::StrCat("top_categories: ", r.top_categories,
                                                   " is out of range (allowed 1..12; unset = 3)"));
  }
  const size_t top = r.top_categories == 0 ? 3 : static_cast<size_t>(r.top_categories);

  std::map<CellKey, CellAcc> cells;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    cells.clear();
    MEDPROF_ASSIGN_OR_RETURN(std::optional<StudyRecord> study, tx.GetStudy(r.study_id));
    if (!study.has_value()) return absl::NotFoundError(absl::StrCat("study_id: no study '", r.study_id, "'"));
    RunFilter f;
    f.study_id = r.study_id;
    f.state = RunState::kSucceeded;
    f.limit = kMaxRunsCompared;
    MEDPROF_ASSIGN_OR_RETURN(std::vector<RunRecord> runs, tx.ListRuns(f));
    for (const RunRecord& run : runs) {
      MEDPROF_ASSIGN_OR_RETURN(std::optional<JobRecord> job, tx.GetJob(run.job_id));
      if (!job.has_value()) continue;
      MEDPROF_ASSIGN_OR_RETURN(std::vector<StepRow> steps, tx.ListSteps(run.run_id));
      std::map<int, std::vector<double>> by_phase;
      for (const StepRow& s : steps) {
        const int phase = s.phase == v1::PHASE_UNSPECIFIED ? v1::PHASE_TRAIN : s.phase;
        if (r.phase != v1::PHASE_UNSPECIFIED && phase != r.phase) continue;
        by_phase[phase].push_back(static_cast<double>(s.wall_ns) / 1e6);
      }
      if (by_phase.empty()) continue;

      MEDPROF_ASSIGN_OR_RETURN(std::vector<KernelRow> kernels, tx.ListKernels(run.run_id));
      MEDPROF_ASSIGN_OR_RETURN(std::vector<OpRow> ops, tx.ListOps(run.run_id));
      std::optional<v1::RunSummary> summary;
      if (!run.summary_json.empty()) {
        v1::RunSummary s;
        MEDPROF_RETURN_IF_ERROR(FromJson(run.summary_json, &s, absl::StrCat("summary of run ", run.run_id)));
        summary = std::move(s);
      }
      std::string gpu = run.gpu_name;
      if (gpu.empty()) gpu = run.backend == "cpu" ? "cpu" : "unknown";

      for (auto& [phase, ms] : by_phase) {
        CellAcc& cell = cells[CellKey{gpu, phase, job->preset}];
        ++cell.n;
        cell.step_ms.insert(cell.step_ms.end(), ms.begin(), ms.end());
        for (const KernelRow& k : kernels) {
          const std::string cat =
              k.category.empty() ? std::string(taxonomy::CategoryName(taxonomy::ClassifyKernel(k.name, k.op)))
                                 : k.category;
          cell.kernel_ns[cat] += static_cast<double>(k.total_ns);
        }
        for (const OpRow& o : ops) {
          const std::string cat =
              o.category.empty() ? std::string(taxonomy::CategoryName(taxonomy::ClassifyOp(o.name))) : o.category;
          cell.op_ns[cat] += static_cast<double>(o.self_ns);
        }
        if (!summary.has_value()) {
          ++cell.missing_summaries;
          continue;
        }
        for (const v1::LayerStatus& layer : summary->layers()) {
          if (layer.ran()) continue;
          AddNote(cell.notes, absl::StrCat(layer.layer(), " not collected: ",
                                           layer.reason().empty() ? "no reason given" : layer.reason()));
        }
      }
    }
    return absl::OkStatus();
  }));

  CompareResult out;
  out.study_id = r.study_id;
  out.baseline_preset = baseline;
  std::map<CellKey, double> medians;
  for (auto& [key, acc] : cells) medians[key] = Quantile(acc.step_ms, 0.5);

  for (auto& [key, acc] : cells) {
    CompareCell c;
    c.gpu = key.gpu;
    c.preset = key.preset;
    c.phase = static_cast<v1::Phase>(key.phase);
    c.n = acc.n;
    c.steps = static_cast<int>(acc.step_ms.size());
    c.step_ms_median = medians[key];
    c.step_ms_p10 = Quantile(acc.step_ms, 0.1);
    c.step_ms_p90 = Quantile(acc.step_ms, 0.9);
    auto base = medians.find(CellKey{key.gpu, key.phase, baseline});
    if (base != medians.end() && c.step_ms_median > 0) {
      c.has_baseline = true;
      c.speedup_vs_baseline = base->second / c.step_ms_median;
    } else {
      AddNote(acc.notes, absl::StrCat("no ", baseline, " cell on this GPU and phase: no speedup"));
    }
    const bool kernels = !acc.kernel_ns.empty();
    const auto& times = kernels ? acc.kernel_ns : acc.op_ns;
    double total = 0;
    for (const auto& [cat, ns] : times) total += ns;
    if (total > 0) {
      c.time_source = kernels ? "kernels" : "ops";
      for (const auto& [cat, ns] : times) c.categories.emplace_back(cat, ns / total);
      std::stable_sort(c.categories.begin(), c.categories.end(),
                       [](const auto& a, const auto& b) { return a.second > b.second; });
      if (c.categories.size() > top) c.categories.resize(top);
    } else {
      AddNote(acc.notes, "no kernel or op times recorded");
    }
    if (acc.missing_summaries > 0) {
      AddNote(acc.notes, absl::StrCat(acc.missing_summaries, " run(s) without a run summary"));
    }
    c.notes = acc.notes;
    out.cells.push_back(std::move(c));
  }
  std::stable_sort(out.cells.begin(), out.cells.end(), [](const CompareCell& a, const CompareCell& b) {
    return std::forward_as_tuple(a.gpu, a.phase, PresetRank(a.preset), a.preset) <
           std::forward_as_tuple(b.gpu, b.phase, PresetRank(b.preset), b.preset);
  });
  return out;
}

}  // namespace medprof::server
