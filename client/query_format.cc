#include "client/query_format.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/format.h"
#include "client/text_table.h"
#include "common/workload_config.h"

namespace medprof::client {
namespace {

using Json = nlohmann::ordered_json;

std::string Ms(int64_t ns) { return absl::StrFormat("%.3f", static_cast<double>(ns) / 1e6); }

// The server fills the default; an empty field still means "baseline" (CompareRequest).
std::string BaselineOf(const v1::CompareResponse& r) {
  return r.baseline_preset().empty() ? "baseline" : r.baseline_preset();
}

// The preset, with the user model's file name when the cell ran one (a model is a cell key).
std::string PresetLabel(const v1::CompareCell& c) {
  return c.model_file_name().empty() ? c.preset() : absl::StrCat(c.preset(), " [", c.model_file_name(), "]");
}

std::string CellLabel(const v1::CompareCell& c) {
  return absl::StrCat(c.gpu(), " / ", PresetLabel(c), " / ", config::PhaseName(c.phase()));
}

std::string CategoriesText(const v1::CompareCell& c) {
  std::vector<std::string> parts;
  for (const auto& cat : c.categories()) parts.push_back(absl::StrCat(cat.category(), " ", Percent(cat.share())));
  return absl::StrJoin(parts, ", ");
}

bool HasInterval(const v1::CompareCell& c) { return !c.interval_method().empty(); }

// "2.50x (2.10-2.90)", "0.96x (0.39-2.83) not significant", "1.00x (reference)" for the cell the
// others are measured against, "2.50x" from a server without intervals.
std::string SpeedupText(double speedup, bool has_ci, const v1::SpeedupInterval& ci) {
  const std::string x = absl::StrCat(Fixed(speedup, 2), "x");
  if (!has_ci) return x;
  return absl::StrCat(x, " (", Fixed(ci.lo(), 2), "-", Fixed(ci.hi(), 2), ")", ci.significant() ? "" : " not significant");
}

Json SpeedupCiJson(bool has, const v1::SpeedupInterval& ci) {
  if (!has) return Json(nullptr);
  Json o;
  o["lo"] = ci.lo();
  o["hi"] = ci.hi();
  o["significant"] = ci.significant();
  return o;
}

std::string StallsText(const v1::CellStalls& s, size_t top) {
  std::vector<std::string> parts;
  for (int i = 0; i < s.shares_size() && static_cast<size_t>(i) < top; ++i) {
    parts.push_back(absl::StrCat(s.shares(i).name(), " ", Percent(s.shares(i).share())));
  }
  return absl::StrJoin(parts, ", ");
}

struct MetricField {
  const char* name;
  bool (v1::CellMetrics::*has)() const;
  double (v1::CellMetrics::*get)() const;
};

const std::vector<MetricField>& MetricFields() {
  static const std::vector<MetricField> f = {
      {"sm_cycles", &v1::CellMetrics::has_sm_cycles, &v1::CellMetrics::sm_cycles},
      {"warp_instructions", &v1::CellMetrics::has_warp_instructions, &v1::CellMetrics::warp_instructions},
      {"sm_cycles_ratio", &v1::CellMetrics::has_sm_cycles_ratio, &v1::CellMetrics::sm_cycles_ratio},
      {"warp_instructions_ratio", &v1::CellMetrics::has_warp_instructions_ratio,
       &v1::CellMetrics::warp_instructions_ratio},
      {"tensor_pipe_pct", &v1::CellMetrics::has_tensor_pipe_pct, &v1::CellMetrics::tensor_pipe_pct},
      {"fma_pipe_pct", &v1::CellMetrics::has_fma_pipe_pct, &v1::CellMetrics::fma_pipe_pct},
      {"achieved_occupancy_pct", &v1::CellMetrics::has_achieved_occupancy_pct,
       &v1::CellMetrics::achieved_occupancy_pct},
      {"l1_hit_pct", &v1::CellMetrics::has_l1_hit_pct, &v1::CellMetrics::l1_hit_pct},
      {"l2_hit_pct", &v1::CellMetrics::has_l2_hit_pct, &v1::CellMetrics::l2_hit_pct},
      {"dram_throughput_pct", &v1::CellMetrics::has_dram_throughput_pct, &v1::CellMetrics::dram_throughput_pct},
      {"roof_pct", &v1::CellMetrics::has_roof_pct, &v1::CellMetrics::roof_pct},
      {"memory_bound_share", &v1::CellMetrics::has_memory_bound_share, &v1::CellMetrics::memory_bound_share},
      {"compute_bound_share", &v1::CellMetrics::has_compute_bound_share, &v1::CellMetrics::compute_bound_share},
      {"latency_bound_share", &v1::CellMetrics::has_latency_bound_share, &v1::CellMetrics::latency_bound_share},
  };
  return f;
}

std::optional<double> MetricValue(const v1::CellMetrics& m, const char* name) {
  for (const MetricField& f : MetricFields()) {
    if (std::string_view(f.name) == name) {
      if (!(m.*f.has)()) return std::nullopt;
      return (m.*f.get)();
    }
  }
  return std::nullopt;
}

Json MetricsJson(const v1::CellMetrics& m) {
  Json o;
  o["collected"] = m.collected();
  if (!m.collected()) {
    o["note"] = m.not_collected();
    return o;
  }
  o["source"] = m.source();
  o["runs_with_metrics"] = m.runs_with_metrics();
  for (const MetricField& f : MetricFields()) {
    o[f.name] = (m.*f.has)() ? Json((m.*f.get)()) : Json(nullptr);
  }
  return o;
}

Json StallsJson(const v1::CellStalls& s) {
  Json o;
  o["collected"] = s.collected();
  if (!s.collected()) {
    o["note"] = s.not_collected();
    return o;
  }
  o["source"] = s.source();
  o["shares"] = Json::array();
  for (const auto& sh : s.shares()) {
    Json e;
    e["reason"] = sh.name();
    e["share"] = sh.share();
    o["shares"].push_back(std::move(e));
  }
  return o;
}

Json TopKernelsJson(const v1::CompareCell& c) {
  Json a = Json::array();
  for (const auto& k : c.top_kernels()) {
    Json e;
    e["name"] = k.name();
    e["op"] = k.op();
    e["category"] = k.category();
    e["total_ns"] = k.total_ns();
    e["share"] = k.share();
    e["priority"] = k.priority();
    e["speedup"] = k.speedup();
    e["coverage_pct"] = k.has_coverage_pct() ? Json(k.coverage_pct()) : Json(nullptr);
    e["findings"] = Json::array();
    for (const auto& f : k.findings()) {
      Json fj;
      fj["rule"] = f.rule();
      fj["finding"] = f.finding();
      fj["speedup"] = f.speedup();
      e["findings"].push_back(std::move(fj));
    }
    a.push_back(std::move(e));
  }
  return a;
}

// "1.23x" or "-" when absent.
std::string Ratio(const std::optional<double>& v) { return v ? absl::StrCat(Fixed(*v, 2), "x") : "-"; }
std::string Pct(const std::optional<double>& v) { return v ? Fixed(*v, 1) : "-"; }
// The roofline's bound shares of a cell as "memory/compute/latency" percentages, e.g. "62/30/8".
std::string BoundShares(const v1::CellMetrics& m) {
  if (!m.has_memory_bound_share()) return "-";
  return absl::StrCat(Fixed(100 * m.memory_bound_share(), 0), "/", Fixed(100 * m.compute_bound_share(), 0), "/",
                      Fixed(100 * m.latency_bound_share(), 0));
}

// "trace not collected: R", "sampling not collected: R", "metrics not collected: R" -> one note
// "trace, sampling, metrics not collected: R"; other notes unchanged, order kept.
std::vector<std::string> MergeLayerNotes(const google::protobuf::RepeatedPtrField<std::string>& notes) {
  const std::string kMid = " not collected: ";
  std::vector<std::string> out;
  std::map<std::string, size_t> by_reason;  // reason -> index in out
  std::map<size_t, std::vector<std::string>> layers;
  for (const std::string& n : notes) {
    const size_t at = n.find(kMid);
    if (at == std::string::npos || at == 0 || n.find(' ') < at) {
      out.push_back(n);
      continue;
    }
    const std::string layer = n.substr(0, at);
    const std::string reason = n.substr(at + kMid.size());
    auto [it, fresh] = by_reason.try_emplace(reason, out.size());
    if (fresh) out.push_back("");
    layers[it->second].push_back(layer);
  }
  for (const auto& [reason, index] : by_reason) {
    out[index] = absl::StrCat(absl::StrJoin(layers[index], ", "), kMid, reason);
  }
  return out;
}

// "100.00 (95.50-110.25)": the median and its 95 % interval (the median alone from a server
// without intervals).
std::string MedianText(const v1::CompareCell& c) {
  if (!HasInterval(c)) return Fixed(c.step_ms_median(), 2);
  return absl::StrCat(Fixed(c.step_ms_median(), 2), " (", Fixed(c.step_ms_ci_lo(), 2), "-", Fixed(c.step_ms_ci_hi(), 2),
                      ")");
}

constexpr char kIntervalLegend[] =
    "95% CI: bootstrap interval (runs resampled first, then their steps); a speedup whose interval holds 1.00 is "
    "not significant\n";

// A float for CSV: counters (>= 1e5) whole, the rest with 6 significant digits (79.595, not
// 79.59498500000001).
std::string CsvNum(double v) {
  if (std::fabs(v) >= 1e5) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.6g", v);
}

// compare --format csv: one long table, a row per cell x measure (x item: a category, stall
// reason, kernel, note). Columns: the cell's keys, then measure, item, value, ci_lo, ci_hi,
// significant (yes|no|empty), text.
class CompareCsvWriter {
 public:
  explicit CompareCsvWriter(std::string study_id) : study_id_(std::move(study_id)) {}
  std::string Take() { return std::move(out_); }
  void Header() {
    out_ += CsvLine({"study_id", "gpu", "preset", "phase", "n", "steps", "measure", "item", "value", "ci_lo", "ci_hi",
                     "significant", "text"});
  }
  void Cell(const v1::CompareCell& c) { cell_ = &c; }
  void Value(const std::string& measure, const std::string& item, double v) { Row(measure, item, CsvNum(v), "", "", "", ""); }
  void WithCi(const std::string& measure, double v, double lo, double hi, const char* significant) {
    Row(measure, "", CsvNum(v), CsvNum(lo), CsvNum(hi), significant, "");
  }
  void Text(const std::string& measure, const std::string& item, const std::string& text) {
    Row(measure, item, "", "", "", "", text);
  }

