#include "client/roofline_view.h"

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/text_table.h"

namespace medprof::client {
namespace {

using Json = nlohmann::ordered_json;
using Values = std::map<std::string, double>;

const std::set<std::string>& Phases() {
  static const std::set<std::string> kPhases = {"fwd", "bwd", "optim", "sample_step"};
  return kPhases;
}

// The values of every scope of the run: "kernel:<name>" -> values, ...
std::map<std::string, Values> Scopes(const v1::Run& run) {
  std::map<std::string, Values> out;
  for (const v1::MetricValue& m : run.metrics()) out[m.scope()][m.name()] = m.value();
  return out;
}

bool HasWork(const Values& v) {
  return std::any_of(v.begin(), v.end(), [](const auto& e) {
    return e.first.rfind("flops.", 0) == 0 || e.first.rfind("bytes.", 0) == 0;
  });
}

// Appends the row of a scope with work or traffic that the roofline can place (unplaced ones too:
// their bound says "unknown").
void AddRow(const v1::Run& run, const std::string& scope, const std::string& name, const std::string& category,
            double share, const Values* values, const roofline::Roofs& roofs, std::vector<RooflineRow>* out) {
  if (values == nullptr || !HasWork(*values)) return;
  absl::StatusOr<roofline::Point> p = roofline::Locate(*values, roofs);
  if (!p.ok()) return;  // no duration: nothing to place
  out->push_back(RooflineRow{run.run_id(), run.gpu(), run.preset(), scope, name, category, share, *std::move(p)});
}

std::string Sci(double v) { return v > 0 ? absl::StrFormat("%.3g", v) : "-"; }

std::string CeilingsLine(const v1::Run& run) {
  const v1::Ceilings& c = run.environment().ceilings();
  std::vector<std::string> parts;
  for (const v1::Ceiling& x : c.ceilings()) {
    constexpr double kTera = 1e12;  // TB/s and TFLOP/s alike
    parts.push_back(absl::StrCat(roofline::RoofLabel(x.name()), " ", x.measured() > 0 ? Fixed(x.measured() / kTera, 1) : "-",
                                 " (", x.datasheet() > 0 ? Fixed(x.datasheet() / kTera, 1) : "-", ")"));
  }
  std::string line = absl::StrCat("run ", run.run_id(), " (", run.gpu(), ", ", run.preset(),
                                  "): roofs measured (datasheet) in TB/s and TFLOP/s: ",
                                  parts.empty() ? "none" : absl::StrJoin(parts, ", "));
  if (!c.note().empty()) absl::StrAppend(&line, "; ", c.note());
  return line + "\n";
}

double LevelValue(const std::map<std::string, double>& m, const std::string& level) {
  auto it = m.find(level);
  return it == m.end() ? 0 : it->second;
}

Json RowJson(const RooflineRow& r) {
  const roofline::Point& p = r.point;
  Json o;
  o["scope"] = r.scope;
  o["name"] = r.name;
  o["category"] = r.category;
  o["time_share"] = r.time_share;
  o["duration_ns"] = p.duration_ns;
  o["flops"] = p.flops;
  o["flops_by_class"] = p.flops_by_class;
  o["bytes"] = p.bytes;
  o["intensity"] = p.intensity;
  o["flop_per_s"] = p.flop_per_s;
  o["bytes_per_s"] = p.bytes_per_s;
  o["binding"] = p.binding;
  o["pct_of_roof"] = p.pct_of_roof;
  o["bound"] = roofline::BoundName(p.bound);
  o["unroofed"] = p.unroofed;
  return o;
}

std::string Table(const std::vector<v1::Run>& runs, const std::vector<RooflineRow>& rows, const RooflineOptions& o) {
  std::string out;
  const std::string lv = roofline::RoofLabel(o.level);
  for (const v1::Run& run : runs) {
    out += CeilingsLine(run);
    TextTable t({"SCOPE", "NAME", "CATEGORY", "TIME %", "GFLOP", lv + " MB", "FLOP/B", "TFLOP/S", lv + " GB/S",
                 "BINDING", "% ROOF", "BOUND"},
                {Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kRight,
                 Align::kRight, Align::kRight, Align::kLeft, Align::kRight, Align::kLeft});
    for (const RooflineRow& r : rows) {
      if (r.run_id != run.run_id()) continue;
      const roofline::Point& p = r.point;
      const double bytes = LevelValue(p.bytes, o.level);
      t.AddRow({r.scope, ClipToWidth(r.name, 60), r.category, r.scope == "phase" ? "-" : Percent(r.time_share),
                Sci(p.flops / 1e9), Sci(bytes / 1e6), Sci(LevelValue(p.intensity, o.level)), Sci(p.flop_per_s / 1e12),
                Sci(LevelValue(p.bytes_per_s, o.level) / 1e9), p.binding.empty() ? "-" : roofline::RoofLabel(p.binding),
                p.binding.empty() ? "-" : Fixed(p.pct_of_roof, 1), roofline::BoundName(p.bound)});
    }
    out += t.rows() > 0 ? t.Render() : "  no kernel or phase with FLOP or byte counters (run with --metrics on a GPU)\n";
  }
  return out;
}

std::string Csv(const std::vector<RooflineRow>& rows, const RooflineOptions& o) {
  std::string out = CsvLine({"run_id", "gpu", "preset", "scope", "name", "category", "time_share", "duration_ns",
                             "flops", "level", "bytes", "intensity", "flop_per_s", "bytes_per_s", "binding",
                             "pct_of_roof", "bound"});
  for (const RooflineRow& r : rows) {
    const roofline::Point& p = r.point;
    out += CsvLine({r.run_id, r.gpu, r.preset, r.scope, r.name, r.category, CsvNumber(r.time_share),
                    CsvNumber(p.duration_ns), CsvNumber(p.flops), o.level, CsvNumber(LevelValue(p.bytes, o.level)),
                    CsvNumber(LevelValue(p.intensity, o.level)), CsvNumber(p.flop_per_s),
                    CsvNumber(LevelValue(p.bytes_per_s, o.level)), p.binding, CsvNumber(p.pct_of_roof),
                    roofline::BoundName(p.bound)});
  }
  return out;
}

}  // namespace

absl::Status ValidateRooflineOptions(const RooflineOptions& o) {
  if (std::find(std::begin(roofline::kLevels), std::end(roofline::kLevels), o.level) == std::end(roofline::kLevels)) {
    return absl::InvalidArgumentError(absl::StrCat("--level: '", o.level, "' is not a level (allowed: dram, l2, l1)"));
  }
  if (!o.phase.empty() && !Phases().count(o.phase)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--phase: '", o.phase, "' is not a phase range (allowed: fwd, bwd, optim, sample_step)"));
  }
  return absl::OkStatus();
}

std::vector<RooflineRow> RooflineRows(const v1::Run& run, const std::vector<v1::SignatureShare>& signatures,
                                      const RooflineOptions& o) {
  const roofline::Roofs roofs = roofline::RoofsOf(run.environment().ceilings());
  const std::map<std::string, Values> scopes = Scopes(run);
  const auto values_of = [&](const std::string& scope) -> const Values* {
    auto it = scopes.find(scope);
    return it == scopes.end() ? nullptr : &it->second;
  };
  // Kernel time and category by name; the phases each kernel ran in.
  std::map<std::string, int64_t> ns;
  std::map<std::string, std::string> category;
  std::map<std::string, std::set<std::string>> phases;
  int64_t total = 0;
  for (const v1::KernelStat& k : run.kernels()) {
    ns[k.name()] += k.total_ns();
    total += k.total_ns();
    if (category[k.name()].empty()) category[k.name()] = k.category();
    phases[k.name()].insert(k.phase());
  }
  std::vector<std::string> names;
  for (const auto& [name, t] : ns) {
    if (o.phase.empty() || phases[name].count(o.phase)) names.push_back(name);
  }
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) { return ns[a] > ns[b]; });
  std::vector<RooflineRow> out;
  for (const std::string& name : names) {
    const size_t before = out.size();
    AddRow(run, "kernel", name, category[name], total > 0 ? static_cast<double>(ns[name]) / total : 0,
           values_of("kernel:" + name), roofs, &out);
    if (!o.signatures || out.size() == before) continue;
    for (const v1::SignatureShare& s : signatures) {
      if (s.kernel() != name) continue;
      AddRow(run, "signature", absl::StrCat(s.id(), " ", s.op(), " ", s.shapes()), category[name], s.share_of_kernel(),
             values_of("signature:" + s.id()), roofs, &out);
    }
  }
  for (const std::string& p : Phases()) {
    if (o.phase.empty() || o.phase == p) AddRow(run, "phase", p, "", 0, values_of("phase:" + p), roofs, &out);
  }
  return out;
}

std::string FormatRoofline(const std::vector<v1::Run>& runs, const std::vector<RooflineRow>& rows,
                           const RooflineOptions& o, OutputFormat format) {
  if (format == OutputFormat::kCsv) return Csv(rows, o);
  if (format == OutputFormat::kTable) return Table(runs, rows, o);
  Json doc;
  doc["level"] = o.level;
  doc["runs"] = Json::array();
  for (const v1::Run& run : runs) {
    Json r;
    r["run_id"] = run.run_id();
    r["gpu"] = run.gpu();
    r["preset"] = run.preset();
    Json ceilings = Json::array();
    for (const v1::Ceiling& c : run.environment().ceilings().ceilings()) {
      ceilings.push_back({{"name", c.name()}, {"measured", c.measured()}, {"datasheet", c.datasheet()},
                          {"method", c.method()}});
    }
    r["ceilings"] = ceilings;
    r["ceilings_note"] = run.environment().ceilings().note();
    r["rows"] = Json::array();
    for (const RooflineRow& row : rows) {
      if (row.run_id == run.run_id()) r["rows"].push_back(RowJson(row));
    }
    doc["runs"].push_back(std::move(r));
  }
  return doc.dump(2) + "\n";
}

}  // namespace medprof::client
