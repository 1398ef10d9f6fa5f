#include "server/domain/query_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/kernel_taxonomy.h"
#include "common/request_limits.h"
#include "common/status.h"
#include "common/workload_config.h"
#include "server/domain/cell_metrics.h"
#include "server/domain/codec.h"
#include "server/domain/intervals.h"

namespace medprof::server {
namespace {


struct CellKey {
  int study;  // index into the compared studies (0 for one study or a run filter)
  std::string gpu;
  int phase;
  std::string preset;
  bool operator<(const CellKey& o) const {
    return std::tie(study, gpu, phase, preset) < std::tie(o.study, o.gpu, o.phase, o.preset);
  }
};

// One kernel (name, op) of a cell, over its runs.
struct KernelAcc {
  std::string category;
  int64_t total_ns = 0;
  double priority_sum = 0;  // per run: the largest priority among its findings
  double speedup = 0;
  std::map<std::pair<std::string, std::string>, FindingRow> findings;  // (rule, finding) -> largest speedup
};

struct CellAcc {
  int n = 0;
  std::vector<double> step_ms;                 // pooled over the runs
  std::vector<std::vector<double>> run_steps;  // the same steps, per run (for the bootstrap)
  std::map<std::string, double> kernel_ns;
  std::map<std::string, double> op_ns;
  std::vector<std::string> notes;
  int missing_summaries = 0;
  // metrics
  std::vector<RunMetrics> run_metrics;
  std::vector<std::string> metrics_reasons;   // LayerStatus reasons of the metrics layer
  std::vector<std::string> sampling_reasons;  // ... of the sampling layer
  // kernels and findings
  std::map<std::pair<std::string, std::string>, KernelAcc> kernels;
  int64_t kernel_total_ns = 0;
  int runs_with_findings = 0;
};

size_t PresetRank(const std::string& preset) {
  const auto& names = config::PresetNames();
  return static_cast<size_t>(std::find(names.begin(), names.end(), preset) - names.begin());
}

void AddNote(std::vector<std::string>& notes, const std::string& note) {
  if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
}

std::string Joined(const std::vector<std::string>& reasons, const char* fallback) {
  return reasons.empty() ? std::string(fallback) : absl::StrJoin(reasons, "; ");
}

std::optional<double> MeanOf(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// RunSummary.layers from the summary's stored JSON (protobuf's mapping). Read with nlohmann
// rather than protobuf's JSON parser, which costs ~10x more and showed in compare's profile.
struct LayerRow {
  std::string layer;
  bool ran = false;
  std::string reason;
};

absl::StatusOr<std::vector<LayerRow>> SummaryLayers(const std::string& text, const std::string& run_id) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat("summary of run ", run_id, ": not a JSON object"));
  }
  std::vector<LayerRow> out;
  auto it = j.find("layers");
  if (it == j.end() || !it->is_array()) return out;
  for (const nlohmann::json& l : *it) {
    if (!l.is_object()) continue;
    LayerRow row;
    row.layer = l.value("layer", std::string());
    row.ran = l.value("ran", false);
    row.reason = l.value("reason", std::string());
    out.push_back(std::move(row));
  }
  return out;
}

