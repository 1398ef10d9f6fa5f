// Compare's steps (what compare answers is stated in query_engine.h): validate the request, read
// the compared studies' versions, load the runs' rows into cells (inside one read transaction),
// then build the result from the cells (outside it). QueryEngine::Compare strings them together
// with the CompareCache between the versions and the load.
//
// Internal to server/domain/. Pure functions of their arguments and the given StoreTx; a
// CompareRows belongs to one compare on one thread.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/domain/cell_metrics.h"
#include "server/domain/types.h"
#include "server/store/store.h"

namespace medprof::server {

// A checked CompareRequest with its defaults filled in.
struct CompareSpec {
  CompareRequest request;
  std::string baseline;              // the baseline preset
  std::vector<std::string> studies;  // study_id, then more_study_ids ("" first for a bare run filter)
  size_t top_categories = 3;
  size_t top_kernels = 5;
};

// INVALID_ARGUMENT naming the field and its allowed range for anything out of range.
absl::StatusOr<CompareSpec> ValidateCompare(const CompareRequest& request);

// (seq, revision) of each compared study, in spec.studies order: equal versions mean equal
// input to compare (studies.revision, server/store/records.h). NOT_FOUND naming the field for a
// study that does not exist.
using StudyVersions = std::vector<std::pair<int64_t, int64_t>>;
absl::StatusOr<StudyVersions> ReadStudyVersions(StoreTx& tx, const CompareSpec& spec);

struct CellKey {
  int study = 0;  // index into spec.studies (0 for one study or a run filter)
  std::string gpu;
  int phase = 0;
  std::string preset;
  // The job's user model (its SHA-256; "" = the built-in Med-DDPM): two different models are
  // never one cell, and speedups compare presets of the same model only.
  std::string model;
  bool operator<(const CellKey& o) const;
};

// One kernel (name, op) of a cell, over its runs.
struct KernelAcc {
  std::string category;
  int64_t total_ns = 0;
  double priority_sum = 0;  // per run: the largest priority among its findings
  double speedup = 0;
  std::map<std::pair<std::string, std::string>, FindingRow> findings;  // (rule, finding) -> largest speedup
  double coverage_sum = 0;  // the metrics aggregate's coverage_pct, summed over the runs that measured it
  int coverage_runs = 0;
};

// What a cell's runs contributed, before any statistic.
struct CellAcc {
  int n = 0;
  std::string model_file_name;                 // the user model's name as uploaded ("" = Med-DDPM)
  std::vector<double> step_ms;                 // pooled over the runs
  std::vector<std::vector<double>> run_steps;  // the same steps, per run (for the bootstrap)
  std::map<std::string, double> kernel_ns;     // category -> kernel time
  std::map<std::string, double> op_ns;         // category -> op self time
  std::vector<std::string> notes;
  int missing_summaries = 0;
  std::vector<RunMetrics> run_metrics;
  std::vector<std::string> metrics_reasons;   // LayerStatus reasons of the metrics layer
  std::vector<std::string> sampling_reasons;  // ... of the sampling layer
  std::map<std::pair<std::string, std::string>, KernelAcc> kernels;
  int64_t kernel_total_ns = 0;
  int runs_with_findings = 0;
};

struct CompareRows {
  std::map<CellKey, CellAcc> cells;
  int runs_compared = 0;
};

// Reads the compared runs (NOT_FOUND / INVALID_ARGUMENT / FAILED_PRECONDITION naming the run_ids
// entry that is missing, of another study, or not succeeded) and their rows, grouped into cells.
absl::StatusOr<CompareRows> LoadCompareRows(StoreTx& tx, const CompareSpec& spec);

// The comparison of the loaded cells (INVALID_ARGUMENT when baseline_gpu names no unique GPU).
absl::StatusOr<CompareResult> BuildCompare(const CompareSpec& spec, CompareRows& rows);

}  // namespace medprof::server
