#include "server/domain/compare.h"

#include <algorithm>
#include <optional>
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
#include "server/domain/codec.h"
#include "server/domain/core.h"
#include "server/domain/intervals.h"
#include "server/domain/query_engine.h"

namespace medprof::server {

bool CellKey::operator<(const CellKey& o) const {
  return std::tie(study, gpu, phase, preset, model) < std::tie(o.study, o.gpu, o.phase, o.preset, o.model);
}

namespace {


using KernelKey = std::pair<std::string, std::string>;  // (kernel name, op)

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

// ---------------------------------------------------------------- validate

// run_ids: at most limits::kMaxRunFilter well-formed ids; study_id required without them.
absl::Status CheckRunFilter(const CompareRequest& r) {
  if (r.run_ids.empty() || !r.study_id.empty()) MEDPROF_RETURN_IF_ERROR(RequireId(r.study_id, "study_id"));
  if (r.run_ids.size() > static_cast<size_t>(limits::kMaxRunFilter)) {
    return absl::InvalidArgumentError(
        absl::StrCat("run_ids: ", r.run_ids.size(), " runs (allowed at most ", limits::kMaxRunFilter, ")"));
  }
  for (size_t i = 0; i < r.run_ids.size(); ++i) {
    MEDPROF_RETURN_IF_ERROR(RequireId(r.run_ids[i], absl::StrCat("run_ids[", i, "]").c_str()));
  }
  return absl::OkStatus();
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

// baseline_preset, baseline_gpu, phase, top_categories, top_kernels.
absl::Status CheckOptions(const CompareRequest& r, const std::string& baseline) {
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
  return absl::OkStatus();
}

// ---------------------------------------------------------------- load runs

absl::StatusOr<std::vector<RunRecord>> RunsOfStudies(StoreTx& tx, const std::vector<std::string>& studies) {
  std::vector<RunRecord> runs;
  for (const std::string& study_id : studies) {
    RunFilter f;
    f.study_id = study_id;
    f.state = RunState::kSucceeded;
    f.limit = limits::kMaxRunsCompared;
    MEDPROF_ASSIGN_OR_RETURN(std::vector<RunRecord> some, tx.ListRuns(f));
    runs.insert(runs.end(), std::make_move_iterator(some.begin()), std::make_move_iterator(some.end()));
  }
  return runs;
}

absl::StatusOr<std::vector<RunRecord>> RunsOfFilter(StoreTx& tx, const CompareRequest& r) {
  std::vector<RunRecord> runs;
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
  return runs;
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

// One compared run's rows.
struct RunRows {
  std::string gpu;
  std::map<int, std::vector<double>> step_ms;  // phase -> its measured steps, ms
  std::vector<KernelRow> kernels;
  std::vector<OpRow> ops;  // read only for a run without kernel rows
  std::vector<MetricRow> metrics;
  std::vector<FindingRow> findings;
  std::map<KernelKey, double> priority;     // the run's largest finding priority per (kernel, op)
  std::optional<std::vector<LayerRow>> layers;  // none without a run summary
  roofline::Roofs roofs;                        // from the run's Environment.ceilings
};

// The run's steps in the compared phase(s); none when it has no step there.
absl::StatusOr<std::map<int, std::vector<double>>> StepsByPhase(StoreTx& tx, const std::string& run_id,
                                                                v1::Phase wanted) {
  MEDPROF_ASSIGN_OR_RETURN(std::vector<StepRow> steps, tx.ListSteps(run_id));
  std::map<int, std::vector<double>> by_phase;
  for (const StepRow& s : steps) {
    const int phase = s.phase == v1::PHASE_UNSPECIFIED ? v1::PHASE_TRAIN : s.phase;
    if (wanted != v1::PHASE_UNSPECIFIED && phase != wanted) continue;
    by_phase[phase].push_back(static_cast<double>(s.wall_ns) / 1e6);
  }
  return by_phase;
}

absl::Status ReadRunRows(StoreTx& tx, const RunRecord& run, RunRows& rows) {
  MEDPROF_ASSIGN_OR_RETURN(rows.kernels, tx.ListKernelTimes(run.run_id));
  // Op self times matter only for a cell without any kernel row: read them only for runs
  // without kernels (a cell mixing both reports kernel time).
  if (rows.kernels.empty()) {
    MEDPROF_ASSIGN_OR_RETURN(rows.ops, tx.ListOps(run.run_id));
  }
  MEDPROF_ASSIGN_OR_RETURN(rows.metrics, tx.ListMetrics(run.run_id));
  MEDPROF_ASSIGN_OR_RETURN(rows.findings, tx.ListFindings(run.run_id));
  if (!run.summary_json.empty()) {
    MEDPROF_ASSIGN_OR_RETURN(rows.layers, SummaryLayers(run.summary_json, run.run_id));
  }
  if (!run.environment_json.empty()) {
    v1::Environment env;
    MEDPROF_RETURN_IF_ERROR(FromJson(run.environment_json, &env, absl::StrCat("environment of run ", run.run_id)));
    rows.roofs = roofline::RoofsOf(env.ceilings());
  }
  rows.gpu = run.gpu_name;
  if (rows.gpu.empty()) rows.gpu = run.backend == "cpu" ? "cpu" : "unknown";
  // Findings without an op match by name (AddFindings).
  for (const FindingRow& f : rows.findings) {
    double& p = rows.priority[{f.kernel, f.op}];
    p = std::max(p, f.priority);
  }
  return absl::OkStatus();
}

// The cell's kernel of `key`, else (a finding about a kernel without a trace row, or with another
// op) the first of that name; end() when there is none.
std::map<KernelKey, KernelAcc>::iterator FindKernel(CellAcc& cell, const KernelKey& key) {
  auto it = cell.kernels.find(key);
  if (it != cell.kernels.end()) return it;
  return std::find_if(cell.kernels.begin(), cell.kernels.end(),
                      [&](const auto& e) { return e.first.first == key.first; });
}

void AddTimes(const RunRows& run, CellAcc& cell) {
  for (const KernelRow& k : run.kernels) {
    const std::string cat =
        k.category.empty() ? std::string(taxonomy::CategoryName(taxonomy::ClassifyKernel(k.name, k.op))) : k.category;
    cell.kernel_ns[cat] += static_cast<double>(k.total_ns);
    KernelAcc& ka = cell.kernels[{k.name, k.op}];
    ka.category = cat;
    ka.total_ns += k.total_ns;
    cell.kernel_total_ns += k.total_ns;
  }
  for (const OpRow& o : run.ops) {
    const std::string cat =
        o.category.empty() ? std::string(taxonomy::CategoryName(taxonomy::ClassifyOp(o.name))) : o.category;
    cell.op_ns[cat] += static_cast<double>(o.self_ns);
  }
}

// The metrics layer's coverage of each kernel aggregate (kernel:<name> coverage_pct), added to every
// (name, op) entry of that name.
void AddCoverage(const RunRows& run, CellAcc& cell) {
  constexpr std::string_view kKernelScope = "kernel:";
  for (const MetricRow& m : run.metrics) {
    if (m.name != "coverage_pct" || !m.scope.starts_with(kKernelScope)) continue;
    const std::string_view name = std::string_view(m.scope).substr(kKernelScope.size());
    for (auto& [key, ka] : cell.kernels) {
      if (key.first != name) continue;
      ka.coverage_sum += m.value;
      ++ka.coverage_runs;
    }
  }
}

void AddFindings(const RunRows& run, CellAcc& cell) {
  if (run.findings.empty()) return;
  ++cell.runs_with_findings;
  for (const auto& entry : run.priority) {
    auto it = FindKernel(cell, entry.first);
    if (it == cell.kernels.end()) it = cell.kernels.emplace(entry.first, KernelAcc{}).first;
    it->second.priority_sum += entry.second;
  }
  for (const FindingRow& f : run.findings) {
    auto it = FindKernel(cell, {f.kernel, f.op});
    if (it == cell.kernels.end()) continue;
    KernelAcc& ka = it->second;
    if (ka.category.empty()) ka.category = f.category;
    ka.speedup = std::max(ka.speedup, f.speedup);
    FindingRow& kept = ka.findings[{f.rule, f.finding}];
    if (kept.rule.empty() || f.speedup > kept.speedup) kept = f;
  }
}

void AddLayers(const RunRows& run, CellAcc& cell) {
  if (!run.layers.has_value()) {
    ++cell.missing_summaries;
    return;
  }
  for (const LayerRow& layer : *run.layers) {
    if (layer.ran) continue;
    const std::string reason = layer.reason.empty() ? "no reason given" : layer.reason;
    AddNote(cell.notes, absl::StrCat(layer.layer, " not collected: ", reason));
    if (layer.layer == "metrics") AddNote(cell.metrics_reasons, reason);
    if (layer.layer == "sampling") AddNote(cell.sampling_reasons, reason);
  }
}

// What compare keys a run's cell by, from its job: the preset and the user model.
struct JobFacts {
  std::string preset;
  std::string model_sha256;     // "" = the built-in Med-DDPM
  std::string model_file_name;
};

absl::StatusOr<JobFacts> FactsOf(const JobRecord& job) {
  v1::WorkloadConfig config;
  MEDPROF_RETURN_IF_ERROR(FromJson(job.config_json, &config, "job config"));
  return JobFacts{job.preset, config.model().sha256(), config.model().file_name()};
}

// Adds the run to the cell of each of its phases (a run with steps in several phases counts its
// kernel and op times in each).
void AddRun(const RunRows& run, int study, const JobFacts& job, CompareRows& rows) {
  for (const auto& [phase, ms] : run.step_ms) {
    CellAcc& cell = rows.cells[CellKey{study, run.gpu, phase, job.preset, job.model_sha256}];
    cell.model_file_name = job.model_file_name;
    ++cell.n;
    cell.step_ms.insert(cell.step_ms.end(), ms.begin(), ms.end());
    cell.run_steps.push_back(ms);
    AddTimes(run, cell);
    AddCoverage(run, cell);
    AddFindings(run, cell);
    cell.run_metrics.push_back(ExtractRunMetrics(run.metrics, run.kernels, phase, static_cast<int>(ms.size()), run.roofs));
    AddLayers(run, cell);
  }
}

// ---------------------------------------------------------------- build cells

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
  return absl::StrCat(key.gpu, "|", key.phase, "|", key.preset, key.study > 0 ? absl::StrCat("|", key.study) : "",
                      key.model.empty() ? "" : absl::StrCat("|", key.model));
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

// Per cell, what the others are measured against: the median and its bootstrap replicates, and
// the metrics (ratios need the baseline cell's values).
struct CellStats {
  std::map<CellKey, double> medians;
  std::map<CellKey, std::vector<double>> replicates;
  std::map<CellKey, CellMetrics> metrics;
};

CellMetrics MetricsOf(const CellAcc& acc) {
  CellMetrics m;
  std::vector<double> cycles, inst;
  std::map<std::string, std::vector<double>> pct;
  std::vector<double> roof, memory, compute, latency;
  for (const RunMetrics& rm : acc.run_metrics) {
    if (rm.roofline.has_value()) {
      const auto share = [&](roofline::Bound b) {
        auto it = rm.roofline->share.find(b);
        return it == rm.roofline->share.end() ? 0.0 : it->second;
      };
      roof.push_back(rm.roofline->pct_of_roof);
      memory.push_back(share(roofline::Bound::kMemory));
      compute.push_back(share(roofline::Bound::kCompute));
      latency.push_back(share(roofline::Bound::kLatency));
    }
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
  m.roof_pct = MeanOf(roof);
  m.memory_bound_share = MeanOf(memory);
  m.compute_bound_share = MeanOf(compute);
  m.latency_bound_share = MeanOf(latency);
  m.collected = m.sm_cycles || m.warp_instructions || m.tensor_pipe_pct || m.fma_pipe_pct ||
                m.achieved_occupancy_pct || m.l1_hit_pct || m.l2_hit_pct || m.dram_throughput_pct || m.roof_pct;
  if (!m.collected) {
    m.source.clear();
    m.not_collected =
        absl::StrCat("metrics not collected: ", Joined(acc.metrics_reasons, "no metric values stored for these runs"));
  }
  return m;
}

CellStats StatsOf(const std::map<CellKey, CellAcc>& cells) {
  CellStats s;
  for (const auto& [key, acc] : cells) {
    s.medians[key] = Quantile(acc.step_ms, 0.5);
    s.replicates[key] = BootstrapMedians(acc.run_steps, SeedOf(CellSeedKey(key)));
    s.metrics[key] = MetricsOf(acc);
  }
  return s;
}

// n, steps, the median with its quantiles and interval.
void SetStepTimes(const CellKey& key, const CellAcc& acc, const CellStats& stats, CompareCell& c) {
  c.gpu = key.gpu;
  c.preset = key.preset;
  c.model_sha256 = key.model;
  c.model_file_name = acc.model_file_name;
  c.phase = static_cast<v1::Phase>(key.phase);
  c.n = acc.n;
  c.steps = static_cast<int>(acc.step_ms.size());
  c.step_ms_median = stats.medians.at(key);
  c.step_ms_p10 = Quantile(acc.step_ms, 0.1);
  c.step_ms_p90 = Quantile(acc.step_ms, 0.9);
  const Interval ci = PercentileInterval(stats.replicates.at(key));
  c.step_ms_ci_lo = ci.lo;
  c.step_ms_ci_hi = ci.hi;
  c.interval_method = acc.n > 1 ? "runs, then steps" : "steps of 1 run";
}

// Cross-study: first study's median / this median for the same GPU, phase and preset, with its
// interval; nothing for the first study's own cells.
void SetStudySpeedup(const CellKey& key, const CellStats& stats, CompareCell& c, std::vector<std::string>& notes) {
  if (key.study == 0) return;
  const CellKey first{0, key.gpu, key.phase, key.preset, key.model};
  auto m = stats.medians.find(first);
  const double here = stats.medians.at(key);
  if (m == stats.medians.end() || here <= 0) {
    AddNote(notes, "no cell of the first study with this GPU, preset and phase: no cross-study speedup");
    return;
  }
  c.has_study_baseline = true;
  c.speedup_vs_first_study = m->second / here;
  c.speedup_study_ci = SpeedupCi(stats.replicates.at(first), stats.replicates.at(key));
}

// Speedup vs the baseline preset on the same GPU, and vs the baseline GPU at the same preset.
void SetBaselines(const CellKey& key, const std::string& baseline, const std::string& baseline_gpu,
                  const CellStats& stats, CompareCell& c, std::vector<std::string>& notes) {
  const CellKey base_key{key.study, key.gpu, key.phase, baseline, key.model};
  auto base = stats.medians.find(base_key);
  if (base != stats.medians.end() && c.step_ms_median > 0) {
    c.has_baseline = true;
    c.speedup_vs_baseline = base->second / c.step_ms_median;
    if (key.preset != baseline) c.speedup_ci = SpeedupCi(stats.replicates.at(base_key), stats.replicates.at(key));
  } else {
    AddNote(notes, absl::StrCat("no ", baseline, " cell on this GPU and phase: no speedup"));
  }
  if (baseline_gpu.empty()) return;
  const CellKey gbase_key{key.study, baseline_gpu, key.phase, key.preset, key.model};
  auto gbase = stats.medians.find(gbase_key);
  if (gbase != stats.medians.end() && c.step_ms_median > 0) {
    c.has_gpu_baseline = true;
    c.speedup_vs_baseline_gpu = gbase->second / c.step_ms_median;
    if (key.gpu != baseline_gpu) c.speedup_gpu_ci = SpeedupCi(stats.replicates.at(gbase_key), stats.replicates.at(key));
  } else {
    AddNote(notes, absl::StrCat("no ", baseline_gpu, " cell with this preset and phase: no cross-GPU speedup"));
  }
}

// Shares of time by category, from kernel times when the cell has any, else op self times.
void SetCategories(const CellAcc& acc, size_t top, CompareCell& c, std::vector<std::string>& notes) {
  const bool kernels = !acc.kernel_ns.empty();
  const auto& times = kernels ? acc.kernel_ns : acc.op_ns;
  double total = 0;
  for (const auto& [cat, ns] : times) total += ns;
  if (total <= 0) {
    AddNote(notes, "no kernel or op times recorded");
    return;
  }
  c.time_source = kernels ? "kernels" : "ops";
  for (const auto& [cat, ns] : times) c.categories.emplace_back(cat, ns / total);
  std::stable_sort(c.categories.begin(), c.categories.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (c.categories.size() > top) c.categories.resize(top);
}

// The cell's metrics with their ratios to the baseline preset's cell.
void SetMetrics(const CellKey& key, const std::string& baseline, const CellStats& stats, CompareCell& c) {
  c.metrics = stats.metrics.at(key);
  if (!c.metrics.collected) return;
  auto bm = stats.metrics.find(CellKey{key.study, key.gpu, key.phase, baseline, key.model});
  if (bm == stats.metrics.end()) return;
  const CellMetrics& b = bm->second;
  if (c.metrics.sm_cycles && b.sm_cycles && *b.sm_cycles > 0) {
    c.metrics.sm_cycles_ratio = *c.metrics.sm_cycles / *b.sm_cycles;
  }
  if (c.metrics.warp_instructions && b.warp_instructions && *b.warp_instructions > 0) {
    c.metrics.warp_instructions_ratio = *c.metrics.warp_instructions / *b.warp_instructions;
  }
}

// Stalls: mean over the runs that have them, from the first run's source.
void SetStalls(const CellAcc& acc, CompareCell& c) {
  std::map<std::string, std::vector<double>> stall_values;
  int stall_runs = 0;
  for (const RunMetrics& rm : acc.run_metrics) {
    if (rm.stalls.empty()) continue;
    if (c.stalls.source.empty()) c.stalls.source = rm.stall_source;
    if (rm.stall_source != c.stalls.source) continue;
    ++stall_runs;
    for (const auto& [reason, v] : rm.stalls) stall_values[reason].push_back(v);
  }
  if (stall_runs == 0) {
    std::vector<std::string> reasons;
    for (const std::string& s : acc.sampling_reasons) reasons.push_back(absl::StrCat("sampling: ", s));
    for (const std::string& s : acc.metrics_reasons) reasons.push_back(absl::StrCat("metrics: ", s));
    c.stalls.not_collected =
        absl::StrCat("stalls not collected: ", Joined(reasons, "no stall values stored for these runs"));
    return;
  }
  c.stalls.collected = true;
  for (const auto& [reason, v] : stall_values) {
    double s = 0;
    for (double x : v) s += x;
    c.stalls.shares.emplace_back(reason, s / stall_runs);  // a run without the reason counts 0
  }
  std::stable_sort(c.stalls.shares.begin(), c.stalls.shares.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
}

// The top kernels by priority (then time), with their findings largest speedup first.
void RankKernels(const CellAcc& acc, size_t top_kernels, CompareCell& c) {
  std::vector<TopKernel> ranked;
  for (const auto& [key, ka] : acc.kernels) {
    TopKernel t;
    t.name = key.first;
    t.op = key.second;
    t.category = ka.category;
    t.total_ns = ka.total_ns;
    t.share = acc.kernel_total_ns > 0 ? static_cast<double>(ka.total_ns) / static_cast<double>(acc.kernel_total_ns)
                                      : 0;
    t.priority = acc.n > 0 ? ka.priority_sum / acc.n : 0;
    t.speedup = ka.speedup;
    if (ka.coverage_runs > 0) t.coverage_pct = ka.coverage_sum / ka.coverage_runs;
    for (const auto& [fk, f] : ka.findings) t.findings.push_back(f);
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
    c.findings_note =
        absl::StrCat("findings not collected: ", Joined(acc.metrics_reasons, "no findings stored for these runs"));
  }
}

CompareCell BuildCell(const CompareSpec& spec, const std::string& baseline_gpu, const CellKey& key, CellAcc& acc,
                      const CellStats& stats) {
  CompareCell c;
  if (spec.studies.size() > 1) {
    c.study_id = spec.studies[static_cast<size_t>(key.study)];
    SetStudySpeedup(key, stats, c, acc.notes);
  }
  SetStepTimes(key, acc, stats, c);
  AddSampleNotes(acc.n, c.steps, acc.notes);
  SetBaselines(key, spec.baseline, baseline_gpu, stats, c, acc.notes);
  SetCategories(acc, spec.top_categories, c, acc.notes);
  SetMetrics(key, spec.baseline, stats, c);
  SetStalls(acc, c);
  RankKernels(acc, spec.top_kernels, c);
  if (acc.missing_summaries > 0) {
    AddNote(acc.notes, absl::StrCat(acc.missing_summaries, " run(s) without a run summary"));
  }
  c.notes = acc.notes;
  return c;
}

}  // namespace

absl::StatusOr<CompareSpec> ValidateCompare(const CompareRequest& r) {
  MEDPROF_RETURN_IF_ERROR(CheckRunFilter(r));
  CompareSpec spec;
  spec.baseline = r.baseline_preset.empty() ? "baseline" : r.baseline_preset;
  MEDPROF_RETURN_IF_ERROR(CheckOptions(r, spec.baseline));
  MEDPROF_RETURN_IF_ERROR(CheckMoreStudies(r));
  spec.request = r;
  spec.studies = {r.study_id};
  spec.studies.insert(spec.studies.end(), r.more_study_ids.begin(), r.more_study_ids.end());
  spec.top_categories = r.top_categories == 0 ? limits::kDefaultTopCategories : static_cast<size_t>(r.top_categories);
  spec.top_kernels = r.top_kernels == 0 ? limits::kDefaultTopKernels : static_cast<size_t>(r.top_kernels);
  return spec;
}

absl::StatusOr<StudyVersions> ReadStudyVersions(StoreTx& tx, const CompareSpec& spec) {
  StudyVersions versions;
  for (size_t i = 0; i < spec.studies.size(); ++i) {
    if (spec.studies[i].empty()) {  // a bare run filter
      versions.emplace_back(0, 0);
      continue;
    }
    MEDPROF_ASSIGN_OR_RETURN(std::optional<StudyRecord> study, tx.GetStudy(spec.studies[i]));
    if (!study.has_value()) {
      return absl::NotFoundError(absl::StrCat(i == 0 ? std::string("study_id") : absl::StrCat("more_study_ids[", i - 1, "]"),
                                              ": no study '", spec.studies[i], "'"));
    }
    versions.emplace_back(study->seq, study->revision);
  }
  return versions;
}

absl::StatusOr<CompareRows> LoadCompareRows(StoreTx& tx, const CompareSpec& spec) {
  const CompareRequest& r = spec.request;
  std::vector<RunRecord> runs;
  if (r.run_ids.empty()) {
    MEDPROF_ASSIGN_OR_RETURN(runs, RunsOfStudies(tx, spec.studies));
  } else {
    MEDPROF_ASSIGN_OR_RETURN(runs, RunsOfFilter(tx, r));
  }
  CompareRows rows;
  std::map<std::string, JobFacts> job_facts;
  for (const RunRecord& run : runs) {
    auto pj = job_facts.find(run.job_id);
    if (pj == job_facts.end()) {
      MEDPROF_ASSIGN_OR_RETURN(std::optional<JobRecord> job, tx.GetJob(run.job_id));
      if (!job.has_value()) continue;
      MEDPROF_ASSIGN_OR_RETURN(JobFacts facts, FactsOf(*job));
      pj = job_facts.emplace(run.job_id, std::move(facts)).first;
    }
    RunRows run_rows;
    MEDPROF_ASSIGN_OR_RETURN(run_rows.step_ms, StepsByPhase(tx, run.run_id, r.phase));
    if (run_rows.step_ms.empty()) continue;
    ++rows.runs_compared;
    MEDPROF_RETURN_IF_ERROR(ReadRunRows(tx, run, run_rows));
    const auto study = std::find(spec.studies.begin(), spec.studies.end(), run.study_id) - spec.studies.begin();
    AddRun(run_rows, study < static_cast<std::ptrdiff_t>(spec.studies.size()) ? static_cast<int>(study) : 0,
           pj->second, rows);
  }
  return rows;
}

absl::StatusOr<CompareResult> BuildCompare(const CompareSpec& spec, CompareRows& rows) {
  CompareResult out;
  out.study_id = spec.request.study_id;
  out.baseline_preset = spec.baseline;
  out.runs_compared = rows.runs_compared;
  if (spec.studies.size() > 1) out.study_ids = spec.studies;
  std::set<std::string> gpus;
  for (const auto& [key, acc] : rows.cells) gpus.insert(key.gpu);
  if (!spec.request.baseline_gpu.empty()) {
    MEDPROF_ASSIGN_OR_RETURN(out.baseline_gpu, ResolveGpu(spec.request.baseline_gpu, gpus));
  }
  const CellStats stats = StatsOf(rows.cells);
  for (auto& [key, acc] : rows.cells) out.cells.push_back(BuildCell(spec, out.baseline_gpu, key, acc, stats));
  // Cells were built in key order (study first); a stable sort keeps the studies' order within a
  // (GPU, phase, preset), so a preset's cells of several studies stand together.
  std::stable_sort(out.cells.begin(), out.cells.end(), [](const CompareCell& a, const CompareCell& b) {
    return std::forward_as_tuple(a.gpu, a.phase, PresetRank(a.preset), a.preset) <
           std::forward_as_tuple(b.gpu, b.phase, PresetRank(b.preset), b.preset);
  });
  return out;
}

}  // namespace medprof::server
