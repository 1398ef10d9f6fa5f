#include "client/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace medprof::client::report {
namespace {

constexpr double kHeight = 300;     // the plot area and its axis, without labels and legend
constexpr double kLeft = 64;
constexpr double kRight = 16;
constexpr double kTop = 16;
constexpr double kMinWidth = 360;
constexpr double kMaxWidth = 1160;
constexpr double kCharWidth = 7.0;  // a generous average advance of 11 px system-ui text
constexpr double kBarWidth = 30;
constexpr double kStackWidth = 56;
constexpr double kRowHeight = 16;

std::string Num(double v) { return absl::StrFormat("%.6g", v); }
std::string Px(double v) { return absl::StrFormat("%.2f", v); }
double TextWidth(const std::string& s) { return kCharWidth * static_cast<double>(s.size()); }

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

// Group label lines: split on " · " into at most two.
std::pair<std::string, std::string> LabelLines(const std::string& label) {
  const size_t sep = label.find(" \xC2\xB7 ");
  if (sep == std::string::npos) return {label, ""};
  return {label.substr(0, sep), label.substr(sep + 4)};
}

// The series of `group` that have a point there, in series order.
std::vector<std::string> PresentIn(const ChartSpec& c, const std::vector<std::string>& series, const std::string& group) {
  std::vector<std::string> present;
  for (const std::string& s : series) {
    for (const ChartPoint& q : c.points) {
      if (q.group == group && q.series == s) {
        present.push_back(s);
        break;
      }
    }
  }
  return present;
}

}  // namespace

const std::vector<std::string>& Palette() {
  // Chosen from Paul Tol's bright, vibrant, muted and dark sets and Okabe-Ito so that every pair
  // stays at least CIELAB dE 10 apart for normal vision and under simulated protanopia,
  // deuteranopia and tritanopia (Machado 2009, severity 1), greedily; the first 12 at least 14.
  static const std::vector<std::string> kPalette = {
      "#4477AA", "#D55E00", "#009988", "#F0E442", "#EE3377", "#66CCEE", "#882255", "#EE8866", "#666633", "#332288",
      "#663333", "#DDDDDD", "#CCBB44", "#999933", "#E69F00", "#BBBBBB", "#33BBEE", "#CC3311", "#AA4499"};
  return kPalette;
}

std::optional<std::string> FixedSeriesColor(const std::string& series) {
  const std::vector<std::string>& p = Palette();
  static const std::map<std::string, size_t> kFixed = {
      // presets
      {"baseline", 0}, {"opt1", 1}, {"opt2", 2}, {"opt12", 4}, {"bf16", 5}, {"opt3", 6},
      // taxonomy categories, in taxonomy order
      {"conv", 0}, {"gemm", 1}, {"norm", 2}, {"elementwise", 3}, {"layout", 4}, {"copy", 5}, {"reduction", 6},
      {"softmax", 7}, {"optimizer", 8}, {"upsample", 9}, {"memset", 10}, {"other", 11},
      // warp-stall reasons (metric_catalog order)
      {"long_scoreboard", 0}, {"math_pipe_throttle", 1}, {"branch_resolving", 2}, {"short_scoreboard", 3},
      {"mio_throttle", 4}, {"lg_throttle", 5}, {"wait", 6}, {"barrier", 7}, {"not_selected", 8}, {"selected", 9},
      {"no_instruction", 10}, {"no_instructions", 10}, {"dispatch_stall", 12}, {"tex_throttle", 13}, {"drain", 14},
      {"imc_miss", 15}, {"membar", 16}, {"misc", 17}, {"sleeping", 18}, {"gmma", 11},
      // metric series: each chart's own pair or triple
      {"tensor_pipe_pct", 0}, {"fma_pipe_pct", 1}, {"sm_cycles_ratio", 0}, {"warp_instructions_ratio", 1},
      {"l1_hit_pct", 0}, {"l2_hit_pct", 1}, {"dram_throughput_pct", 2},
  };
  auto it = kFixed.find(series);
  if (it == kFixed.end()) return std::nullopt;
  return p[it->second];
}

std::map<std::string, std::string> ChartColors(const std::vector<std::string>& series) {
  std::map<std::string, std::string> out;
  std::set<std::string> used;
  for (const std::string& s : series) {
    if (auto fixed = FixedSeriesColor(s); fixed && !used.count(*fixed)) {
      out[s] = *fixed;
      used.insert(*fixed);
    }
  }
  for (const std::string& s : series) {
    if (out.count(s)) continue;
    std::string color = "#777777";  // only past 19 series
    for (const std::string& p : Palette()) {
      if (!used.count(p)) {
        color = p;
        break;
      }
    }
    out[s] = color;
    used.insert(color);
  }
  return out;
}

std::string FigureEnd(const std::vector<std::string>& notes) {
  std::string out;
  if (!notes.empty()) {
    absl::StrAppend(&out, "<ul class=\"chart-notes\">\n");
    for (const std::string& n : notes) absl::StrAppend(&out, "<li>", HtmlEscape(n), "</li>\n");
    absl::StrAppend(&out, "</ul>\n");
  }
  absl::StrAppend(&out, "</figure>\n");
  return out;
}

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

