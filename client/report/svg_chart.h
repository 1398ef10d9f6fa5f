// Inline SVG bar charts for the HTML report: grouped bars (one bar per series in each x group)
// and stacked bars (one bar per x group, one segment per series).
//
// The contract the report test checks in the rendered DOM: a chart with data is
//   <svg class="chart-svg" id="svg-<id>" data-chart="<id>" data-points="N" ...>
// holding exactly N elements of class "mark" (a <rect> per point), each with data-series,
// data-point (the x group) and data-value (the value as plotted, "%.6g"); axes, grid lines,
// whiskers and legend swatches are never class "mark". A chart without data is a
//   <div class="not-collected" data-chart="<id>">not collected: <reason></div>
// panel instead of an SVG, so a missing layer never reads as zeros.
//
// Pure functions; thread-safe. All text is HTML-escaped here.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace medprof::client::report {

struct ChartPoint {
  std::string group;   // x group (e.g. "NVIDIA H200 · train")
  std::string series;  // bar colour / legend entry (preset, category, stall reason, metric)
  double value = 0;
  std::optional<double> low, high;  // whisker (e.g. a 95 % interval), grouped charts only
  std::string tooltip;              // <title> text; default "<series> · <group>: <value><unit>"
  std::string below;                // text under the bar (e.g. "n=3"), grouped charts only
};

enum class ChartKind { kGrouped, kStacked };

struct ChartSpec {
  std::string id;       // stable name: data-chart and the element ids derive from it
  std::string title;
  std::string y_label;  // axis label, e.g. "median step time (ms)"
  std::string unit;     // appended to values in tooltips ("ms", "%", "x", "")
  ChartKind kind = ChartKind::kGrouped;
  std::vector<std::string> groups;  // x order; groups without points still get a slot
  std::vector<std::string> series;  // legend and colour order; points of other series are appended
  std::vector<ChartPoint> points;
  std::optional<double> y_max;      // fixed axis top (100 for percentages, 1 for shares)
  std::optional<double> reference;  // dashed horizontal line (1.0 for speedups and ratios)
  std::string not_collected;        // non-empty: render the "not collected: ..." panel instead
  std::vector<std::string> notes;   // shown under the chart (cells without data and why)
};

// The <figure> with the chart (or the panel) and its notes.
std::string RenderChart(const ChartSpec& chart);

// The report's 19 colours (colour-blind safe as far as 19 can be: see the .cc).
const std::vector<std::string>& Palette();
// The fixed colour of a preset, taxonomy category, warp-stall reason or metric series — the same
// in every chart and report — or nullopt for other names (GPUs).
std::optional<std::string> FixedSeriesColor(const std::string& series);
// Colours of one chart's series: the fixed one where it has one, else the first palette colour
// not yet used in the chart, so no two series of a chart share a colour.
std::map<std::string, std::string> ChartColors(const std::vector<std::string>& series);
// The <svg> of a chart with data (RenderChart's inner part): sized to its content — each group
// as wide as its bars or its label, the legend wrapped into as many rows as it needs.
std::string RenderSvg(const ChartSpec& chart, const std::vector<std::string>& series,
                      const std::vector<std::string>& groups);

// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string HtmlEscape(const std::string& text);

// The end of a chart's <figure>: its notes as a list (none: no list), then </figure>.
std::string FigureEnd(const std::vector<std::string>& notes);

}  // namespace medprof::client::report
