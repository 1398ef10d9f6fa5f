// The report's roofline charts (issue 17): one log-log chart per GPU x preset x phase, kernels as
// points (sized by their share of the kernel time, coloured by category, the kernel in the hover
// title), the phase ranges as diamonds, the ceilings as labelled lines — measured solid, datasheet
// dashed. x is the arithmetic intensity at DRAM (FLOP/byte), y the achieved FLOP/s; memory roofs
// are the slanted lines bytes/s x intensity, compute roofs horizontal.
//
// The contract the report test checks in the rendered DOM: a chart with points is
//   <svg class="roofline-svg" data-chart="<id>" data-points="N" data-x-scale="log" data-y-scale="log">
// with exactly N elements of class "mark" (a <circle> per kernel, data-series = its category,
// data-point = the kernel), one <text class="ceiling-label" data-ceiling="<name>" data-kind=
// "measured|datasheet"> per drawn ceiling, and decade ticks of class "tick"; phase diamonds are
// class "phase-mark", never "mark". Without points: the "not collected: <reason>" panel of
// svg_chart.h. Kernels without FLOPs or DRAM bytes (copies, layout transforms) cannot sit on log
// axes: the notes under the chart count them.
//
// Pure; thread-safe. All text is HTML-escaped here.
#pragma once

#include <string>
#include <vector>

namespace medprof::client::report {

struct RooflineCeilingLine {
  std::string name;      // workload.proto Ceiling.name: "dram" (slanted) or a FLOP class (horizontal)
  double measured = 0;   // per second; 0 = not measured
  double datasheet = 0;  // per second; 0 = not in the table
};

struct RooflineMark {
  std::string label;     // the kernel (or phase) name
  std::string category;  // taxonomy category (kernels)
  double intensity = 0;  // FLOP per DRAM byte, > 0
  double flop_per_s = 0; // > 0
  double time_share = 0; // 0..1 of the cell's kernel time (kernels)
  std::string bound;     // "memory-bound at 62 % of DRAM roof" ("" when unplaced)
};

struct RooflineChartSpec {
  std::string id;     // data-chart, e.g. "roofline-1"
  std::string title;  // e.g. "Roofline · NVIDIA H200 · opt1 · train (run r-12)"
  std::vector<RooflineCeilingLine> ceilings;
  std::vector<RooflineMark> kernels;
  std::vector<RooflineMark> phases;
  std::string not_collected;       // non-empty (or no kernels): the panel instead
  std::vector<std::string> notes;  // under the chart
};

// The <figure> with the chart or the panel, and its notes.
std::string RenderRooflineChart(const RooflineChartSpec& chart);

}  // namespace medprof::client::report