namespace {

struct Layout {
  double width = 0, height = 0, plot_h = 0;
  std::vector<double> band_x, band_w;  // per group: left edge and width
  bool n_row = false;                  // a row of "n=" labels under the bars
  std::vector<std::pair<double, double>> legend_xy;  // per legend item: swatch x, text baseline y
};

// Sizes the chart to its content: each group as wide as its bars or its label, the legend
// wrapped into as many rows as it needs, the SVG as tall as all of it.
Layout LayOut(const ChartSpec& c, const std::vector<std::string>& series, const std::vector<std::string>& groups,
              const std::vector<std::string>& legend) {
  Layout l;
  l.plot_h = kHeight - kTop;
  for (const ChartPoint& p : c.points) l.n_row = l.n_row || !p.below.empty();
  double x = kLeft;
  for (const std::string& g : groups) {
    const auto [l1, l2] = LabelLines(g);
    const double bars = c.kind == ChartKind::kStacked
                            ? kStackWidth
                            : kBarWidth * static_cast<double>(std::max<size_t>(1, PresentIn(c, series, g).size()));
    const double w = std::max(bars, std::max(TextWidth(l1), TextWidth(l2))) + 16;
    l.band_x.push_back(x);
    l.band_w.push_back(w);
    x += w;
  }
  l.width = std::clamp(x + kRight, kMinWidth, kMaxWidth);
  if (x + kRight != l.width && x > kLeft) {  // too many groups: squeeze them; too few: widen them
    const double scale = (l.width - kLeft - kRight) / (x - kLeft);
    for (size_t i = 0; i < groups.size(); ++i) {
      l.band_x[i] = kLeft + (l.band_x[i] - kLeft) * scale;
      l.band_w[i] *= scale;
    }
  }
  const double axis_y = kTop + l.plot_h;
  const double labels_bottom = axis_y + (l.n_row ? 14 : 0) + 32;
  double lx = kLeft, ly = labels_bottom + 14;
  for (const std::string& s : legend) {
    const double item_w = 14 + TextWidth(s) + 12;
    if (lx > kLeft && lx + item_w > l.width - kRight) {
      lx = kLeft;
      ly += kRowHeight;
    }
    l.legend_xy.emplace_back(lx, ly);
    lx += item_w;
  }
  l.height = (legend.empty() ? labels_bottom : ly) + 8;
  return l;
}

}  // namespace