// Reports the query's wall time to the metrics sink when it goes out of scope.
class QueryTimer {
 public:
  QueryTimer(DomainCore& core, const char* name)
      : core_(core), name_(name), start_(std::chrono::steady_clock::now()) {}
  ~QueryTimer() {
    if (MetricsSink* sink = core_.metrics.load(); sink != nullptr) {
      sink->QueryServed(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }
  }

 private:
  DomainCore& core_;
  const char* name_;
  std::chrono::steady_clock::time_point start_;
};

// Finds the GPU `wanted` names among `gpus`: exact, else the one containing it (case-insensitive).
absl::StatusOr<std::string> ResolveGpu(const std::string& wanted, const std::set<std::string>& gpus) {
  if (gpus.count(wanted)) return wanted;
  const std::string w = absl::AsciiStrToLower(wanted);
  std::vector<std::string> hits;
  for (const std::string& g : gpus) {
    if (absl::StrContains(absl::AsciiStrToLower(g), w)) hits.push_back(g);
  }
  if (hits.size() == 1) return hits[0];
  const std::string known = gpus.empty() ? "none" : absl::StrJoin(gpus, ", ");
  if (hits.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("baseline_gpu: '", wanted.substr(0, 64),
                                                   "' matches no GPU of the compared runs (GPUs: ", known, ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat("baseline_gpu: '", wanted.substr(0, 64), "' matches several GPUs (",
                                                 absl::StrJoin(hits, ", "), "): give the full name"));
}

// The cell's seed key: the same cell draws the same resamples in every query.
std::string CellSeedKey(const CellKey& key) {
  return absl::StrCat(key.gpu, "|", key.phase, "|", key.preset, key.study > 0 ? absl::StrCat("|", key.study) : "");
}

// The further studies of a cross-study compare: 0..7 distinct ids, none equal to study_id, not
// with a run filter.
absl::Status CheckMoreStudies(const CompareRequest& r) {
  if (r.more_study_ids.empty()) return absl::OkStatus();
  if (r.more_study_ids.size() + 1 > static_cast<size_t>(limits::kMaxComparedStudies)) {
    return absl::InvalidArgumentError(absl::StrCat("more_study_ids: ", r.more_study_ids.size(),
                                                   " studies (allowed at most ", limits::kMaxComparedStudies - 1, ")"));
  }
  if (!r.run_ids.empty()) {
    return absl::InvalidArgumentError("more_study_ids: not together with run_ids (compare studies or runs)");
  }
  std::set<std::string> seen = {r.study_id};
  for (size_t i = 0; i < r.more_study_ids.size(); ++i) {
    const std::string field = absl::StrCat("more_study_ids[", i, "]");
    MEDPROF_RETURN_IF_ERROR(RequireId(r.more_study_ids[i], field.c_str()));
    if (!seen.insert(r.more_study_ids[i]).second) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": study ", r.more_study_ids[i], " is given twice"));
    }
  }
  return absl::OkStatus();
}

// Fewer than 3 runs or 5 steps: the interval exists but should not be trusted far.
void AddSampleNotes(int runs, int steps, std::vector<std::string>& notes) {
  if (runs < 3) {
    AddNote(notes, absl::StrCat(runs, runs == 1 ? " run" : " runs",
                                " (< 3): the interval misses run-to-run variation; submit --repeats 3 or more"));
  }
  if (steps < 5) {
    AddNote(notes, absl::StrCat(steps, steps == 1 ? " measured step" : " measured steps",
                                " (< 5): too few for a usable interval; use --steps 5 or more"));
  }
}

// base / cell from the two cells' bootstrap replicates; significant when 1.0 lies outside.
SpeedupInterval SpeedupCi(const std::vector<double>& base, const std::vector<double>& cell) {
  const Interval i = PercentileInterval(RatioReplicates(base, cell));
  return SpeedupInterval{i.lo, i.hi, !i.Contains(1.0)};
}

// Cross-study: first study's median / this median for the same GPU, phase and preset, with its
// interval; nothing for the first study's own cells.
void SetStudySpeedup(const CellKey& key, const std::map<CellKey, double>& medians,
                     const std::map<CellKey, std::vector<double>>& replicates, CompareCell& c,
                     std::vector<std::string>& notes) {
  if (key.study == 0) return;
  const CellKey first{0, key.gpu, key.phase, key.preset};
  auto m = medians.find(first);
  const double here = medians.at(key);
  if (m == medians.end() || here <= 0) {
    AddNote(notes, "no cell of the first study with this GPU, preset and phase: no cross-study speedup");
    return;
  }
  c.has_study_baseline = true;
  c.speedup_vs_first_study = m->second / here;
  c.speedup_study_ci = SpeedupCi(replicates.at(first), replicates.at(key));
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
  QueryTimer timer(core_, "compare");
  return DoCompare(r);
}