 private:
  void Row(const std::string& measure, const std::string& item, const std::string& value, const std::string& lo,
           const std::string& hi, const std::string& significant, const std::string& text) {
    const v1::CompareCell& c = *cell_;
    out_ += CsvLine({c.study_id().empty() ? study_id_ : c.study_id(), c.gpu(), c.preset(), config::PhaseName(c.phase()),
                     absl::StrCat(c.n()), absl::StrCat(c.steps()), measure, item, value, lo, hi, significant, text});
  }
  const v1::CompareCell* cell_ = nullptr;
  std::string study_id_;  // of a one-study compare (cells then carry none)
  std::string out_;
};

void SpeedupCsv(CompareCsvWriter& w, const char* measure, double v, bool has_ci, const v1::SpeedupInterval& ci) {
  if (has_ci) {
    w.WithCi(measure, v, ci.lo(), ci.hi(), ci.significant() ? "yes" : "no");
  } else {
    w.Value(measure, "", v);  // the reference cell itself
  }
}

std::string CompareCsv(const v1::CompareResponse& r) {
  CompareCsvWriter w(r.study_id());
  w.Header();
  for (const auto& c : r.cells()) {
    w.Cell(c);
    if (HasInterval(c)) {
      w.WithCi("step_ms_median", c.step_ms_median(), c.step_ms_ci_lo(), c.step_ms_ci_hi(), "");
      w.Text("interval_method", "", c.interval_method());
    } else {
      w.Value("step_ms_median", "", c.step_ms_median());
    }
    w.Value("step_ms_p10", "", c.step_ms_p10());
    w.Value("step_ms_p90", "", c.step_ms_p90());
    if (c.has_baseline()) SpeedupCsv(w, "speedup_vs_baseline", c.speedup_vs_baseline(), c.has_speedup_ci(), c.speedup_ci());
    if (c.has_study_baseline()) {
      SpeedupCsv(w, "speedup_vs_first_study", c.speedup_vs_first_study(), c.has_speedup_study_ci(), c.speedup_study_ci());
    }
    if (c.has_gpu_baseline()) {
      SpeedupCsv(w, "speedup_vs_baseline_gpu", c.speedup_vs_baseline_gpu(), c.has_speedup_gpu_ci(), c.speedup_gpu_ci());
    }
    for (const auto& cat : c.categories()) w.Value(absl::StrCat("share_", c.time_source()), cat.category(), cat.share());
    for (const MetricField& f : MetricFields()) {
      if ((c.metrics().*f.has)()) w.Value(f.name, "", (c.metrics().*f.get)());
    }
    if (!c.metrics().collected()) w.Text("metrics", "", c.metrics().not_collected());
    for (const auto& st : c.stalls().shares()) w.Value("stall_share", st.name(), st.share());
    if (!c.stalls().collected()) w.Text("stalls", "", c.stalls().not_collected());
    for (const auto& k : c.top_kernels()) {
      w.Value("kernel_priority", k.name(), k.priority());
      if (k.has_coverage_pct()) w.Value("kernel_coverage_pct", k.name(), k.coverage_pct());
    }
    for (const auto& n : c.notes()) w.Text("note", "", n);
  }
  return w.Take();
}

// One cell of compare's JSON (`cross_study`: the comparison spans studies).
Json CompareCellJson(const v1::CompareCell& c, bool cross_study) {
  Json e;
  if (cross_study) e["study_id"] = c.study_id();
  e["gpu"] = c.gpu();
  e["preset"] = c.preset();
  if (!c.model_sha256().empty()) e["model"] = {{"sha256", c.model_sha256()}, {"file_name", c.model_file_name()}};
  e["phase"] = config::PhaseName(c.phase());
  e["n"] = c.n();
  e["steps"] = c.steps();
  e["step_ms_median"] = c.step_ms_median();
  e["step_ms_p10"] = c.step_ms_p10();
  e["step_ms_p90"] = c.step_ms_p90();
  e["step_ms_ci95"] = HasInterval(c) ? Json::array({c.step_ms_ci_lo(), c.step_ms_ci_hi()}) : Json(nullptr);
  e["interval_method"] = HasInterval(c) ? Json(c.interval_method()) : Json(nullptr);
  e["speedup_vs_baseline"] = c.has_baseline() ? Json(c.speedup_vs_baseline()) : Json(nullptr);
  e["speedup_ci95"] = SpeedupCiJson(c.has_speedup_ci(), c.speedup_ci());
  e["speedup_vs_baseline_gpu"] = c.has_gpu_baseline() ? Json(c.speedup_vs_baseline_gpu()) : Json(nullptr);
  e["speedup_gpu_ci95"] = SpeedupCiJson(c.has_speedup_gpu_ci(), c.speedup_gpu_ci());
  if (cross_study) {
    e["speedup_vs_first_study"] = c.has_study_baseline() ? Json(c.speedup_vs_first_study()) : Json(nullptr);
    e["speedup_study_ci95"] = SpeedupCiJson(c.has_speedup_study_ci(), c.speedup_study_ci());
  }
  e["time_source"] = c.time_source();
  e["categories"] = Json::array();
  for (const auto& cat : c.categories()) {
    Json cj;
    cj["category"] = cat.category();
    cj["share"] = cat.share();
    e["categories"].push_back(std::move(cj));
  }
  e["metrics"] = MetricsJson(c.metrics());
  e["stalls"] = StallsJson(c.stalls());
  e["top_kernels"] = TopKernelsJson(c);
  e["findings_note"] = c.findings_note().empty() ? Json(nullptr) : Json(c.findings_note());
  Json notes = Json::array();
  for (const auto& n : c.notes()) notes.push_back(n);
  e["notes"] = std::move(notes);
  return e;
}

// A cell's top kernels with their findings, for the table's "top kernels" section ("" when none).
std::string CellKernelsText(const v1::CompareCell& c) {
  std::string kernels;
  if (c.top_kernels_size() == 0) return kernels;
  absl::StrAppend(&kernels, "  ", CellLabel(c),
                  c.findings_note().empty() ? "" : absl::StrCat(" (", c.findings_note(), ": by time)"), "\n");
  for (const auto& k : c.top_kernels()) {
    absl::StrAppend(&kernels, "    ", Percent(k.share()), "  ", k.category(), "  ", ClipToWidth(k.name(), 70));
    if (k.priority() > 0) absl::StrAppend(&kernels, "  priority ", Fixed(k.priority(), 3));
    if (k.has_coverage_pct()) absl::StrAppend(&kernels, "  metrics over ", Percent(k.coverage_pct() / 100));
    absl::StrAppend(&kernels, "\n");
    for (const auto& f : k.findings()) {
      absl::StrAppend(&kernels, "        ", f.rule(), ": ", f.finding(), " (speedup ", Percent(f.speedup()), ")\n");
    }
  }
  return kernels;
}

}  // namespace

std::string FormatCompare(const v1::CompareResponse& r, OutputFormat format) {
  switch (format) {
    case OutputFormat::kJson: {
      Json o;
      o["study_id"] = r.study_id();
      o["baseline"] = BaselineOf(r);
      o["baseline_gpu"] = r.baseline_gpu().empty() ? Json(nullptr) : Json(r.baseline_gpu());
      o["runs_compared"] = r.runs_compared();
      if (r.study_ids_size() > 0) o["study_ids"] = Json(std::vector<std::string>(r.study_ids().begin(), r.study_ids().end()));
      o["cells"] = Json::array();
      for (const auto& c : r.cells()) {
        o["cells"].push_back(CompareCellJson(c, r.study_ids_size() > 0));
      }
      return o.dump(2) + "\n";
    }
    case OutputFormat::kCsv:
      return CompareCsv(r);
    case OutputFormat::kTable:
      break;
  }
  const bool cross_gpu = !r.baseline_gpu().empty();
  const bool cross_study = r.study_ids_size() > 0;
  std::vector<std::string> headers = {"GPU", "PRESET", "PHASE", "N", "STEPS", "MEDIAN MS (95% CI)", "SPEEDUP (95% CI)"};
  std::vector<Align> align = {Align::kLeft,  Align::kLeft,  Align::kLeft, Align::kRight,
                              Align::kRight, Align::kRight, Align::kRight};
  if (cross_study) {
    headers.insert(headers.begin(), "STUDY");
    align.insert(align.begin(), Align::kLeft);
    headers.push_back(absl::StrCat("VS ", r.study_ids(0)));
    align.push_back(Align::kRight);
  }
  if (cross_gpu) {
    headers.push_back(absl::StrCat("VS ", r.baseline_gpu()));
    align.push_back(Align::kRight);
  }
  headers.insert(headers.end(), {"SOURCE", "TOP CATEGORIES"});
  TextTable t(headers, align);
  TextTable mt({"GPU", "PRESET", "PHASE", "SM CYCLES", "INSTR", "TENSOR %", "FMA %", "OCC %", "L1 HIT %", "L2 HIT %",
                "DRAM %", "ROOF %", "MEM/COMP/LAT %", "TOP STALLS"},
               {Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kRight,
                Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kLeft});
  bool any_metrics = false;
  std::string notes, kernels;
  std::vector<std::string> note_order;
  std::map<std::string, std::vector<std::string>> note_cells;
  for (const auto& c : r.cells()) {
    std::vector<std::string> row = {
        c.gpu(), PresetLabel(c), config::PhaseName(c.phase()), absl::StrCat(c.n()), absl::StrCat(c.steps()),
        MedianText(c), !c.has_baseline()           ? std::string("-")
                       : c.preset() == BaselineOf(r) ? absl::StrCat(Fixed(c.speedup_vs_baseline(), 2), "x (reference)")
                                                     : SpeedupText(c.speedup_vs_baseline(), c.has_speedup_ci(), c.speedup_ci())};
    if (cross_study) {
      row.insert(row.begin(), c.study_id());
      row.push_back(c.study_id() == r.study_ids(0) ? std::string("(reference)")
                    : c.has_study_baseline()
                        ? SpeedupText(c.speedup_vs_first_study(), c.has_speedup_study_ci(), c.speedup_study_ci())
                        : std::string("-"));
    }
    if (cross_gpu) {
      row.push_back(!c.has_gpu_baseline()            ? std::string("-")
                    : c.gpu() == r.baseline_gpu() ? absl::StrCat(Fixed(c.speedup_vs_baseline_gpu(), 2), "x (reference)")
                                                  : SpeedupText(c.speedup_vs_baseline_gpu(), c.has_speedup_gpu_ci(),
                                                                c.speedup_gpu_ci()));
    }
    row.push_back(c.time_source());
    row.push_back(c.categories_size() > 0 ? CategoriesText(c) : "-");
    t.AddRow(std::move(row));

    const v1::CellMetrics& m = c.metrics();
    any_metrics = any_metrics || m.collected() || c.stalls().collected();
    mt.AddRow({c.gpu(), c.preset(), config::PhaseName(c.phase()), Ratio(MetricValue(m, "sm_cycles_ratio")),
               Ratio(MetricValue(m, "warp_instructions_ratio")), Pct(MetricValue(m, "tensor_pipe_pct")),
               Pct(MetricValue(m, "fma_pipe_pct")), Pct(MetricValue(m, "achieved_occupancy_pct")),
               Pct(MetricValue(m, "l1_hit_pct")), Pct(MetricValue(m, "l2_hit_pct")),
               Pct(MetricValue(m, "dram_throughput_pct")), Pct(MetricValue(m, "roof_pct")), BoundShares(m),
               c.stalls().collected() ? StallsText(c.stalls(), 3) : "-"});
    for (const std::string& n : MergeLayerNotes(c.notes())) {
      auto [it, fresh] = note_cells.try_emplace(n);
      if (fresh) note_order.push_back(n);
      it->second.push_back(CellLabel(c));
    }
    absl::StrAppend(&kernels, CellKernelsText(c));
  }
  const std::string what = cross_study  ? absl::StrCat("studies ", absl::StrJoin(r.study_ids(), ", "))
                           : r.study_id().empty() ? std::string("selected runs")
                                                  : absl::StrCat("study ", r.study_id());
  std::string out = absl::StrCat(what,
                                 ", speedup vs ", BaselineOf(r), " on the same GPU and phase",
                                 cross_gpu ? absl::StrCat("; vs ", r.baseline_gpu(), " at the same preset") : "",
                                 cross_study ? absl::StrCat("; vs study ", r.study_ids(0), " at the same GPU and preset") : "",
                                 "\n");
  out += t.Render();
  if (std::any_of(r.cells().begin(), r.cells().end(), HasInterval)) out += kIntervalLegend;
  if (any_metrics) {
    out += "\nmetrics (SM cycles and instructions as ratios to " + BaselineOf(r) + "):\n" + mt.Render();
  }
  if (!kernels.empty()) out += "\ntop kernels:\n" + kernels;
  // One line per distinct note, with the cells it applies to ("every cell" when all of them).
  for (const std::string& n : note_order) {
    const std::vector<std::string>& cells = note_cells[n];
    const std::string who = cells.size() > 1 && static_cast<int>(cells.size()) == r.cells_size()
                                ? std::string("every cell")
                                : absl::StrJoin(cells, "; ");
    absl::StrAppend(&notes, "  ", who, ": ", n, "\n");
  }
  if (!notes.empty()) out += "notes:\n" + notes;
  return out;
}

namespace {

std::string Dims(const google::protobuf::RepeatedField<int32_t>& v) { return absl::StrJoin(v, ","); }

Json SignaturesJson(const v1::ListKernelsResponse& r) {
  Json a = Json::array();
  for (const v1::SignatureShare& s : r.signatures()) {
    Json e;
    e["id"] = s.id();
    e["kernel"] = s.kernel();
    e["op"] = s.op();
    e["phase"] = s.phase();
    e["shapes"] = s.shapes();
    e["grid"] = Json(std::vector<int32_t>(s.grid().begin(), s.grid().end()));
    e["block"] = Json(std::vector<int32_t>(s.block().begin(), s.block().end()));
    e["dynamic_shared_bytes"] = s.dynamic_shared_bytes();
    e["launches_per_step"] = s.launches_per_step();
    e["total_ns"] = s.total_ns();
    e["mean_ns"] = s.mean_ns();
    e["share_of_kernel"] = s.share_of_kernel();
    e["measured"] = s.measured();
    a.push_back(std::move(e));
  }
  return a;
}

std::string SignaturesCsv(const v1::ListKernelsResponse& r) {
  std::string out = CsvLine({"kernel", "id", "op", "phase", "shapes", "grid", "block", "dynamic_shared_bytes",
                             "launches_per_step", "total_ns", "mean_ns", "share_of_kernel", "measured"});
  for (const v1::SignatureShare& s : r.signatures()) {
    out += CsvLine({s.kernel(), s.id(), s.op(), s.phase(), s.shapes(), Dims(s.grid()), Dims(s.block()),
                    absl::StrCat(s.dynamic_shared_bytes()), CsvNumber(s.launches_per_step()), absl::StrCat(s.total_ns()),
                    absl::StrCat(s.mean_ns()), CsvNumber(s.share_of_kernel()), s.measured() ? "true" : "false"});
  }
  return out;
}

// One block per kernel, in the order of the kernel table.
std::string SignaturesTable(const v1::ListKernelsResponse& r) {
  std::string out = "\nlaunch signatures (kernel + grid + block + op + input shapes; * = measured by the metrics layer):\n";
  std::set<std::string> shown;
  for (const auto& k : r.kernels()) {
    if (!shown.insert(k.name()).second) continue;
    TextTable t({"OF KERNEL", "LAUNCHES/STEP", "MEAN US", "ID", "GRID", "BLOCK", "OP", "SHAPES"},
                {Align::kRight, Align::kRight, Align::kRight, Align::kLeft, Align::kLeft, Align::kLeft, Align::kLeft,
                 Align::kLeft});
    for (const v1::SignatureShare& s : r.signatures()) {
      if (s.kernel() != k.name()) continue;
      t.AddRow({Percent(s.share_of_kernel()), CsvNumber(s.launches_per_step()), absl::StrFormat("%.1f", s.mean_ns() / 1e3),
                absl::StrCat(s.id(), s.measured() ? "*" : ""), Dims(s.grid()), Dims(s.block()),
                s.op().empty() ? "-" : s.op(), ClipToWidth(s.shapes(), 80)});
    }
    if (t.rows() == 0) continue;
    absl::StrAppend(&out, ClipToWidth(k.name(), 100), "\n", t.Render());
  }
  return out;
}

// The kernel rows at or above kKernelRowShare of the time (every row with `all`), a line saying how
// many were hidden; the metrics coverage column only when the metrics layer measured a kernel, and
// on a CPU run no separate op column (an op row's name is its op).
std::string KernelsTable(const v1::ListKernelsResponse& r, bool all) {
  const bool ops = r.time_source() == "ops";
  const bool coverage = std::any_of(r.kernels().begin(), r.kernels().end(),
                                    [](const v1::KernelShare& k) { return k.has_coverage_pct(); });
  std::vector<std::string> head = {"SHARE", "TOTAL MS", "COUNT", "CATEGORY", "PHASE"};
  std::vector<Align> align = {Align::kRight, Align::kRight, Align::kRight, Align::kLeft, Align::kLeft};
  if (!ops) head.push_back("OP"), align.push_back(Align::kLeft);
  if (coverage) head.push_back("METRICS COV"), align.push_back(Align::kRight);
  head.push_back(ops ? "OP (CPU)" : "KERNEL");
  align.push_back(Align::kLeft);
  TextTable t(head, align);
  int hidden = 0;
  for (const auto& k : r.kernels()) {
    if (!all && k.share() < kKernelRowShare) {
      ++hidden;
      continue;
    }
    std::vector<std::string> row = {Percent(k.share()), Ms(k.total_ns()), absl::StrCat(k.count()), k.category(),
                                    k.phase().empty() ? "-" : k.phase()};
    if (!ops) row.push_back(k.op().empty() ? "-" : k.op());
    if (coverage) row.push_back(k.has_coverage_pct() ? Percent(k.coverage_pct() / 100.0) : "-");
    row.push_back(ClipToWidth(k.name(), 100));
    t.AddRow(row);
  }
  std::string out = t.Render();
  if (hidden > 0) {
    absl::StrAppend(&out, hidden, " rows under ", kKernelRowShare * 100, " % of the time not shown (--all lists them)\n");
  }
  return out;
}

}  // namespace

std::string FormatKernels(const v1::ListKernelsResponse& r, OutputFormat format, bool all) {
  switch (format) {
    case OutputFormat::kJson: {
      Json o;
      o["run_id"] = r.run_id();
      o["time_source"] = r.time_source();
      o["total_ns"] = r.total_ns();
      o["total_rows"] = r.total_rows();
      o["kernels"] = Json::array();
      for (const auto& k : r.kernels()) {
        Json e;
        e["name"] = k.name();
        e["category"] = k.category();
        e["op"] = k.op();
        e["phase"] = k.phase();
        e["count"] = k.count();
        e["total_ns"] = k.total_ns();
        e["share"] = k.share();
        e["coverage_pct"] = k.has_coverage_pct() ? Json(k.coverage_pct()) : Json(nullptr);
        o["kernels"].push_back(std::move(e));
      }
      if (r.signatures_size() > 0) o["signatures"] = SignaturesJson(r);
      return o.dump(2) + "\n";
    }
    case OutputFormat::kCsv: {
      if (r.signatures_size() > 0) return SignaturesCsv(r);  // one table per command: the finer one
      std::string out = CsvLine({"name", "category", "op", "phase", "count", "total_ns", "share", "coverage_pct"});
      for (const auto& k : r.kernels()) {
        out += CsvLine({k.name(), k.category(), k.op(), k.phase(), absl::StrCat(k.count()), absl::StrCat(k.total_ns()),
                        CsvNumber(k.share()), k.has_coverage_pct() ? CsvNumber(k.coverage_pct()) : ""});
      }
      return out;
    }
    case OutputFormat::kTable:
      break;
  }
  std::string out = absl::StrCat("run ", r.run_id(), ": ", r.kernels_size(), " of ", r.total_rows(),
                                 r.time_source() == "ops" ? " ops (no kernel rows: CPU op self times)" : " kernels",
                                 ", ", Ms(r.total_ns()), " ms in total\n");
  out += KernelsTable(r, all);
  if (r.signatures_size() > 0) out += SignaturesTable(r);
  return out;
}

std::string FormatDiff(const v1::DiffRunsResponse& r, OutputFormat format) {
  switch (format) {
    case OutputFormat::kJson: {
      Json o;
      o["run_a"] = r.run_a();
      o["run_b"] = r.run_b();
      o["time_source"] = r.time_source();
      o["a_steps"] = r.a_steps();
      o["b_steps"] = r.b_steps();
      o["a_total_ns"] = r.a_total_ns();
      o["b_total_ns"] = r.b_total_ns();
      o["a_step_ms_median"] = r.a_step_ms_median();
      o["b_step_ms_median"] = r.b_step_ms_median();
      o["rows"] = Json::array();
      for (const auto& d : r.rows()) {
        Json e;
        e["op"] = d.op();
        e["category"] = d.category();
        e["a_ns"] = d.a_ns();
        e["b_ns"] = d.b_ns();
        e["delta_ns"] = d.delta_ns();
        e["ratio"] = d.a_ns() > 0 ? Json(d.ratio()) : Json(nullptr);
        e["a_share"] = d.a_share();
        e["b_share"] = d.b_share();
        e["a_kernels"] = d.a_kernels();
        e["b_kernels"] = d.b_kernels();
        e["a_count"] = d.a_count();
        e["b_count"] = d.b_count();
        o["rows"].push_back(std::move(e));
      }
      return o.dump(2) + "\n";
    }
    case OutputFormat::kCsv: {
      std::string out = CsvLine({"op", "category", "a_ns", "b_ns", "delta_ns", "ratio", "a_share", "b_share",
                                 "a_kernels", "b_kernels", "a_count", "b_count"});
      for (const auto& d : r.rows()) {
        out += CsvLine({d.op(), d.category(), absl::StrCat(d.a_ns()), absl::StrCat(d.b_ns()),
                        absl::StrCat(d.delta_ns()), d.a_ns() > 0 ? CsvNumber(d.ratio()) : "", CsvNumber(d.a_share()),
                        CsvNumber(d.b_share()), absl::StrCat(d.a_kernels()), absl::StrCat(d.b_kernels()),
                        absl::StrCat(d.a_count()), absl::StrCat(d.b_count())});
      }
      return out;
    }
    case OutputFormat::kTable:
      break;
  }
  TextTable t({"OP", "CATEGORY", "A MS", "B MS", "DELTA MS", "B/A", "A SHARE", "B SHARE", "KERNELS A/B"},
              {Align::kLeft, Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight,
               Align::kRight, Align::kRight});
  for (const auto& d : r.rows()) {
    t.AddRow({d.op().empty() ? "(no op)" : d.op(), d.category(), Ms(d.a_ns()), Ms(d.b_ns()),
              absl::StrCat(d.delta_ns() > 0 ? "+" : "", Ms(d.delta_ns())),
              d.a_ns() > 0 ? absl::StrCat(Fixed(d.ratio(), 2), "x") : "new", Percent(d.a_share()),
              Percent(d.b_share()), absl::StrCat(d.a_kernels(), "/", d.b_kernels())});
  }
  const std::string what = r.time_source() == "ops" ? "CPU op self time" : "GPU kernel time";
  std::string out = absl::StrCat("A = run ", r.run_a(), ": median step ", Fixed(r.a_step_ms_median(), 2), " ms, ", what,
                                 " summed ", Ms(r.a_total_ns()), " ms/step\n", "B = run ", r.run_b(), ": median step ",
                                 Fixed(r.b_step_ms_median(), 2), " ms, ", what, " summed ", Ms(r.b_total_ns()),
                                 " ms/step\n", what, " per measured step, by op and category (a sum of ",
                                 r.time_source() == "ops" ? "op self times" : "kernel durations",
                                 ", not the step time)\n");
  return out + t.Render();
}

std::string FormatChromeTrace(const v1::GetTimelineResponse& r) {
  const v1::Timeline& tl = r.timeline();
  Json events = Json::array();
  auto meta = [&](int pid, int tid, const char* what, const std::string& name) {
    Json e;
    e["ph"] = "M";
    e["pid"] = pid;
    e["tid"] = tid;
    e["name"] = what;
    e["args"] = Json{{"name", name}};
    events.push_back(std::move(e));
  };
  meta(0, 0, "process_name", "host");
  meta(0, 0, "thread_name", "phases");
  meta(0, 1, "thread_name", "ops");
  meta(1, 0, "process_name", "GPU");
  std::map<int, bool> streams;
  for (const v1::TimelineEvent& ev : tl.events()) {
    const bool device = ev.kind() == "kernel" || ev.kind() == "memcpy" || ev.kind() == "memset";
    Json e;
    e["name"] = ev.name();
    e["cat"] = ev.kind();
    e["ph"] = "X";
    e["ts"] = static_cast<double>(ev.start_ns()) / 1000.0;
    e["dur"] = static_cast<double>(ev.duration_ns()) / 1000.0;
    e["pid"] = device ? 1 : 0;
    const int tid = device ? std::max(0, ev.stream()) : (ev.kind() == "phase" ? 0 : 1);
    e["tid"] = tid;
    if (device) streams[tid] = true;
    Json args = Json::object();
    if (!ev.op().empty()) args["op"] = ev.op();
    if (!ev.phase().empty()) args["phase"] = ev.phase();
    if (!ev.category().empty()) args["category"] = ev.category();
    args["step"] = ev.step();
    e["args"] = std::move(args);
    events.push_back(std::move(e));
  }
  for (const auto& [tid, unused] : streams) meta(1, tid, "thread_name", absl::StrCat("stream ", tid));
  if (r.has_utilization()) {
    const v1::UtilizationTimeline& u = r.utilization();
    meta(2, 0, "process_name", "GPU utilization (PM sampling)");
    // Samples are relative to the utilization origin; shift them onto the timeline's.
    const int64_t shift =
        u.origin_unix_ns() != 0 && tl.origin_unix_ns() != 0 ? u.origin_unix_ns() - tl.origin_unix_ns() : 0;
    for (const v1::UtilizationSample& s : u.samples()) {
      for (int i = 0; i < u.metrics_size() && i < s.values_size(); ++i) {
        Json e;
        e["name"] = u.metrics(i);
        e["ph"] = "C";
        e["ts"] = static_cast<double>(s.t_ns() + shift) / 1000.0;
        e["pid"] = 2;
        e["tid"] = 0;
        e["args"] = Json{{"value", s.values(i)}};
        events.push_back(std::move(e));
      }
    }
  }
  Json o;
  o["traceEvents"] = std::move(events);
  o["displayTimeUnit"] = "ns";
  o["otherData"] = Json{{"run_id", r.run_id()},
                        {"origin_unix_ns", tl.origin_unix_ns()},
                        {"steps", tl.steps()},
                        {"truncated", tl.truncated()},
                        {"producer", "medprof export --format chrome-trace"}};
  return o.dump() + "\n";
}

std::string FormatRunExport(const v1::Run& run, OutputFormat format) {
  if (format != OutputFormat::kCsv) return FormatRun(run, OutputFormat::kJson);
  std::string out = CsvLine(
      {"table", "name", "scope", "op", "phase", "category", "step", "count", "total_ns", "self_ns", "value", "unit"});
  for (const auto& s : run.steps()) {
    out += CsvLine({"step", "", "", "", config::PhaseName(s.phase()), "", absl::StrCat(s.step()), "1",
                    absl::StrCat(s.wall_ns()), "", CsvNumber(s.loss()), "loss"});
  }
  for (const auto& o : run.ops()) {
    out += CsvLine({"op", o.name(), "", o.name(), o.phase(), o.category(), "", absl::StrCat(o.count()),
                    absl::StrCat(o.total_ns()), absl::StrCat(o.self_ns()), "", ""});
  }
  for (const auto& k : run.kernels()) {
    out += CsvLine({"kernel", k.name(), "", k.op(), k.phase(), k.category(), "", absl::StrCat(k.count()),
                    absl::StrCat(k.total_ns()), "", "", ""});
  }
  for (const auto& m : run.metrics()) {
    out += CsvLine({"metric", m.name(), m.scope(), "", "", "", "", "", "", "", CsvNumber(m.value()), m.unit()});
  }
  return out;
}

}  // namespace medprof::client