std::string RenderSvg(const ChartSpec& c, const std::vector<std::string>& series, const std::vector<std::string>& groups) {
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

  std::vector<std::string> legend;
  for (const std::string& s : series) {
    for (const ChartPoint& p : c.points) {
      if (p.series == s) {
        legend.push_back(s);
        break;
      }
    }
  }
  const std::map<std::string, std::string> colors = ChartColors(legend);
  const Layout l = LayOut(c, series, groups, legend);
  const double axis_y = kTop + l.plot_h;
  auto y_of = [&](double v) { return kTop + l.plot_h * (1.0 - std::clamp(v, 0.0, top) / top); };
  const std::string id = HtmlEscape(c.id);
  std::string out = absl::StrCat("<svg class=\"chart-svg\" id=\"svg-", id, "\" data-chart=\"", id, "\" data-points=\"",
                                 c.points.size(), "\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 ", Num(l.width),
                                 " ", Num(l.height), "\" width=\"", Num(l.width), "\" height=\"", Num(l.height),
                                 "\" role=\"img\" aria-label=\"", HtmlEscape(c.title), "\">\n");
  for (int i = 0; i <= 5; ++i) {
    const double v = top * i / 5.0;
    const double y = y_of(v);
    absl::StrAppend(&out, "<line class=\"grid\" x1=\"", Px(kLeft), "\" x2=\"", Px(l.width - kRight), "\" y1=\"", Px(y),
                    "\" y2=\"", Px(y), "\"/><text class=\"tick\" x=\"", Px(kLeft - 6), "\" y=\"", Px(y + 4),
                    "\" text-anchor=\"end\">",
                    HtmlEscape(c.unit == "share" ? absl::StrFormat("%.0f%%", v * 100) : absl::StrFormat("%.4g", v)),
                    "</text>\n");
  }
  absl::StrAppend(&out, "<text class=\"axis-label\" transform=\"translate(14,", Px(kTop + l.plot_h / 2),
                  ") rotate(-90)\" text-anchor=\"middle\">", HtmlEscape(c.y_label), "</text>\n");
  const double label_y = axis_y + (l.n_row ? 14 : 0) + 16;
  for (size_t g = 0; g < groups.size(); ++g) {
    const double x = l.band_x[g] + l.band_w[g] / 2;
    const auto [l1, l2] = LabelLines(groups[g]);
    absl::StrAppend(&out, "<text class=\"group-label\" x=\"", Px(x), "\" y=\"", Px(label_y), "\" text-anchor=\"middle\">",
                    HtmlEscape(l1), "</text>\n");
    if (!l2.empty()) {
      absl::StrAppend(&out, "<text class=\"group-label\" x=\"", Px(x), "\" y=\"", Px(label_y + 14),
                      "\" text-anchor=\"middle\">", HtmlEscape(l2), "</text>\n");
    }
  }
  std::map<std::string, double> stack_base;
  for (const ChartPoint& p : c.points) {
    const size_t g = static_cast<size_t>(std::find(groups.begin(), groups.end(), p.group) - groups.begin());
    const double center = l.band_x[g] + l.band_w[g] / 2;
    double x = 0, w = 0, y0 = 0, y1 = 0;
    if (c.kind == ChartKind::kStacked) {
      w = std::min(kStackWidth, l.band_w[g] - 8);
      x = center - w / 2;
      const double base = stack_base[p.group];
      const double v = std::max(0.0, p.value);
      y0 = y_of(base);
      y1 = y_of(base + v);
      stack_base[p.group] = base + v;
    } else {
      const std::vector<std::string> present = PresentIn(c, series, p.group);
      const size_t k = static_cast<size_t>(std::find(present.begin(), present.end(), p.series) - present.begin());
      w = std::min(kBarWidth, (l.band_w[g] - 8) / static_cast<double>(std::max<size_t>(1, present.size())));
      x = center - w * static_cast<double>(present.size()) / 2.0 + w * static_cast<double>(k);
      y0 = y_of(0);
      y1 = y_of(std::max(0.0, p.value));
    }
    const std::string tooltip =
        p.tooltip.empty() ? absl::StrCat(p.series, " \xC2\xB7 ", p.group, ": ", ValueText(p.value, c.unit)) : p.tooltip;
    absl::StrAppend(&out, "<rect class=\"mark\" data-series=\"", HtmlEscape(p.series), "\" data-point=\"",
                    HtmlEscape(p.group), "\" data-value=\"", Num(p.value), "\" x=\"", Px(x + 1), "\" y=\"", Px(y1),
                    "\" width=\"", Px(std::max(1.0, w - 2)), "\" height=\"", Px(std::max(0.0, y0 - y1)), "\" fill=\"",
                    colors.at(p.series), "\"><title>", HtmlEscape(tooltip), "</title></rect>\n");
    if (c.kind == ChartKind::kGrouped && p.low.has_value() && p.high.has_value()) {
      const double cx = x + w / 2, lo = y_of(*p.low), hi = y_of(*p.high);
      absl::StrAppend(&out, "<path class=\"whisker\" d=\"M", Px(cx), " ", Px(lo), "V", Px(hi), "M", Px(cx - 4), " ", Px(lo),
                      "H", Px(cx + 4), "M", Px(cx - 4), " ", Px(hi), "H", Px(cx + 4), "\" fill=\"none\"/>\n");
    }
    if (c.kind == ChartKind::kGrouped && !p.below.empty()) {
      absl::StrAppend(&out, "<text class=\"bar-n\" x=\"", Px(x + w / 2), "\" y=\"", Px(axis_y + 12),
                      "\" text-anchor=\"middle\">", HtmlEscape(p.below), "</text>\n");
    }
  }
  if (c.reference.has_value()) {
    const double y = y_of(*c.reference);
    absl::StrAppend(&out, "<line class=\"reference\" x1=\"", Px(kLeft), "\" x2=\"", Px(l.width - kRight), "\" y1=\"", Px(y),
                    "\" y2=\"", Px(y), "\"/>\n");
  }
  absl::StrAppend(&out, "<line class=\"axis\" x1=\"", Px(kLeft), "\" x2=\"", Px(kLeft), "\" y1=\"", Px(kTop), "\" y2=\"",
                  Px(axis_y), "\"/><line class=\"axis\" x1=\"", Px(kLeft), "\" x2=\"", Px(l.width - kRight), "\" y1=\"",
                  Px(axis_y), "\" y2=\"", Px(axis_y), "\"/>\n");
  for (size_t i = 0; i < legend.size(); ++i) {
    const auto [lx, ly] = l.legend_xy[i];
    absl::StrAppend(&out, "<g class=\"legend-item\" data-series=\"", HtmlEscape(legend[i]), "\"><rect class=\"swatch\" x=\"",
                    Px(lx), "\" y=\"", Px(ly - 9), "\" width=\"10\" height=\"10\" fill=\"", colors.at(legend[i]),
                    "\"/><text class=\"legend\" x=\"", Px(lx + 14), "\" y=\"", Px(ly), "\">", HtmlEscape(legend[i]),
                    "</text></g>\n");
  }
  absl::StrAppend(&out, "</svg>\n");
  return out;
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
    absl::StrAppend(&out, RenderSvg(c, series, groups));
  }
  absl::StrAppend(&out, FigureEnd(c.notes));
  return out;
}

}  // namespace medprof::client::report