absl::StatusOr<CompareResult> QueryEngine::DoCompare(const CompareRequest& r) {
  if (r.run_ids.empty() || !r.study_id.empty()) MEDPROF_RETURN_IF_ERROR(RequireId(r.study_id, "study_id"));
  if (r.run_ids.size() > static_cast<size_t>(limits::kMaxRunFilter)) {
    return absl::InvalidArgumentError(
        absl::StrCat("run_ids: ", r.run_ids.size(), " runs (allowed at most ", limits::kMaxRunFilter, ")"));
  }
  for (size_t i = 0; i < r.run_ids.size(); ++i) {
    MEDPROF_RETURN_IF_ERROR(RequireId(r.run_ids[i], absl::StrCat("run_ids[", i, "]").c_str()));
  }
  const std::string baseline = r.baseline_preset.empty() ? "baseline" : r.baseline_preset;
  if (!config::PresetFor(baseline).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("baseline_preset: unknown preset '", baseline.substr(0, 64),
                                                   "' (allowed: ", config::PresetList(), ")"));
  }
  if (r.baseline_gpu.size() > 256) {
    return absl::InvalidArgumentError("baseline_gpu: at most 256 characters");
  }
  if (!v1::Phase_IsValid(r.phase)) {
    return absl::InvalidArgumentError(absl::StrCat("phase: ", static_cast<int>(r.phase),
                                                   " is not a phase (allowed: unset|forward|train|sample)"));
  }
  if (r.top_categories < 0 || r.top_categories > limits::kMaxTopCategories) {
    return absl::InvalidArgumentError(absl::StrCat("top_categories: ", r.top_categories,
                                                   " is out of range (allowed 1..", limits::kMaxTopCategories,
                                                   "; unset = ", limits::kDefaultTopCategories, ")"));
  }
  if (r.top_kernels < 0 || r.top_kernels > limits::kMaxTopKernels) {
    return absl::InvalidArgumentError(absl::StrCat("top_kernels: ", r.top_kernels, " is out of range (allowed 1..",
                                                   limits::kMaxTopKernels, "; unset = ", limits::kDefaultTopKernels, ")"));
  }
  MEDPROF_RETURN_IF_ERROR(CheckMoreStudies(r));
  std::vector<std::string> studies = {r.study_id};
  studies.insert(studies.end(), r.more_study_ids.begin(), r.more_study_ids.end());
  const size_t top = r.top_categories == 0 ? limits::kDefaultTopCategories : static_cast<size_t>(r.top_categories);
  const size_t top_kernels = r.top_kernels == 0 ? limits::kDefaultTopKernels : static_cast<size_t>(r.top_kernels);

  std::map<CellKey, CellAcc> cells;
  int runs_compared = 0;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    cells.clear();
    runs_compared = 0;
    for (size_t i = 0; i < studies.size(); ++i) {
      if (studies[i].empty()) continue;
      MEDPROF_ASSIGN_OR_RETURN(std::optional<StudyRecord> study, tx.GetStudy(studies[i]));
      if (!study.has_value()) {
        return absl::NotFoundError(absl::StrCat(i == 0 ? std::string("study_id") : absl::StrCat("more_study_ids[", i - 1, "]"),
                                                ": no study '", studies[i], "'"));
      }
    }
    std::vector<RunRecord> runs;
    if (r.run_ids.empty()) {
      for (const std::string& study_id : studies) {
        RunFilter f;
        f.study_id = study_id;
        f.state = RunState::kSucceeded;
        f.limit = limits::kMaxRunsCompared;
        MEDPROF_ASSIGN_OR_RETURN(std::vector<RunRecord> some, tx.ListRuns(f));
        runs.insert(runs.end(), std::make_move_iterator(some.begin()), std::make_move_iterator(some.end()));
      }
    } else {
      std::set<std::string> seen;
      for (size_t i = 0; i < r.run_ids.size(); ++i) {
        if (!seen.insert(r.run_ids[i]).second) continue;
        MEDPROF_ASSIGN_OR_RETURN(std::optional<RunRecord> run, tx.GetRun(r.run_ids[i]));
        if (!run.has_value()) {
          return absl::NotFoundError(absl::StrCat("run_ids[", i, "]: no run '", r.run_ids[i], "'"));
        }
        if (!r.study_id.empty() && run->study_id != r.study_id) {
          return absl::InvalidArgumentError(absl::StrCat("run_ids[", i, "]: run ", run->run_id, " belongs to study ",
                                                         run->study_id, ", not ", r.study_id));
        }
        if (run->state != RunState::kSucceeded) {
          return absl::FailedPreconditionError(absl::StrCat("run_ids[", i, "]: run ", run->run_id, " is ",
                                                            RunStateName(run->state),
                                                            " (only succeeded runs are compared)"));
        }
        runs.push_back(*std::move(run));
      }
    }
    std::map<std::string, std::string> preset_of_job;
    for (const RunRecord& run : runs) {
      auto pj = preset_of_job.find(run.job_id);
      if (pj == preset_of_job.end()) {
        MEDPROF_ASSIGN_OR_RETURN(std::optional<JobRecord> job, tx.GetJob(run.job_id));
        if (!job.has_value()) continue;
        pj = preset_of_job.emplace(run.job_id, job->preset).first;
      }
      const std::string& preset = pj->second;
      MEDPROF_ASSIGN_OR_RETURN(std::vector<StepRow> steps, tx.ListSteps(run.run_id));
      std::map<int, std::vector<double>> by_phase;
      for (const StepRow& s : steps) {
        const int phase = s.phase == v1::PHASE_UNSPECIFIED ? v1::PHASE_TRAIN : s.phase;
        if (r.phase != v1::PHASE_UNSPECIFIED && phase != r.phase) continue;
        by_phase[phase].push_back(static_cast<double>(s.wall_ns) / 1e6);
      }
      if (by_phase.empty()) continue;
      ++runs_compared;

      MEDPROF_ASSIGN_OR_RETURN(std::vector<KernelRow> kernels, tx.ListKernelTimes(run.run_id));
      // Op self times matter only for a cell without any kernel row: read them only for runs
      // without kernels (a cell mixing both reports kernel time).
      std::vector<OpRow> ops;
      if (kernels.empty()) {
        MEDPROF_ASSIGN_OR_RETURN(ops, tx.ListOps(run.run_id));
      }
      MEDPROF_ASSIGN_OR_RETURN(std::vector<MetricRow> metrics, tx.ListMetrics(run.run_id));
      MEDPROF_ASSIGN_OR_RETURN(std::vector<FindingRow> findings, tx.ListFindings(run.run_id));
      std::optional<std::vector<LayerRow>> layers;
      if (!run.summary_json.empty()) {
        MEDPROF_ASSIGN_OR_RETURN(layers, SummaryLayers(run.summary_json, run.run_id));
      }
      std::string gpu = run.gpu_name;
      if (gpu.empty()) gpu = run.backend == "cpu" ? "cpu" : "unknown";

      // The run's largest finding priority per (kernel, op); findings without an op match by name.
      std::map<std::pair<std::string, std::string>, double> priority;
      for (const FindingRow& f : findings) {
        double& p = priority[{f.kernel, f.op}];
        p = std::max(p, f.priority);
      }

      for (auto& [phase, ms] : by_phase) {
        const int study = static_cast<int>(std::find(studies.begin(), studies.end(), run.study_id) - studies.begin());
        CellAcc& cell = cells[CellKey{study < static_cast<int>(studies.size()) ? study : 0, gpu, phase, preset}];
        ++cell.n;
        cell.step_ms.insert(cell.step_ms.end(), ms.begin(), ms.end());
        cell.run_steps.push_back(ms);
        for (const KernelRow& k : kernels) {
          const std::string cat =
              k.category.empty() ? std::string(taxonomy::CategoryName(taxonomy::ClassifyKernel(k.name, k.op)))
                                 : k.category;
          cell.kernel_ns[cat] += static_cast<double>(k.total_ns);
          KernelAcc& ka = cell.kernels[{k.name, k.op}];
          ka.category = cat;
          ka.total_ns += k.total_ns;
          cell.kernel_total_ns += k.total_ns;
        }
        for (const OpRow& o : ops) {
          const std::string cat =
              o.category.empty() ? std::string(taxonomy::CategoryName(taxonomy::ClassifyOp(o.name))) : o.category;
          cell.op_ns[cat] += static_cast<double>(o.self_ns);
        }
        if (!findings.empty()) {
          ++cell.runs_with_findings;
          for (const auto& entry : priority) {
            // Named, not a structured binding: clang 14 (the fuzz build) cannot capture those.
            const auto& key = entry.first;
            const auto& p = entry.second;
            auto it = cell.kernels.find(key);
            if (it == cell.kernels.end()) {
              // A finding about a kernel without a trace row (or with another op): match by name.
              it = std::find_if(cell.kernels.begin(), cell.kernels.end(),
                                [&](const auto& e) { return e.first.first == key.first; });
            }
            if (it == cell.kernels.end()) it = cell.kernels.emplace(key, KernelAcc{}).first;
            it->second.priority_sum += p;
          }
          for (const FindingRow& f : findings) {
            auto it = cell.kernels.find({f.kernel, f.op});
            if (it == cell.kernels.end()) {
              it = std::find_if(cell.kernels.begin(), cell.kernels.end(),
                                [&](const auto& e) { return e.first.first == f.kernel; });
            }
            if (it == cell.kernels.end()) continue;
            KernelAcc& ka = it->second;
            if (ka.category.empty()) ka.category = f.category;
            ka.speedup = std::max(ka.speedup, f.speedup);
            FindingRow& kept = ka.findings[{f.rule, f.finding}];
            if (kept.rule.empty() || f.speedup > kept.speedup) kept = f;
          }
        }
        cell.run_metrics.push_back(ExtractRunMetrics(metrics, kernels, phase, static_cast<int>(ms.size())));
        if (!layers.has_value()) {
          ++cell.missing_summaries;
          continue;
        }
        for (const LayerRow& layer : *layers) {
          if (layer.ran) continue;
          const std::string reason = layer.reason.empty() ? "no reason given" : layer.reason;
          AddNote(cell.notes, absl::StrCat(layer.layer, " not collected: ", reason));
          if (layer.layer == "metrics") AddNote(cell.metrics_reasons, reason);
          if (layer.layer == "sampling") AddNote(cell.sampling_reasons, reason);
        }
      }
    }
    return absl::OkStatus();
  }));

  CompareResult out;
  out.study_id = r.study_id;
  out.baseline_preset = baseline;
  out.runs_compared = runs_compared;
  if (studies.size() > 1) out.study_ids = studies;
  std::set<std::string> gpus;
  for (const auto& [key, acc] : cells) gpus.insert(key.gpu);
  if (!r.baseline_gpu.empty()) {
    MEDPROF_ASSIGN_OR_RETURN(out.baseline_gpu, ResolveGpu(r.baseline_gpu, gpus));
  }

  std::map<CellKey, double> medians;
  std::map<CellKey, std::vector<double>> replicates;
  for (auto& [key, acc] : cells) {
    medians[key] = Quantile(acc.step_ms, 0.5);
    replicates[key] = BootstrapMedians(acc.run_steps, SeedOf(CellSeedKey(key)));
  }

  // Metrics first (ratios need the baseline cell's values).
  std::map<CellKey, CellMetrics> metrics;
  for (auto& [key, acc] : cells) {
    CellMetrics m;
    std::vector<double> cycles, inst;
    std::map<std::string, std::vector<double>> pct;
    for (const RunMetrics& rm : acc.run_metrics) {
      if (!rm.any) continue;
      ++m.runs_with_metrics;
      if (m.source.empty()) m.source = rm.source;
      if (rm.sm_cycles) cycles.push_back(*rm.sm_cycles);
      if (rm.warp_instructions) inst.push_back(*rm.warp_instructions);
      for (const auto& [name, v] : rm.percent) pct[name].push_back(v);
    }
    m.sm_cycles = MeanOf(cycles);
    m.warp_instructions = MeanOf(inst);
    m.tensor_pipe_pct = MeanOf(pct["tensor_pipe_pct"]);
    m.fma_pipe_pct = MeanOf(pct["fma_pipe_pct"]);
    m.achieved_occupancy_pct = MeanOf(pct["achieved_occupancy_pct"]);
    m.l1_hit_pct = MeanOf(pct["l1_hit_pct"]);
    m.l2_hit_pct = MeanOf(pct["l2_hit_pct"]);
    m.dram_throughput_pct = MeanOf(pct["dram_throughput_pct"]);
    m.collected = m.sm_cycles || m.warp_instructions || m.tensor_pipe_pct || m.fma_pipe_pct ||
                  m.achieved_occupancy_pct || m.l1_hit_pct || m.l2_hit_pct || m.dram_throughput_pct;
    if (!m.collected) {
      m.source.clear();
      m.not_collected = absl::StrCat("metrics not collected: ",
                                     Joined(acc.metrics_reasons, "no metric values stored for these runs"));
    }
    metrics[key] = std::move(m);
  }

  for (auto& [key, acc] : cells) {
    CompareCell c;
    c.gpu = key.gpu;
    if (studies.size() > 1) {
      c.study_id = studies[static_cast<size_t>(key.study)];
      SetStudySpeedup(key, medians, replicates, c, acc.notes);
    }
    c.preset = key.preset;
    c.phase = static_cast<v1::Phase>(key.phase);
    c.n = acc.n;
    c.steps = static_cast<int>(acc.step_ms.size());
    c.step_ms_median = medians[key];
    c.step_ms_p10 = Quantile(acc.step_ms, 0.1);
    c.step_ms_p90 = Quantile(acc.step_ms, 0.9);
    const Interval ci = PercentileInterval(replicates[key]);
    c.step_ms_ci_lo = ci.lo;
    c.step_ms_ci_hi = ci.hi;
    c.interval_method = acc.n > 1 ? "runs, then steps" : "steps of 1 run";
    AddSampleNotes(acc.n, c.steps, acc.notes);
    const CellKey base_key{key.study, key.gpu, key.phase, baseline};
    auto base = medians.find(base_key);
    if (base != medians.end() && c.step_ms_median > 0) {
      c.has_baseline = true;
      c.speedup_vs_baseline = base->second / c.step_ms_median;
      if (key.preset != baseline) c.speedup_ci = SpeedupCi(replicates[base_key], replicates[key]);
    } else {
      AddNote(acc.notes, absl::StrCat("no ", baseline, " cell on this GPU and phase: no speedup"));
    }
    if (!out.baseline_gpu.empty()) {
      const CellKey gbase_key{key.study, out.baseline_gpu, key.phase, key.preset};
      auto gbase = medians.find(gbase_key);
      if (gbase != medians.end() && c.step_ms_median > 0) {
        c.has_gpu_baseline = true;
        c.speedup_vs_baseline_gpu = gbase->second / c.step_ms_median;
        if (key.gpu != out.baseline_gpu) c.speedup_gpu_ci = SpeedupCi(replicates[gbase_key], replicates[key]);
      } else {
        AddNote(acc.notes, absl::StrCat("no ", out.baseline_gpu, " cell with this preset and phase: no cross-GPU speedup"));
      }
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

    c.metrics = metrics[key];
    if (c.metrics.collected) {
      auto bm = metrics.find(CellKey{key.study, key.gpu, key.phase, baseline});
      if (bm != metrics.end()) {
        const CellMetrics& b = bm->second;
        if (c.metrics.sm_cycles && b.sm_cycles && *b.sm_cycles > 0) {
          c.metrics.sm_cycles_ratio = *c.metrics.sm_cycles / *b.sm_cycles;
        }
        if (c.metrics.warp_instructions && b.warp_instructions && *b.warp_instructions > 0) {
          c.metrics.warp_instructions_ratio = *c.metrics.warp_instructions / *b.warp_instructions;
        }
      }
    }

    // Stalls: mean over the runs that have them, from the first run's source.
    std::map<std::string, std::vector<double>> stall_values;
    int stall_runs = 0;
    for (const RunMetrics& rm : acc.run_metrics) {
      if (rm.stalls.empty()) continue;
      if (c.stalls.source.empty()) c.stalls.source = rm.stall_source;
      if (rm.stall_source != c.stalls.source) continue;
      ++stall_runs;
      for (const auto& [reason, v] : rm.stalls) stall_values[reason].push_back(v);
    }
    if (stall_runs > 0) {
      c.stalls.collected = true;
      for (const auto& [reason, v] : stall_values) {
        double s = 0;
        for (double x : v) s += x;
        c.stalls.shares.emplace_back(reason, s / stall_runs);  // a run without the reason counts 0
      }
      std::stable_sort(c.stalls.shares.begin(), c.stalls.shares.end(),
                       [](const auto& a, const auto& b) { return a.second > b.second; });
    } else {
      std::vector<std::string> reasons;
      for (const std::string& s : acc.sampling_reasons) reasons.push_back(absl::StrCat("sampling: ", s));
      for (const std::string& s : acc.metrics_reasons) reasons.push_back(absl::StrCat("metrics: ", s));
      c.stalls.not_collected =
          absl::StrCat("stalls not collected: ", Joined(reasons, "no stall values stored for these runs"));
    }

    // Top kernels.
    std::vector<TopKernel> ranked;
    for (auto& [key2, ka] : acc.kernels) {
      TopKernel t;
      t.name = key2.first;
      t.op = key2.second;
      t.category = ka.category;
      t.total_ns = ka.total_ns;
      t.share = acc.kernel_total_ns > 0 ? static_cast<double>(ka.total_ns) / static_cast<double>(acc.kernel_total_ns)
                                        : 0;
      t.priority = acc.n > 0 ? ka.priority_sum / acc.n : 0;
      t.speedup = ka.speedup;
      for (auto& [fk, f] : ka.findings) t.findings.push_back(f);
      std::stable_sort(t.findings.begin(), t.findings.end(),
                       [](const FindingRow& a, const FindingRow& b) { return a.speedup > b.speedup; });
      ranked.push_back(std::move(t));
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const TopKernel& a, const TopKernel& b) {
      return std::tie(a.priority, a.total_ns) > std::tie(b.priority, b.total_ns);
    });
    if (ranked.size() > top_kernels) ranked.resize(top_kernels);
    c.top_kernels = std::move(ranked);
    if (acc.runs_with_findings == 0) {
      c.findings_note = absl::StrCat("findings not collected: ",
                                     Joined(acc.metrics_reasons, "no findings stored for these runs"));
    }

    if (acc.missing_summaries > 0) {
      AddNote(acc.notes, absl::StrCat(acc.missing_summaries, " run(s) without a run summary"));
    }
    c.notes = acc.notes;
    out.cells.push_back(std::move(c));
  }
  // Cells were built in key order (study first); a stable sort keeps the studies' order within a
  // (GPU, phase, preset), so a preset's cells of several studies stand together.
  std::stable_sort(out.cells.begin(), out.cells.end(), [](const CompareCell& a, const CompareCell& b) {
    return std::forward_as_tuple(a.gpu, a.phase, PresetRank(a.preset), a.preset) <
           std::forward_as_tuple(b.gpu, b.phase, PresetRank(b.preset), b.preset);
  });
  return out;
}

}  // namespace medprof::server
