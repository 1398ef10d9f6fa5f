#include "client/report/roofline_chart.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/svg_chart.h"
#include "common/roofline.h"

namespace medprof::client::report {
namespace {

constexpr double kLeft = 76, kTop = 20, kPlotW = 600, kPlotH = 360, kBottom = 46;
constexpr double kCharWidth = 7.0, kRowHeight = 16, kLabelGap = 13;

std::string Px(double v) { return absl::StrFormat("%.2f", v); }
double TextWidth(const std::string& s) { return kCharWidth * static_cast<double>(s.size()); }
bool IsMemory(const std::string& name) { return name == "dram" || name == "l2" || name == "l1"; }

// Decade bounds [lo, hi] (powers of ten) around `values` (all > 0).
std::pair<int, int> Decades(const std::vector<double>& values) {
  double lo = INFINITY, hi = 0;
  for (double v : values) {
    if (v > 0 && std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (!(hi > 0)) return {0, 1};
  int a = static_cast<int>(std::floor(std::log10(lo))), b = static_cast<int>(std::ceil(std::log10(hi * 1.15)));
  if (b <= a) b = a + 1;
  return {a, b};
}

// Log-log plot coordinates.
struct Axes {
  std::pair<int, int> x, y;
  double X(double v) const { return kLeft + (std::log10(v) - x.first) / (x.second - x.first) * kPlotW; }
  double Y(double v) const { return kTop + kPlotH - (std::log10(v) - y.first) / (y.second - y.first) * kPlotH; }
};

// One drawn ceiling line and its label.
struct Line {
  std::string name, kind, text, color;
  double x1, y1, x2, y2;  // in plot coordinates
};

// Ceiling colours: dark and apart from the category colours of the points (svg_chart.h's palette).
std::string CeilingColor(const std::string& name) {
  static const std::map<std::string, std::string> kColors = {
      {"dram", "#000000"},        {"l2", "#000000"},        {"l1", "#000000"},
      {"fp32", "#AA3377"},        {"fp16", "#777777"},      {"bf16", "#777777"},
      {"fp64", "#555599"},        {"tensor_tf32", "#CC3311"}, {"tensor_fp16", "#997700"},
      {"tensor_bf16", "#117733"}, {"tensor_fp8", "#0077BB"}};
  auto it = kColors.find(name);
  return it == kColors.end() ? "#444444" : it->second;
}

std::string RateText(const std::string& name, double v) {
  return IsMemory(name) ? absl::StrFormat("%.2f TB/s", v / 1e12) : absl::StrFormat("%.0f TFLOP/s", v / 1e12);
}

// The lines of the ceilings that can be drawn on DRAM intensity: DRAM (slanted) and the FLOP classes.
std::vector<Line> Lines(const std::vector<RooflineCeilingLine>& ceilings, const Axes& a) {
  std::vector<Line> out;
  const double xmin = std::pow(10.0, a.x.first), xmax = std::pow(10.0, a.x.second);
  const double ymin = std::pow(10.0, a.y.first), ymax = std::pow(10.0, a.y.second);
  for (const RooflineCeilingLine& c : ceilings) {
    if (IsMemory(c.name) && c.name != "dram") continue;
    const std::string color = CeilingColor(c.name);
    for (const auto& [kind, v] : {std::pair<std::string, double>{"measured", c.measured}, {"datasheet", c.datasheet}}) {
      if (!(v > 0)) continue;
      Line l{c.name, kind, absl::StrCat(roofline::RoofLabel(c.name), " ", RateText(c.name, v), kind == "datasheet" ? " (datasheet)" : ""),
             color, 0, 0, 0, 0};
      if (IsMemory(c.name)) {
        double x1 = std::max(xmin, ymin / v), x2 = std::min(xmax, ymax / v);
        if (x2 <= x1) continue;
        l.x1 = a.X(x1), l.y1 = a.Y(v * x1), l.x2 = a.X(x2), l.y2 = a.Y(v * x2);
      } else {
        if (v < ymin || v > ymax) continue;
        l.x1 = a.X(xmin), l.y1 = l.y2 = a.Y(v), l.x2 = a.X(xmax);
      }
      out.push_back(std::move(l));
    }
  }
  return out;
}

std::string Ticks(const Axes& a) {
  std::string out;
  for (int k = a.x.first; k <= a.x.second; ++k) {
    const double x = a.X(std::pow(10.0, k));
    absl::StrAppend(&out, "<line class=\"grid\" x1=\"", Px(x), "\" y1=\"", Px(kTop), "\" x2=\"", Px(x), "\" y2=\"",
                    Px(kTop + kPlotH), "\"/>\n<text class=\"tick\" x=\"", Px(x), "\" y=\"", Px(kTop + kPlotH + 18),
                    "\" text-anchor=\"middle\">1e", k, "</text>\n");
  }
  for (int k = a.y.first; k <= a.y.second; ++k) {
    const double y = a.Y(std::pow(10.0, k));
    absl::StrAppend(&out, "<line class=\"grid\" x1=\"", Px(kLeft), "\" y1=\"", Px(y), "\" x2=\"", Px(kLeft + kPlotW),
                    "\" y2=\"", Px(y), "\"/>\n<text class=\"tick\" x=\"", Px(kLeft - 6), "\" y=\"", Px(y + 4),
                    "\" text-anchor=\"end\">1e", k, "</text>\n");
  }
  absl::StrAppend(&out, "<rect class=\"axis\" fill=\"none\" x=\"", Px(kLeft), "\" y=\"", Px(kTop), "\" width=\"",
                  Px(kPlotW), "\" height=\"", Px(kPlotH), "\"/>\n");
  absl::StrAppend(&out, "<text class=\"axis-label\" x=\"", Px(kLeft + kPlotW / 2), "\" y=\"", Px(kTop + kPlotH + 36),
                  "\" text-anchor=\"middle\">arithmetic intensity (FLOP per DRAM byte, log)</text>\n");
  absl::StrAppend(&out, "<text class=\"axis-label\" transform=\"translate(16 ", Px(kTop + kPlotH / 2),
                  ") rotate(-90)\" text-anchor=\"middle\">achieved FLOP/s (log)</text>\n");
  return out;
}

// Lines, then their labels in the right column, pushed apart so none overlap.
std::string Ceilings(std::vector<Line> lines) {
  std::string out;
  for (const Line& l : lines) {
    absl::StrAppend(&out, "<line class=\"ceiling ", l.kind, "\" data-ceiling=\"", HtmlEscape(l.name), "\" x1=\"",
                    Px(l.x1), "\" y1=\"", Px(l.y1), "\" x2=\"", Px(l.x2), "\" y2=\"", Px(l.y2), "\" stroke=\"", l.color,
                    "\" stroke-width=\"2\"", l.kind == "datasheet" ? " stroke-dasharray=\"6 4\"" : "", "/>\n");
  }
  std::sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) { return a.y2 < b.y2; });
  double next = kTop + 10;
  for (Line& l : lines) {
    l.y2 = std::max(l.y2 + 4, next);
    next = l.y2 + kLabelGap;
  }
  const double overflow = lines.empty() ? 0 : lines.back().y2 - (kTop + kPlotH + 4);
  for (const Line& l : lines) {
    absl::StrAppend(&out, "<text class=\"ceiling-label\" data-ceiling=\"", HtmlEscape(l.name), "\" data-kind=\"", l.kind,
                    "\" x=\"", Px(kLeft + kPlotW + 8), "\" y=\"", Px(l.y2 - std::max(0.0, overflow)), "\" fill=\"",
                    l.color, "\">", HtmlEscape(l.text), "</text>\n");
  }
  return out;
}

std::string Title(const RooflineMark& m, bool kernel) {
  std::string t = m.label;
  if (kernel) absl::StrAppend(&t, " · ", m.category, " · ", absl::StrFormat("%.1f", m.time_share * 100), " % of time");
  absl::StrAppend(&t, absl::StrFormat(" · %.3g FLOP/B · %.3g TFLOP/s", m.intensity, m.flop_per_s / 1e12));
  if (!m.bound.empty()) absl::StrAppend(&t, " · ", m.bound);
  return HtmlEscape(t);
}

std::string Marks(std::vector<RooflineMark> kernels, const std::vector<RooflineMark>& phases, const Axes& a,
                  const std::map<std::string, std::string>& colors) {
  std::string out;
  std::sort(kernels.begin(), kernels.end(), [](const auto& x, const auto& y) { return x.time_share > y.time_share; });
  for (const RooflineMark& m : kernels) {
    absl::StrAppend(&out, "<circle class=\"mark\" data-series=\"", HtmlEscape(m.category), "\" data-point=\"",
                    HtmlEscape(m.label), "\" data-value=\"", absl::StrFormat("%.6g", m.flop_per_s),
                    "\" data-intensity=\"", absl::StrFormat("%.6g", m.intensity), "\" cx=\"", Px(a.X(m.intensity)),
                    "\" cy=\"", Px(a.Y(m.flop_per_s)), "\" r=\"", Px(3 + 11 * std::sqrt(std::clamp(m.time_share, 0.0, 1.0))),
                    "\" fill=\"", colors.at(m.category), "\" fill-opacity=\"0.75\" stroke=\"#333\"><title>",
                    Title(m, true), "</title></circle>\n");
  }
  for (const RooflineMark& m : phases) {
    const double x = a.X(m.intensity), y = a.Y(m.flop_per_s);
    absl::StrAppend(&out, "<path class=\"phase-mark\" data-phase=\"", HtmlEscape(m.label), "\" d=\"M", Px(x), " ",
                    Px(y - 7), " L", Px(x + 7), " ", Px(y), " L", Px(x), " ", Px(y + 7), " L", Px(x - 7), " ", Px(y),
                    " Z\" fill=\"none\" stroke=\"#000\" stroke-width=\"2\"><title>phase ", Title(m, false),
                    "</title></path>\n");
  }
  return out;
}

// Category swatches (and the phase diamond) in rows under the plot; returns the rows used.
std::string Legend(const std::vector<std::string>& categories, const std::map<std::string, std::string>& colors,
                   double width, bool phases, int* rows) {
  std::string out;
  double x = kLeft, y = kTop + kPlotH + kBottom + 4;
  *rows = 1;
  std::vector<std::string> items = categories;
  if (phases) items.push_back("phase range");
  for (const std::string& c : items) {
    const double w = 14 + TextWidth(c) + 12;
    if (x + w > width - 4 && x > kLeft) x = kLeft, y += kRowHeight, ++*rows;
    if (c == "phase range") {
      absl::StrAppend(&out, "<path class=\"legend-phase\" d=\"M", Px(x + 5), " ", Px(y), " L", Px(x + 10), " ", Px(y + 5),
                      " L", Px(x + 5), " ", Px(y + 10), " L", Px(x), " ", Px(y + 5), " Z\" fill=\"none\" stroke=\"#000\"/>\n");
    } else {
      absl::StrAppend(&out, "<rect class=\"swatch\" x=\"", Px(x), "\" y=\"", Px(y), "\" width=\"10\" height=\"10\" fill=\"",
                      colors.at(c), "\"/>\n");
    }
    absl::StrAppend(&out, "<text class=\"legend\" x=\"", Px(x + 14), "\" y=\"", Px(y + 9), "\">", HtmlEscape(c), "</text>\n");
    x += w;
  }
  return out;
}

}  // namespace

std::string RenderRooflineChart(const RooflineChartSpec& c) {
  const std::string id = HtmlEscape(c.id);
  std::string out = absl::StrCat("<figure class=\"chart\" id=\"chart-", id, "\" data-chart-figure=\"", id, "\">\n",
                                 "<figcaption>", HtmlEscape(c.title), "</figcaption>\n");
  if (!c.not_collected.empty() || c.kernels.empty()) {
    const std::string reason = c.not_collected.empty() ? "no kernel with FLOP and DRAM byte counters" : c.not_collected;
    absl::StrAppend(&out, "<div class=\"not-collected\" data-chart=\"", id, "\" data-reason=\"", HtmlEscape(reason),
                    "\">not collected: ", HtmlEscape(reason), "</div>\n");
  } else {
    std::vector<double> xs, ys;
    for (const auto* marks : {&c.kernels, &c.phases}) {
      for (const RooflineMark& m : *marks) xs.push_back(m.intensity), ys.push_back(m.flop_per_s);
    }
    double dram = 0;
    for (const RooflineCeilingLine& l : c.ceilings) {
      if (l.name == "dram") dram = std::max(l.measured, l.datasheet);
    }
    for (const RooflineCeilingLine& l : c.ceilings) {
      if (IsMemory(l.name)) continue;
      for (double v : {l.measured, l.datasheet}) {
        if (v > 0) ys.push_back(v);
        if (v > 0 && dram > 0) xs.push_back(v / dram);  // the ridge point
      }
    }
    Axes a{Decades(xs), Decades(ys)};
    std::vector<std::string> categories;
    for (const RooflineMark& m : c.kernels) {
      if (std::find(categories.begin(), categories.end(), m.category) == categories.end()) categories.push_back(m.category);
    }
    const std::map<std::string, std::string> colors = ChartColors(categories);
    const std::vector<Line> lines = Lines(c.ceilings, a);
    double label_w = 120;
    for (const Line& l : lines) label_w = std::max(label_w, TextWidth(l.text) + 16);
    const double width = kLeft + kPlotW + label_w;
    int rows = 0;
    const std::string legend = Legend(categories, colors, width, !c.phases.empty(), &rows);
    const double height = kTop + kPlotH + kBottom + 8 + rows * kRowHeight;
    absl::StrAppend(&out, "<svg class=\"roofline-svg\" id=\"svg-", id, "\" data-chart=\"", id, "\" data-points=\"",
                    c.kernels.size(), "\" data-x-scale=\"log\" data-y-scale=\"log\" xmlns=\"http://www.w3.org/2000/svg\" "
                    "viewBox=\"0 0 ", Px(width), " ", Px(height), "\" width=\"", Px(width), "\" height=\"", Px(height),
                    "\" role=\"img\" aria-label=\"", HtmlEscape(c.title), "\">\n", Ticks(a), Ceilings(lines),
                    Marks(c.kernels, c.phases, a, colors), legend, "</svg>\n");
  }
  absl::StrAppend(&out, FigureEnd(c.notes));
  return out;
}

}  // namespace medprof::client::report
