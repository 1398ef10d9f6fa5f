// `medprof report STUDY -o report.html`: one self-contained HTML file with a study's figures.
//
// CollectReport asks the server through the ordinary client calls (GetStudy, ListRuns, Compare,
// and GetRun of the succeeded runs for the rooflines and the kernel fallback below); RenderHtmlReport turns what came back into one HTML
// document that needs no network to open: CSS, a small script and the charts (inline SVG, see
// svg_chart.h) are all in the file, and a Content-Security-Policy forbids any fetch.
//
// Sections, each with a stable element id:
//   summary          study, state, jobs, baseline, when and from which server
//   compare-table    every Compare cell: n, steps, median and p10-p90 step time, speedups, notes
//   charts (data-chart names): step-time (median per GPU x phase, bars per preset, p10-p90
//     whiskers), speedup (vs the baseline preset, same GPU), gpu-speedup (vs the baseline GPU,
//     only when Compare reports one), kernel-mix (category shares, stacked per cell), stalls
//     (warp-stall shares, stacked per cell), tensor-fma (Tensor Core vs FMA pipe %), counter-ratios
//     (SM cycles and warp instructions vs the baseline preset), memory (L1 hit, L2 hit, DRAM
//     throughput %). A chart whose layer was not collected in any cell is a "not collected:
//     <reason>" panel with the reason the server gave; cells missing from a chart are listed
//     under it with their reason.
//   rooflines        one log-log roofline per GPU x preset x phase (data-chart "roofline-<n>",
//     roofline_chart.h), from the cell's first succeeded run: its kernels and phase ranges against the
//     ceilings stored with that run (measured solid, datasheet dashed); absent for a CPU-only study.
//   priority-table   top kernels per cell by priority with their findings (Compare's
//     top_kernels); from an older server without them, each succeeded run's top kernels by GPU
//     time from GetRun, marked "findings not collected".
//   environment-table  every run: state, GPU, compute capability, driver, CUDA, cuDNN, LibTorch,
//     CUPTI, container image, node, Slurm job and partition, site, agent.
//
// Thread-compatible: CollectReport makes blocking calls on the given client.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "medprof/v1/service.pb.h"

namespace medprof::client::report {

struct ReportOptions {
  std::string baseline_preset;   // "" = the server's default ("baseline")
  std::string baseline_gpu;      // cross-GPU speedups against this GPU (name or substring); "" = none
  v1::Phase phase = v1::PHASE_UNSPECIFIED;  // unset = every phase present
  int top_kernels = 10;          // kernels per cell in the priority table (1..50)
  int max_runs = 1000;           // runs listed (ListRuns limit, 1..10000)
  int max_run_details = 64;      // GetRun calls (rooflines and the kernel fallback)
};

// Everything the report shows, as the server answered it.
struct ReportInput {
  v1::Study study;
  std::vector<v1::Run> runs;            // ListRuns (no steps/kernels)
  std::vector<v1::Run> run_details;     // GetRun of succeeded runs with kernels: rooflines, kernel fallback
  v1::CompareResponse compare;
  std::string compare_error;            // Compare failed: every chart says so
  std::string server;                   // address the data came from
  int64_t generated_unix_ms = 0;
};

// NOT_FOUND etc. from GetStudy / ListRuns are returned as is (the CLI prints them). A failed
// Compare does not fail the report: compare_error carries its message.
absl::StatusOr<ReportInput> CollectReport(MedprofClient& client, const std::string& study_id,
                                          const ReportOptions& options, int64_t now_unix_ms);

// The whole HTML document.
std::string RenderHtmlReport(const ReportInput& input);

// The data-chart names of the figures, in page order.
const std::vector<std::string>& ChartNames();

}  // namespace medprof::client::report
