#include "client/report/report.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/format.h"
#include "client/report/roofline_chart.h"
#include "client/report/svg_chart.h"
#include "client/roofline_view.h"
#include "common/kernel_taxonomy.h"
#include "common/roofline.h"
#include "common/version.h"
#include "common/workload_config.h"

namespace medprof::client::report {
namespace {

constexpr char kDot[] = " \xC2\xB7 ";  // " · "

std::string E(const std::string& s) { return HtmlEscape(s); }

// ---------------------------------------------------------------- cells

struct CellView {
  const v1::CompareCell* cell;
  std::string gpu_phase;  // x group of per-GPU charts: "<gpu> · <phase>" (phase only when several)
  std::string label;      // one cell: "<preset> · <gpu>[ <phase>]"
};

std::vector<CellView> Cells(const v1::CompareResponse& compare) {
  std::set<int> phases;
  for (const v1::CompareCell& c : compare.cells()) phases.insert(c.phase());
  const bool many_phases = phases.size() > 1;
  std::vector<CellView> out;
  for (const v1::CompareCell& c : compare.cells()) {
    const std::string phase = config::PhaseName(c.phase());
    CellView v;
    v.cell = &c;
    v.gpu_phase = many_phases ? absl::StrCat(c.gpu(), kDot, phase) : c.gpu();
    v.label = many_phases ? absl::StrCat(c.preset(), kDot, c.gpu(), " ", phase) : absl::StrCat(c.preset(), kDot, c.gpu());
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<std::string> PresetOrder(const std::vector<CellView>& cells) {
  std::vector<std::string> out = config::PresetNames();
  for (const CellView& v : cells) {
    if (std::find(out.begin(), out.end(), v.cell->preset()) == out.end()) out.push_back(v.cell->preset());
  }
  return out;
}

// The text after "<what> not collected: " in a cell's notes, if any.
std::string NoteReason(const v1::CompareCell& c, const std::string& what) {
  const std::string key = absl::StrCat(what, " not collected: ");
  for (const std::string& n : c.notes()) {
    const size_t at = n.find(key);
    if (at != std::string::npos) return n.substr(at + key.size());
  }
  return "";
}

std::string StripNotCollected(std::string text) {
  const size_t at = text.find("not collected: ");
  if (at != std::string::npos) text = text.substr(at + 15);
  return text;
}

// Why a cell has no counter metrics.
std::string MetricsReason(const v1::CompareCell& c) {
  if (c.has_metrics() && !c.metrics().not_collected().empty()) return StripNotCollected(c.metrics().not_collected());
  if (std::string r = NoteReason(c, "metrics"); !r.empty()) return r;
  if (!c.has_metrics()) return "the server reported no metrics for this cell";
  return "no metric value in this cell";
}

std::string StallsReason(const v1::CompareCell& c) {
  if (c.has_stalls() && !c.stalls().not_collected().empty()) return StripNotCollected(c.stalls().not_collected());
  if (std::string r = NoteReason(c, "sampling"); !r.empty()) return r;
  if (std::string r = NoteReason(c, "metrics"); !r.empty()) return r;
  if (!c.has_stalls()) return "the server reported no stall breakdown for this cell";
  return "no stall value in this cell";
}

// One reason for a whole chart: the most common cell reason.
std::string CommonReason(const std::vector<std::string>& reasons) {
  std::map<std::string, int> n;
  for (const std::string& r : reasons) ++n[r];
  std::string best;
  int most = 0;
  for (const auto& [r, k] : n) {
    if (k > most) {
      best = r;
      most = k;
    }
  }
  return best;
}

// ---------------------------------------------------------------- charts

ChartSpec StepTimeChart(const std::vector<CellView>& cells) {
  ChartSpec c;
  c.id = "step-time";
  c.title = "Step time per GPU and preset (median; whiskers: its 95% interval; n = runs)";
  c.y_label = "step time (ms)";
  c.unit = "ms";
  c.series = PresetOrder(cells);
  for (const CellView& v : cells) {
    if (std::find(c.groups.begin(), c.groups.end(), v.gpu_phase) == c.groups.end()) c.groups.push_back(v.gpu_phase);
    if (v.cell->steps() <= 0) {
      c.notes.push_back(absl::StrCat(v.label, ": no measured steps"));
      continue;
    }
    const bool ci = !v.cell->interval_method().empty();
    ChartPoint p{v.gpu_phase, v.cell->preset(), v.cell->step_ms_median(),
                 ci ? std::optional<double>(v.cell->step_ms_ci_lo()) : std::nullopt,
                 ci ? std::optional<double>(v.cell->step_ms_ci_hi()) : std::nullopt,
                 absl::StrFormat("%s%s%s: median %.4g ms (95%% interval %.4g-%.4g; p10 %.4g, p90 %.4g), n=%d runs, %d steps",
                                 v.cell->preset(), kDot, v.gpu_phase, v.cell->step_ms_median(), v.cell->step_ms_ci_lo(),
                                 v.cell->step_ms_ci_hi(), v.cell->step_ms_p10(), v.cell->step_ms_p90(), v.cell->n(),
                                 v.cell->steps()),
                 absl::StrCat("n=", v.cell->n())};
    c.points.push_back(std::move(p));
  }
  if (c.points.empty()) c.not_collected = "no cell has measured steps";
  return c;
}

ChartSpec SpeedupChart(const std::vector<CellView>& cells, const std::string& baseline) {
  ChartSpec c;
  c.id = "speedup";
  c.title = absl::StrCat("Speedup vs ", baseline,
                         " on the same GPU (baseline median / median; whiskers: 95% interval; n = runs)");
  c.y_label = "speedup (x)";
  c.unit = "x";
  c.reference = 1.0;
  c.series = PresetOrder(cells);
  for (const CellView& v : cells) {
    if (std::find(c.groups.begin(), c.groups.end(), v.gpu_phase) == c.groups.end()) c.groups.push_back(v.gpu_phase);
    if (!v.cell->has_baseline()) {
      c.notes.push_back(absl::StrCat(v.label, ": no ", baseline, " cell on this GPU and phase"));
      continue;
    }
    const v1::CompareCell& cell = *v.cell;
    const bool ci = cell.has_speedup_ci();
    const std::string sig = !ci ? "" : cell.speedup_ci().significant() ? "" : " (not significant)";
    c.points.push_back({v.gpu_phase, cell.preset(), cell.speedup_vs_baseline(),
                        ci ? std::optional<double>(cell.speedup_ci().lo()) : std::nullopt,
                        ci ? std::optional<double>(cell.speedup_ci().hi()) : std::nullopt,
                        absl::StrFormat("%s%s%s: %.2fx%s%s, n=%d runs", cell.preset(), kDot, v.gpu_phase,
                                        cell.speedup_vs_baseline(),
                                        ci ? absl::StrFormat(" (95%% interval %.2f-%.2f)", cell.speedup_ci().lo(),
                                                             cell.speedup_ci().hi())
                                           : "",
                                        sig, cell.n()),
                        absl::StrCat("n=", cell.n())});
  }
  if (c.points.empty()) c.not_collected = absl::StrCat("no ", baseline, " runs to compare against");
  return c;
}

std::optional<ChartSpec> GpuSpeedupChart(const std::vector<CellView>& cells, const std::string& baseline_gpu) {
  if (baseline_gpu.empty()) return std::nullopt;
  ChartSpec c;
  c.id = "gpu-speedup";
  c.title = absl::StrCat("Speedup vs ", baseline_gpu, " at the same preset");
  c.y_label = "speedup (x)";
  c.unit = "x";
  c.reference = 1.0;
  std::set<std::string> gpus;
  for (const CellView& v : cells) gpus.insert(v.cell->gpu());
  c.series.assign(gpus.begin(), gpus.end());
  for (const CellView& v : cells) {
    const std::string group = absl::StrCat(v.cell->preset(), kDot, config::PhaseName(v.cell->phase()));
    if (std::find(c.groups.begin(), c.groups.end(), group) == c.groups.end()) c.groups.push_back(group);
    if (!v.cell->has_gpu_baseline()) continue;
    c.points.push_back({group, v.cell->gpu(), v.cell->speedup_vs_baseline_gpu()});
  }
  if (c.points.empty()) c.not_collected = absl::StrCat("no ", baseline_gpu, " cell shares a preset with another GPU");
  return c;
}

ChartSpec KernelMixChart(const std::vector<CellView>& cells) {
  ChartSpec c;
  c.id = "kernel-mix";
  c.title = "Kernel mix: share of GPU kernel time (CPU runs: op self time) by category";
  c.y_label = "share of time";
  c.unit = "share";
  c.kind = ChartKind::kStacked;
  c.y_max = 1.0;
  for (taxonomy::Category cat : taxonomy::AllCategories()) c.series.emplace_back(taxonomy::CategoryName(cat));
  std::set<std::string> sources;
  for (const CellView& v : cells) {
    c.groups.push_back(v.label);
    if (v.cell->categories().empty()) {
      c.notes.push_back(absl::StrCat(v.label, ": no kernel or op times recorded"));
      continue;
    }
    sources.insert(v.cell->time_source());
    double listed = 0;
    for (const v1::CategoryShare& s : v.cell->categories()) {
      c.points.push_back({v.label, s.category(), s.share()});
      listed += s.share();
    }
    if (listed < 0.995) {
      c.notes.push_back(absl::StrFormat("%s: %.1f%% of the time is in categories the server did not list", v.label,
                                        (1 - listed) * 100));
    }
  }
  if (sources.contains("ops")) {
    c.notes.push_back("cells from CPU runs measure LibTorch op self time (time source \"ops\"), not GPU kernels");
  }
  if (c.points.empty()) c.not_collected = "no run recorded kernel or op times";
  return c;
}

ChartSpec StallsChart(const std::vector<CellView>& cells) {
  ChartSpec c;
  c.id = "stalls";
  c.title = "Warp-stall breakdown (share of stall cycles by reason)";
  c.y_label = "share of stalls";
  c.unit = "share";
  c.kind = ChartKind::kStacked;
  c.y_max = 1.0;
  std::vector<std::string> reasons;
  for (const CellView& v : cells) {
    if (!v.cell->has_stalls() || !v.cell->stalls().collected() || v.cell->stalls().shares().empty()) {
      reasons.push_back(StallsReason(*v.cell));
      c.notes.push_back(absl::StrCat(v.label, ": not collected: ", reasons.back()));
      continue;
    }
    c.groups.push_back(v.label);
    for (const v1::NamedShare& s : v.cell->stalls().shares()) {
      if (std::find(c.series.begin(), c.series.end(), s.name()) == c.series.end()) c.series.push_back(s.name());
      c.points.push_back({v.label, s.name(), s.share()});
    }
  }
  if (c.points.empty()) {
    c.not_collected = CommonReason(reasons);
    c.notes.clear();
  }
  return c;
}

// A grouped per-cell chart of CellMetrics fields.
struct MetricField {
  const char* series;
  bool (v1::CellMetrics::*has)() const;
  double (v1::CellMetrics::*get)() const;
};

ChartSpec MetricsChart(const std::vector<CellView>& cells, std::string id, std::string title, std::string y_label,
                       std::string unit, const std::vector<MetricField>& fields) {
  ChartSpec c;
  c.id = std::move(id);
  c.title = std::move(title);
  c.y_label = std::move(y_label);
  c.unit = std::move(unit);
  if (c.unit == "%") c.y_max = 100.0;
  if (c.unit == "x") c.reference = 1.0;
  for (const MetricField& f : fields) c.series.emplace_back(f.series);
  std::vector<std::string> reasons;
  for (const CellView& v : cells) {
    // Cells without data get no slot (they are listed under the chart with their reason).
    const bool collected = v.cell->has_metrics() && v.cell->metrics().collected();
    size_t added = 0;
    if (collected) {
      for (const MetricField& f : fields) {
        if (!(v.cell->metrics().*f.has)()) continue;
        c.points.push_back({v.label, f.series, (v.cell->metrics().*f.get)()});
        ++added;
      }
    }
    if (added == 0) {
      reasons.push_back(collected ? "not measured in this cell" : MetricsReason(*v.cell));
      c.notes.push_back(absl::StrCat(v.label, ": not collected: ", reasons.back()));
    }
  }
  if (c.points.empty()) {
    c.not_collected = CommonReason(reasons);
    c.notes.clear();
  }
  return c;
}

std::vector<ChartSpec> Charts(const ReportInput& in) {
  std::vector<ChartSpec> out;
  const std::vector<CellView> cells = Cells(in.compare);
  const std::string baseline = in.compare.baseline_preset().empty() ? "baseline" : in.compare.baseline_preset();
  out.push_back(StepTimeChart(cells));
  out.push_back(SpeedupChart(cells, baseline));
  if (auto g = GpuSpeedupChart(cells, in.compare.baseline_gpu())) out.push_back(*std::move(g));
  out.push_back(KernelMixChart(cells));
  out.push_back(StallsChart(cells));
  out.push_back(MetricsChart(cells, "tensor-fma", "Tensor Core vs FMA pipe utilization (time-weighted)",
                             "pipe utilization (%)", "%",
                             {{"tensor_pipe_pct", &v1::CellMetrics::has_tensor_pipe_pct, &v1::CellMetrics::tensor_pipe_pct},
                              {"fma_pipe_pct", &v1::CellMetrics::has_fma_pipe_pct, &v1::CellMetrics::fma_pipe_pct}}));
  out.push_back(MetricsChart(
      cells, "counter-ratios", absl::StrCat("SM cycles and warp instructions vs ", baseline, " (same GPU)"),
      "ratio to baseline (x)", "x",
      {{"sm_cycles_ratio", &v1::CellMetrics::has_sm_cycles_ratio, &v1::CellMetrics::sm_cycles_ratio},
       {"warp_instructions_ratio", &v1::CellMetrics::has_warp_instructions_ratio,
        &v1::CellMetrics::warp_instructions_ratio}}));
  out.push_back(MetricsChart(
      cells, "memory", "L1 / L2 hit rates and DRAM throughput", "percent", "%",
      {{"l1_hit_pct", &v1::CellMetrics::has_l1_hit_pct, &v1::CellMetrics::l1_hit_pct},
       {"l2_hit_pct", &v1::CellMetrics::has_l2_hit_pct, &v1::CellMetrics::l2_hit_pct},
       {"dram_throughput_pct", &v1::CellMetrics::has_dram_throughput_pct, &v1::CellMetrics::dram_throughput_pct}}));
  if (!in.compare_error.empty()) {
    for (ChartSpec& c : out) {
      c.points.clear();
      c.notes.clear();
      c.not_collected = absl::StrCat("compare failed: ", in.compare_error);
    }
  }
  return out;
}

// ---------------------------------------------------------------- tables

std::string Opt(double v, const char* fmt) { return absl::StrFormat(fmt, v); }

// "2.20 - 2.80", "0.49 - 1.45 <span class="ns">not significant</span>", or "-" (the reference cell,
// or a server without intervals).
std::string SpeedupCiCell(const v1::CompareCell& c) {
  if (!c.has_speedup_ci()) return "-";
  const v1::SpeedupInterval& i = c.speedup_ci();
  return absl::StrCat(absl::StrFormat("%.2f - %.2f", i.lo(), i.hi()),
                      i.significant() ? "" : " <span class=\"ns\">not significant</span>");
}

std::string CompareTable(const ReportInput& in) {
  std::string out =
      "<table id=\"compare-table\" class=\"data\">\n<thead><tr><th>GPU</th><th>preset</th><th>phase</th><th>runs</th>"
      "<th>steps</th><th>median ms</th><th>95% CI ms</th><th>p10-p90 ms</th><th>speedup</th><th>95% CI</th>"
      "<th>source</th><th>notes</th></tr></thead>\n<tbody>\n";
  for (const v1::CompareCell& c : in.compare.cells()) {
    std::vector<std::string> notes(c.notes().begin(), c.notes().end());
    absl::StrAppend(&out, "<tr data-gpu=\"", E(c.gpu()), "\" data-preset=\"", E(c.preset()), "\"><td>", E(c.gpu()),
                    "</td><td>", E(c.preset()), "</td><td>", E(config::PhaseName(c.phase())), "</td><td class=\"num\">",
                    c.n(), "</td><td class=\"num\">", c.steps(), "</td><td class=\"num\">",
                    Opt(c.step_ms_median(), "%.4g"), "</td><td class=\"num\">",
                    c.interval_method().empty() ? std::string("-")
                                                : absl::StrFormat("%.4g - %.4g", c.step_ms_ci_lo(), c.step_ms_ci_hi()),
                    "</td><td class=\"num\">", Opt(c.step_ms_p10(), "%.4g"), " - ", Opt(c.step_ms_p90(), "%.4g"),
                    "</td><td class=\"num\">", c.has_baseline() ? Opt(c.speedup_vs_baseline(), "%.2fx") : "-",
                    "</td><td class=\"num\">", SpeedupCiCell(c), "</td><td>", E(c.time_source()), "</td><td>",
                    E(absl::StrJoin(notes, "; ")), "</td></tr>\n");
  }
  if (in.compare.cells().empty()) {
    absl::StrAppend(&out, "<tr><td colspan=\"12\">",
                    in.compare_error.empty() ? "no succeeded run with measured steps yet"
                                             : E(absl::StrCat("compare failed: ", in.compare_error)),
                    "</td></tr>\n");
  }
  absl::StrAppend(&out, "</tbody></table>\n");
  return out;
}

std::string Shorten(const std::string& name, size_t max) {
  if (name.size() <= max) return name;
  return name.substr(0, max - 3) + "...";
}

// Kernels under this share of their cell's kernel time are left out of the priority table.
constexpr double kMinKernelShare = 0.01;

std::string PriorityTable(const ReportInput& in) {
  std::string out = absl::StrFormat(
      "<p class=\"meta\" id=\"priority-terms\">Kernels with at least %.0f%% of their cell's GPU kernel time. "
      "<b>share</b>: the kernel's part of the cell's kernel time. <b>est. speedup</b>: the largest of its findings' "
      "estimated gains on the kernel's own time (inefficiency &times; utilization of the limiting unit, Nsight "
      "Compute's rule logic). <b>priority</b>: share &times; est. speedup, the expected gain on the whole step "
      "&mdash; the ranking key. <b>measured</b>: the share of the kernel's time whose launch signatures the "
      "metrics layer profiled; its figures are aggregates over all its launches.</p>\n",
      kMinKernelShare * 100);
  out +=
      "<table id=\"priority-table\" class=\"data\">\n<thead><tr><th>GPU</th><th>preset</th><th>phase</th><th>#</th>"
      "<th>kernel</th><th>category</th><th>share</th><th>priority</th><th>est. speedup</th><th>findings</th></tr>"
      "</thead>\n<tbody>\n";
  int rows = 0;
  std::vector<std::string> notes;
  bool any_top = false;
  for (const v1::CompareCell& c : in.compare.cells()) any_top = any_top || c.top_kernels_size() > 0;
  if (any_top) {
    for (const v1::CompareCell& c : in.compare.cells()) {
      if (!c.findings_note().empty()) {
        notes.push_back(absl::StrCat(c.preset(), kDot, c.gpu(), " ", config::PhaseName(c.phase()), ": ",
                                     c.findings_note()));
      }
      int rank = 0, below = 0;
      for (const v1::TopKernel& k : c.top_kernels()) {
        if (k.share() < kMinKernelShare) {  // a kernel without a share that matters (0.0 %, 99 % "speedup")
          ++below;
          continue;
        }
        std::vector<std::string> findings;
        for (const v1::KernelFinding& f : k.findings()) {
          findings.push_back(absl::StrFormat("%s: %s (est. %.1f%%)", f.rule(), f.finding(), f.speedup() * 100));
        }
        absl::StrAppend(&out, "<tr class=\"kernel-row\"><td>", E(c.gpu()), "</td><td>", E(c.preset()), "</td><td>",
                        E(config::PhaseName(c.phase())), "</td><td class=\"num\">", ++rank, "</td><td title=\"",
                        E(k.name()), "\"><code>", E(Shorten(k.name(), 90)), "</code>",
                        k.op().empty() ? "" : absl::StrCat("<br><small>", E(k.op()), "</small>"), "</td><td>",
                        E(k.category()), "</td><td class=\"num\">", Opt(k.share() * 100, "%.1f%%"),
                        k.has_coverage_pct()
                            ? absl::StrFormat("<br><small title=\"share of the kernel's time whose launch "
                                              "signatures the metrics layer measured\">measured %.0f%%</small>",
                                              k.coverage_pct())
                            : "",
                        "</td><td class=\"num\">", Opt(k.priority(), "%.3f"), "</td><td class=\"num\">",
                        k.findings().empty() ? "-" : Opt(k.speedup() * 100, "%.1f%%"), "</td><td>",
                        findings.empty() ? "<span class=\"muted\">no finding</span>"
                                         : E(absl::StrJoin(findings, "; ")),
                        "</td></tr>\n");
        ++rows;
      }
      if (below > 0) {
        notes.push_back(absl::StrFormat("%s%s%s %s: %d listed kernel(s) under %.0f%% of the kernel time not shown",
                                        c.preset(), kDot, c.gpu(), config::PhaseName(c.phase()), below,
                                        kMinKernelShare * 100));
      }
    }
  } else {
    // No cell has top kernels: the cells say why (e.g. no GPU), or an older server has no
    // per-kernel priorities at all; then each run's top kernels by GPU time, without findings.
    for (const v1::CompareCell& c : in.compare.cells()) {
      if (!c.findings_note().empty()) {
        notes.push_back(absl::StrCat(c.preset(), kDot, c.gpu(), " ", config::PhaseName(c.phase()), ": ",
                                     c.findings_note()));
      }
    }
    if (notes.empty()) {
      notes.push_back(
          "findings not collected: the server's compare has no per-kernel priorities; kernels are ranked by GPU time");
    }
    for (const v1::Run& r : in.run_details) {
      std::vector<const v1::KernelStat*> ks;
      int64_t total = 0;
      for (const v1::KernelStat& k : r.kernels()) {
        ks.push_back(&k);
        total += k.total_ns();
      }
      std::sort(ks.begin(), ks.end(), [](auto* a, auto* b) { return a->total_ns() > b->total_ns(); });
      if (ks.size() > 10) ks.resize(10);
      int rank = 0;
      for (const v1::KernelStat* k : ks) {
        absl::StrAppend(&out, "<tr class=\"kernel-row\"><td>", E(r.gpu()), "</td><td>", E(r.preset()), "</td><td>",
                        E(config::PhaseName(r.effective().phase())), "</td><td class=\"num\">", ++rank,
                        "</td><td title=\"", E(k->name()), "\"><code>", E(Shorten(k->name(), 90)), "</code></td><td>",
                        E(k->category()), "</td><td class=\"num\">",
                        total > 0 ? Opt(100.0 * static_cast<double>(k->total_ns()) / static_cast<double>(total), "%.1f%%")
                                  : "-",
                        "</td><td class=\"num\">-</td><td class=\"num\">-</td><td><span class=\"muted\">not collected"
                        "</span></td></tr>\n");
        ++rows;
      }
    }
  }
  if (rows == 0) {
    absl::StrAppend(&out, "<tr><td colspan=\"10\">no kernel rows: ",
                    in.compare.cells().empty() ? "no succeeded run yet" : "the runs recorded no GPU kernels (CPU runs)",
                    "</td></tr>\n");
  }
  absl::StrAppend(&out, "</tbody></table>\n");
  if (!notes.empty()) {
    absl::StrAppend(&out, "<ul class=\"chart-notes\" id=\"priority-notes\">\n");
    for (const std::string& n : notes) absl::StrAppend(&out, "<li>", E(n), "</li>\n");
    absl::StrAppend(&out, "</ul>\n");
  }
  return out;
}

std::string Dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string EnvironmentTable(const ReportInput& in) {
  std::string out =
      "<table id=\"environment-table\" class=\"data\">\n<thead><tr><th>run</th><th>preset</th><th>state</th>"
      "<th>GPU</th><th>CC</th><th>driver</th><th>CUDA</th><th>cuDNN</th><th>LibTorch</th><th>CUPTI</th>"
      "<th>container image</th><th>node</th><th>Slurm job</th><th>site</th><th>agent</th><th>median ms</th>"
      "</tr></thead>\n<tbody>\n";
  for (const v1::Run& r : in.runs) {
    const v1::Environment& e = r.environment();
    std::string slurm = e.slurm_job_id();
    if (!slurm.empty() && !e.slurm_partition().empty()) absl::StrAppend(&slurm, " (", e.slurm_partition(), ")");
    std::string gpu = e.gpu_name().empty() ? r.gpu() : e.gpu_name();
    auto src = e.extra().find("source");
    absl::StrAppend(&out, "<tr class=\"env-row\" data-run=\"", E(r.run_id()), "\"><td><code>", E(r.run_id()),
                    "</code>", src != e.extra().end() ? absl::StrCat("<br><small>", E(src->second), "</small>") : "",
                    "</td><td>", E(r.preset()), "</td><td>", E(RunStateName(r.state())), "</td><td>", E(Dash(gpu)),
                    "</td><td>", E(Dash(e.compute_capability())), "</td><td>", E(Dash(DriverLabel(e))),
                    "</td><td>", E(Dash(e.cuda_runtime_version())), "</td><td>", E(Dash(e.cudnn_version())),
                    "</td><td>", E(Dash(e.torch_version())), "</td><td>", E(Dash(e.cupti_version())), "</td><td>",
                    E(Dash(e.container_image())), "</td><td>", E(Dash(e.host())), "</td><td>", E(Dash(slurm)),
                    "</td><td>", E(Dash(e.site())), "</td><td>", E(Dash(r.agent_id())), "</td><td class=\"num\">",
                    r.has_summary() && r.summary().measured_steps() > 0 ? Opt(r.summary().step_ms_median(), "%.4g")
                                                                         : "-",
                    "</td></tr>\n");
  }
  if (in.runs.empty()) absl::StrAppend(&out, "<tr><td colspan=\"16\">no runs yet</td></tr>\n");
  absl::StrAppend(&out, "</tbody></table>\n");
  return out;
}

constexpr char kStyle[] = R"css(
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
h1 { font-size: 1.5em; margin-bottom: 4px; } h2 { font-size: 1.2em; margin-top: 32px; border-bottom: 1px solid #ddd; }
.meta { color: #555; margin: 2px 0; }
figure.chart { margin: 16px 0 24px; } figcaption { font-weight: 600; margin-bottom: 6px; }
svg.chart-svg, svg.roofline-svg { background: #fff; border: 1px solid #e4e4e4; max-width: 100%; height: auto; }
svg .ceiling-label { font-size: 11px; }
svg .grid { stroke: #eee; } svg .axis { stroke: #888; } svg .tick, svg .group-label, svg .legend { font-size: 11px; fill: #444; }
svg .axis-label { font-size: 12px; fill: #333; } svg .whisker { stroke: #222; stroke-width: 1.5; }
svg .bar-n { font-size: 10px; fill: #555; }
svg .reference { stroke: #333; stroke-dasharray: 4 3; } svg .legend-item { cursor: pointer; }
svg.dim-other .mark:not(.hl) { opacity: 0.25; }
.not-collected { border: 1px dashed #b0b0b0; background: #fafafa; color: #666; padding: 28px; text-align: center; font-style: italic; }
.chart-notes { color: #666; font-size: 0.9em; margin: 4px 0; }
table.data { border-collapse: collapse; font-size: 0.85em; margin: 8px 0; }
table.data th, table.data td { border: 1px solid #ddd; padding: 3px 6px; vertical-align: top; }
table.data th { background: #f3f3f3; text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #999; } code { font-size: 0.95em; word-break: break-all; }
.ns { color: #a0522d; font-style: italic; white-space: nowrap; }
)css";

// Legend hover highlights a series; marks the document as rendered for tests and readers.
constexpr char kScript[] = R"js(
(function () {
  'use strict';
  var svgs = document.querySelectorAll('svg.chart-svg');
  svgs.forEach(function (svg) {
    svg.querySelectorAll('.legend-item').forEach(function (item) {
      var series = item.getAttribute('data-series');
      item.addEventListener('mouseenter', function () {
        svg.classList.add('dim-other');
        svg.querySelectorAll('.mark').forEach(function (m) {
          if (m.getAttribute('data-series') === series) { m.classList.add('hl'); }
        });
      });
      item.addEventListener('mouseleave', function () {
        svg.classList.remove('dim-other');
        svg.querySelectorAll('.mark.hl').forEach(function (m) { m.classList.remove('hl'); });
      });
    });
  });
  document.documentElement.setAttribute('data-report-ready', String(svgs.length));
})();
)js";

}  // namespace

// One roofline chart per GPU x preset x phase, from the cell's first succeeded run with details.
std::vector<RooflineChartSpec> RooflineCharts(const ReportInput& in) {
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<const v1::Run*>> cells;
  for (const v1::Run& r : in.run_details) {
    if (r.gpu() == "cpu" || r.gpu().empty()) continue;
    cells[{r.gpu(), r.preset(), std::string(config::PhaseName(r.effective().phase()))}].push_back(&r);
  }
  std::vector<RooflineChartSpec> out;
  for (const auto& [key, runs] : cells) {
    const v1::Run& run = *runs.front();
    RooflineChartSpec c;
    c.id = absl::StrCat("roofline-", out.size() + 1);
    c.title = absl::StrCat("Roofline", kDot, std::get<0>(key), kDot, std::get<1>(key), kDot, std::get<2>(key),
                           " (run ", run.run_id(), runs.size() > 1 ? absl::StrCat(", 1 of ", runs.size(), " runs") : "", ")");
    for (const v1::Ceiling& x : run.environment().ceilings().ceilings()) {
      c.ceilings.push_back({x.name(), x.measured(), x.datasheet()});
    }
    if (c.ceilings.empty()) {
      c.not_collected = run.environment().ceilings().note().empty() ? "no ceilings stored with this run"
                                                                    : run.environment().ceilings().note();
    }
    int unplaceable = 0;
    for (const RooflineRow& row : RooflineRows(run, {}, {"", "dram", false})) {
      const roofline::Point& p = row.point;
      auto dram = p.intensity.find("dram");
      const bool on_axes = p.flops > 0 && dram != p.intensity.end() && dram->second > 0;
      const std::string bound = roofline::Describe(p);
      if (!on_axes) {
        unplaceable += row.scope == "kernel";
        continue;
      }
      RooflineMark m{row.name, row.category, dram->second, p.flop_per_s, row.time_share, bound};
      (row.scope == "kernel" ? c.kernels : c.phases).push_back(std::move(m));
    }
    if (unplaceable > 0) {
      c.notes.push_back(absl::StrCat(unplaceable, " kernels with no FLOPs or no DRAM bytes (copies, layout transforms) "
                                     "cannot sit on log axes: medprof roofline ", run.run_id(), " lists them"));
    }
    if (c.kernels.empty() && c.not_collected.empty()) {
      c.not_collected = "no kernel with FLOP and DRAM byte counters (run with --metrics on a GPU)";
    }
    out.push_back(std::move(c));
  }
  return out;
}

const std::vector<std::string>& ChartNames() {
  static const std::vector<std::string> names = {"step-time", "speedup",        "gpu-speedup", "kernel-mix",
                                                 "stalls",    "tensor-fma",     "counter-ratios", "memory"};
  return names;
}

absl::StatusOr<ReportInput> CollectReport(MedprofClient& client, const std::string& study_id,
                                          const ReportOptions& options, int64_t now_unix_ms) {
  ReportInput in;
  in.server = client.server();
  in.generated_unix_ms = now_unix_ms;
  absl::StatusOr<v1::Study> study = client.GetStudy(study_id);
  if (!study.ok()) return study.status();
  in.study = *std::move(study);

  v1::ListRunsRequest lr;
  lr.set_study_id(study_id);
  lr.set_limit(std::clamp(options.max_runs, 1, 10000));
  absl::StatusOr<v1::ListRunsResponse> runs = client.ListRuns(lr);
  if (!runs.ok()) return runs.status();
  in.runs.assign(runs->runs().begin(), runs->runs().end());
  std::sort(in.runs.begin(), in.runs.end(), [](const v1::Run& a, const v1::Run& b) {
    return std::make_tuple(a.preset(), a.started_unix_ms(), a.run_id()) <
           std::make_tuple(b.preset(), b.started_unix_ms(), b.run_id());
  });

  v1::CompareRequest cr;
  cr.set_study_id(study_id);
  cr.set_baseline_preset(options.baseline_preset);
  cr.set_baseline_gpu(options.baseline_gpu);
  cr.set_phase(options.phase);
  cr.set_top_categories(12);  // every category: the stacked bars add up to the whole
  cr.set_top_kernels(std::clamp(options.top_kernels, 1, 50));
  absl::StatusOr<v1::CompareResponse> compare = client.Compare(cr);
  if (compare.ok()) {
    in.compare = *std::move(compare);
  } else {
    in.compare_error = std::string(compare.status().message());
  }

  // The rooflines, and the kernel fallback for servers whose compare has no top kernels.
  int fetched = 0;
  for (const v1::Run& r : in.runs) {
    if (r.state() != v1::RUN_SUCCEEDED || fetched >= options.max_run_details) continue;
    absl::StatusOr<v1::Run> detail = client.GetRun(r.run_id());
    if (!detail.ok()) return detail.status();
    ++fetched;
    if (detail->kernels_size() > 0) in.run_details.push_back(*std::move(detail));
  }
  return in;
}

std::string RenderHtmlReport(const ReportInput& in) {
  const v1::Study& s = in.study;
  const std::string title = absl::StrCat("medprof report: ", s.name().empty() ? s.study_id() : s.name());
  std::string out = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
      "script-src 'unsafe-inline'; img-src data:\">\n",
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
      "<meta name=\"generator\" content=\"medprof ", E(kVersionLine), "\">\n",
      "<link rel=\"icon\" href=\"data:,\">\n<title>", E(title), "</title>\n<style>", kStyle, "</style>\n</head>\n<body>\n");

  absl::StrAppend(&out, "<section id=\"summary\">\n<h1>", E(title), "</h1>\n");
  absl::StrAppend(&out, "<p class=\"meta\">study <code>", E(s.study_id()), "</code> · ", E(StudyStateName(s.state())),
                  " · ", s.jobs_done(), "/", s.jobs_total(), " jobs done · ", in.runs.size(), " runs",
                  s.project().empty() ? "" : absl::StrCat(" · project ", E(s.project())), "</p>\n");
  std::vector<std::string> presets;
  for (const std::string& p : config::PresetNames()) {
    for (const v1::Job& j : s.jobs()) {
      if (j.preset() == p) {
        presets.push_back(p);
        break;
      }
    }
  }
  absl::StrAppend(&out, "<p class=\"meta\">presets: ", E(absl::StrJoin(presets, ", ")), " · baseline: ",
                  E(in.compare.baseline_preset().empty() ? "baseline" : in.compare.baseline_preset()),
                  in.compare.baseline_gpu().empty() ? "" : absl::StrCat(" · baseline GPU: ", E(in.compare.baseline_gpu())),
                  "</p>\n");
  absl::StrAppend(&out, "<p class=\"meta\">created ", E(FormatUnixMs(s.created_unix_ms())), " · report generated ",
                  E(FormatUnixMs(in.generated_unix_ms)), " from ", E(in.server), " by medprof ", E(kVersionLine),
                  "</p>\n");
  if (!in.compare_error.empty()) {
    absl::StrAppend(&out, "<p class=\"meta\"><strong>compare failed:</strong> ", E(in.compare_error), "</p>\n");
  }
  absl::StrAppend(&out, "</section>\n");

  absl::StrAppend(&out, "<section id=\"compare\">\n<h2>Cells (GPU x preset x phase)</h2>\n", CompareTable(in),
                  "<p class=\"meta\" id=\"interval-legend\">95% CI: bootstrap interval of the median (runs "
                  "resampled first, then their steps; one run: steps only). A speedup whose interval holds 1.00 is "
                  "<span class=\"ns\">not significant</span>: the difference may be noise. Fewer than 3 runs or 5 "
                  "steps per cell: see the cell's notes.</p>\n</section>\n");
  absl::StrAppend(&out, "<section id=\"figures\">\n<h2>Figures</h2>\n");
  for (const ChartSpec& c : Charts(in)) absl::StrAppend(&out, RenderChart(c));
  absl::StrAppend(&out, "</section>\n");
  const std::vector<RooflineChartSpec> rooflines = RooflineCharts(in);
  if (!rooflines.empty()) {
    absl::StrAppend(&out, "<section id=\"rooflines\">\n<h2>Rooflines (GPU x preset x phase)</h2>\n",
                    "<p class=\"meta\">Kernels at their DRAM arithmetic intensity and achieved FLOP/s, sized by their "
                    "share of the kernel time, coloured by category (hover for the kernel and its bound); phase ranges "
                    "as diamonds. Ceilings measured on the node are solid, the datasheet's dashed.</p>\n");
    for (const RooflineChartSpec& c : rooflines) absl::StrAppend(&out, RenderRooflineChart(c));
    absl::StrAppend(&out, "</section>\n");
  }
  absl::StrAppend(&out, "<section id=\"priorities\">\n<h2>Priorities: top kernels and findings</h2>\n",
                  PriorityTable(in), "</section>\n");
  absl::StrAppend(&out, "<section id=\"environment\">\n<h2>Environment of every run</h2>\n", EnvironmentTable(in),
                  "</section>\n");
  absl::StrAppend(&out, "<script>", kScript, "</script>\n</body>\n</html>\n");
  return out;
}

}  // namespace medprof::client::report
