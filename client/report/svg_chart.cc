#include "client/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace medprof::client::report {
namespace {

constexpr double kWidth = 880;
constexpr double kHeight = 340;
constexpr double kLeft = 64;
constexpr double kRight = 16;
constexpr double kTop = 16;
constexpr double kBottom = 64;

std::string Num(double v) { return absl::StrFormat("%.6g", v); }
std::string Px(double v) { return absl::StrFormat("%.2f", v); }

// A "nice" axis top: 1, 2, 2.5 or 5 times a power of ten, at least `v`.
double NiceTop(double v) {
  if (!(v > 0) || !std::isfinite(v)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v * 0.9999) return m * p;
  }
  return 10 * p;
}

std::string ValueText(double v, const std::string& unit) {
  if (unit == "%") return absl::StrFormat("%.1f%%", v);
  if (unit == "x") return absl::StrFormat("%.2fx", v);
  if (unit == "share") return absl::StrFormat("%.1f%%", v * 100);
  if (unit.empty()) return absl::StrFormat("%.4g", v);
  return absl::StrFormat("%.4g %s", v, unit);
}

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string SeriesColor(const std::string& series) {
  static const std::map<std::string, std::string> kFixed = {
      // presets
      {"baseline", "#4e79a7"}, {"opt1", "#f28e2b"}, {"opt2", "#59a14f"}, {"opt12", "#e15759"},
      {"bf16", "#b07aa1"}, {"opt3", "#76b7b2"},
      // taxonomy categories
      {"conv", "#4e79a7"}, {"gemm", "#f28e2b"}, {"norm", "#59a14f"}, {"elementwise", "#e15759"},
      {"layout", "#edc948"}, {"copy", "#b07aa1"}, {"reduction", "#76b7b2"}, {"softmax", "#ff9da7"},
      {"optimizer", "#9c755f"}, {"upsample", "#bab0ac"}, {"memset", "#86bcb6"}, {"other", "#d4a6c8"},
  };
  auto it = kFixed.find(series);
  if (it != kFixed.end()) return it->second;
  static const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                   "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"};
  uint32_t h = 2166136261u;  // FNV-1a: stable across runs and machines
  for (unsigned char c : series) h = (h ^ c) * 16777619u;
  return kPalette[h % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

std::string RenderChart(const ChartSpec& c) {
  const std::string id = HtmlEscape(c.id);
  std::string out = absl::StrCat("<figure class=\"chart\" id=\"chart-", id, "\" data-chart-figure=\"", id, "\">\n",
                                 "<figcaption>", HtmlEscape(c.title), "</figcaption>\n");
  if (!c.not_collected.empty() || c.points.empty()) {
    const std::string reason = c.not_collected.empty() ? "no data in this study" : c.not_collected;
    absl::StrAppend(&out, "<div class=\"not-collected\" data-chart=\"", id, "\" data-reason=\"", HtmlEscape(reason),
                    "\">not collected: ", HtmlEscape(reason), "</div>\n");
  } else {
    // Series and groups in order, with any unlisted ones appended.
    std::vector<std::string> series = c.series, groups = c.groups;
    for (const ChartPoint& p : c.points) {
      if (std::find(series.begin(), series.end(), p.series) == series.end()) series.push_back(p.series);
      if (std::find(groups.begin(), groups.end(), p.group) == groups.end()) groups.push_back(p.group);
    }
    // Axis top.
    double top = 0;
    if (c.kind == ChartKind::kStacked) {
      std::map<std::string, double> sums;
      for (const ChartPoint& p : c.points) sums[p.group] += std::max(0.0, p.value);
      for (const auto& [g, s] : sums) top = std::max(top, s);
    } else {
      for (const ChartPoint& p : c.points) top = std::max({top, p.value, p.high.value_or(0.0)});
    }
    if (c.reference.has_value()) top = std::max(top, *c.reference);
    top = c.y_max.has_value() ? std::max(*c.y_max, top) : NiceTop(top);
    if (c.y_max.has_value() && top > *c.y_max) top = NiceTop(top);

    const double plot_w = kWidth - kLeft - kRight;
    const double plot_h = kHeight - kTop - kBottom;
    auto y_of = [&](double v) { return kTop + plot_h * (1.0 - std::clamp(v, 0.0, top) / top); };
    const double band = plot_w / static_cast<double>(std::max<size_t>(1, groups.size()));

    absl::StrAppend(&out, "<svg class=\"chart-svg\" id=\"svg-", id, "\" data-chart=\"", id, "\" data-points=\"",
                    c.points.size(), "\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 ", Num(kWidth), " ",
                    Num(kHeight), "\" width=\"", Num(kWidth), "\" height=\"", Num(kHeight), "\" role=\"img\" aria-label=\"",
                    HtmlEscape(c.title), "\">\n");
    // Grid and y axis.
    for (int i = 0; i <= 5; ++i) {
      const double v = top * i / 5.0;
      const double y = y_of(v);
      absl::StrAppend(&out, "<line class=\"grid\" x1=\"", Px(kLeft), "\" x2=\"", Px(kWidth - kRight), "\" y1=\"", Px(y),
                      "\" y2=\"", Px(y), "\"/><text class=\"tick\" x=\"", Px(kLeft - 6), "\" y=\"", Px(y + 4),
                      "\" text-anchor=\"end\">", HtmlEscape(c.unit == "share" ? absl::StrFormat("%.0f%%", v * 100)
                                                                               : absl::StrFormat("%.4g", v)),
                      "</text>\n");
    }
    absl::StrAppend(&out, "<text class=\"axis-label\" transform=\"translate(14,", Px(kTop + plot_h / 2),
                    ") rotate(-90)\" text-anchor=\"middle\">", HtmlEscape(c.y_label), "</text>\n");
    // Group labels (split on " · " into at most two lines).
    for (size_t g = 0; g < groups.size(); ++g) {
      const double x = kLeft + band * (static_cast<double>(g) + 0.5);
      const std::string& label = groups[g];
      const size_t sep = label.find(" \xC2\xB7 ");
      const std::string l1 = sep == std::string::npos ? label : label.substr(0, sep);
      const std::string l2 = sep == std::string::npos ? "" : label.substr(sep + 4);
      absl::StrAppend(&out, "<text class=\"group-label\" x=\"", Px(x), "\" y=\"", Px(kTop + plot_h + 16),
                      "\" text-anchor=\"middle\">", HtmlEscape(l1), "</text>\n");
      if (!l2.empty()) {
        absl::StrAppend(&out, "<text class=\"group-label\" x=\"", Px(x), "\" y=\"", Px(kTop + plot_h + 30),
                        "\" text-anchor=\"middle\">", HtmlEscape(l2), "</text>\n");
      }
    }
    // Marks.
    std::map<std::string, double> stack_base;
    for (const ChartPoint& p : c.points) {
      const size_t g = static_cast<size_t>(std::find(groups.begin(), groups.end(), p.group) - groups.begin());
      double x = 0, w = 0, y0 = 0, y1 = 0;
      if (c.kind == ChartKind::kStacked) {
        w = std::min(band * 0.6, 90.0);
        x = kLeft + band * (static_cast<double>(g) + 0.5) - w / 2;
        const double base = stack_base[p.group];
        const double v = std::max(0.0, p.value);
        y0 = y_of(base);
        y1 = y_of(base + v);
        stack_base[p.group] = base + v;
      } else {
        // Slots only for the series that have a point in this group, so bars stay wide.
        std::vector<std::string> present;
        for (const std::string& s : series) {
          for (const ChartPoint& q : c.points) {
            if (q.group == p.group && q.series == s) {
              present.push_back(s);
              break;
            }
          }
        }
        const size_t k = static_cast<size_t>(std::find(present.begin(), present.end(), p.series) - present.begin());
        const double inner = band * 0.8;
        w = std::min(inner / static_cast<double>(std::max<size_t>(1, present.size())), 60.0);
        const double start = kLeft + band * (static_cast<double>(g) + 0.5) - w * present.size() / 2.0;
        x = start + w * static_cast<double>(k);
        y0 = y_of(0);
        y1 = y_of(std::max(0.0, p.value));
      }
      const std::string tooltip =
          p.tooltip.empty() ? absl::StrCat(p.series, " \xC2\xB7 ", p.group, ": ", ValueText(p.value, c.unit)) : p.tooltip;
      absl::StrAppend(&out, "<rect class=\"mark\" data-series=\"", HtmlEscape(p.series), "\" data-point=\"",
                      HtmlEscape(p.group), "\" data-value=\"", Num(p.value), "\" x=\"", Px(x + 1), "\" y=\"", Px(y1),
                      "\" width=\"", Px(std::max(1.0, w - 2)), "\" height=\"", Px(std::max(0.0, y0 - y1)),
                      "\" fill=\"", SeriesColor(p.series), "\"><title>", HtmlEscape(tooltip), "</title></rect>\n");
      if (c.kind == ChartKind::kGrouped && p.low.has_value() && p.high.has_value()) {
        const double cx = x + w / 2;
        absl::StrAppend(&out, "<line class=\"whisker\" x1=\"", Px(cx), "\" x2=\"", Px(cx), "\" y1=\"", Px(y_of(*p.low)),
                        "\" y2=\"", Px(y_of(*p.high)), "\"/>\n");
      }
    }
    if (c.reference.has_value()) {
      const double y = y_of(*c.reference);
      absl::StrAppend(&out, "<line class=\"reference\" x1=\"", Px(kLeft), "\" x2=\"", Px(kWidth - kRight), "\" y1=\"",
                      Px(y), "\" y2=\"", Px(y), "\"/>\n");
    }
    absl::StrAppend(&out, "<line class=\"axis\" x1=\"", Px(kLeft), "\" x2=\"", Px(kLeft), "\" y1=\"", Px(kTop),
                    "\" y2=\"", Px(kTop + plot_h), "\"/><line class=\"axis\" x1=\"", Px(kLeft), "\" x2=\"",
                    Px(kWidth - kRight), "\" y1=\"", Px(kTop + plot_h), "\" y2=\"", Px(kTop + plot_h), "\"/>\n");
    // Legend, in one row under the group labels (wraps to a second).
    double lx = kLeft, ly = kHeight - 18;
    for (const std::string& s : series) {
      bool used = false;
      for (const ChartPoint& p : c.points) used = used || p.series == s;
      if (!used) continue;
      const double item_w = 22 + 7.0 * static_cast<double>(s.size());
      if (lx + item_w > kWidth - kRight) {
        lx = kLeft;
        ly = std::min(ly + 14, kHeight - 4);  // a second row; a third would overlap it (>20 series)
      }
      absl::StrAppend(&out, "<g class=\"legend-item\" data-series=\"", HtmlEscape(s), "\"><rect class=\"swatch\" x=\"",
                      Px(lx), "\" y=\"", Px(ly - 9), "\" width=\"10\" height=\"10\" fill=\"", SeriesColor(s),
                      "\"/><text class=\"legend\" x=\"", Px(lx + 14), "\" y=\"", Px(ly), "\">", HtmlEscape(s),
                      "</text></g>\n");
      lx += item_w;
    }
    absl::StrAppend(&out, "</svg>\n");
  }
  if (!c.notes.empty()) {
    absl::StrAppend(&out, "<ul class=\"chart-notes\">\n");
    for (const std::string& n : c.notes) absl::StrAppend(&out, "<li>", HtmlEscape(n), "</li>\n");
    absl::StrAppend(&out, "</ul>\n");
  }
  absl::StrAppend(&out, "</figure>\n");
  return out;
}

}  // namespace medprof::client::report
