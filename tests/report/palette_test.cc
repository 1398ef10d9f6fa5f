// The report's palette: every colour pair stays apart for normal vision and under simulated
// colour-vision deficiencies, and every category, stall reason and preset has its own colour.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "client/report/svg_chart.h"
#include "common/kernel_taxonomy.h"
#include "common/workload_config.h"

namespace medprof::client::report {
namespace {

using Vec = std::array<double, 3>;
using Mat = std::array<Vec, 3>;

double ToLinear(int c) {
  const double v = c / 255.0;
  return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4);
}

Vec LinearRgb(const std::string& hex) {
  const int v = std::stoi(hex.substr(1), nullptr, 16);
  return {ToLinear((v >> 16) & 255), ToLinear((v >> 8) & 255), ToLinear(v & 255)};
}

Vec Apply(const Mat& m, const Vec& v) {
  Vec out{};
  for (int i = 0; i < 3; ++i) out[i] = m[i][0] * v[0] + m[i][1] * v[1] + m[i][2] * v[2];
  return out;
}

// CIELAB (D65) of a linear sRGB colour.
Vec Lab(const Vec& rgb) {
  const Mat kToXyz = {{{0.4124, 0.3576, 0.1805}, {0.2126, 0.7152, 0.0722}, {0.0193, 0.1192, 0.9505}}};
  Vec xyz = Apply(kToXyz, rgb);
  xyz[0] /= 0.95047;
  xyz[2] /= 1.08883;
  auto f = [](double t) { return t > 0.008856 ? std::cbrt(t) : 7.787 * t + 16.0 / 116; };
  return {116 * f(xyz[1]) - 16, 500 * (f(xyz[0]) - f(xyz[1])), 200 * (f(xyz[1]) - f(xyz[2]))};
}

// Machado, Oliveira, Fernandes 2009, severity 1.0 (linear RGB).
const std::vector<Mat>& Vision() {
  static const std::vector<Mat> kVision = {
      {{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}},
      {{{0.152286, 1.052583, -0.204868}, {0.114503, 0.786281, 0.099216}, {-0.003882, -0.048116, 1.051998}}},
      {{{0.367322, 0.860646, -0.227968}, {0.280085, 0.672501, 0.047413}, {-0.011820, 0.042940, 0.968881}}},
      {{{1.255528, -0.076749, -0.178779}, {-0.078411, 0.930809, 0.147602}, {0.004733, 0.691367, 0.303900}}},
  };
  return kVision;
}

// The smallest CIE76 distance of two colours over normal, protan, deutan and tritan vision.
double MinDistance(const std::string& a, const std::string& b) {
  double best = 1e9;
  for (const Mat& m : Vision()) {
    const Vec la = Lab(Apply(m, LinearRgb(a))), lb = Lab(Apply(m, LinearRgb(b)));
    best = std::min(best, std::hypot(la[0] - lb[0], la[1] - lb[1], la[2] - lb[2]));
  }
  return best;
}

TEST(Palette, PairsStayApartForEveryVision) {
  const std::vector<std::string>& p = Palette();
  ASSERT_EQ(p.size(), 19u);
  for (size_t i = 0; i < p.size(); ++i) {
    for (size_t j = i + 1; j < p.size(); ++j) {
      const double d = MinDistance(p[i], p[j]);
      EXPECT_GE(d, 10.0) << p[i] << " vs " << p[j];
      if (j < 12) EXPECT_GE(d, 14.0) << p[i] << " vs " << p[j];
    }
  }
  // The pairs the issue found: the old reduction and memset colours were 3 apart.
  EXPECT_LT(MinDistance("#76b7b2", "#86bcb6"), 5.0);
}

void ExpectOwnColors(const std::vector<std::string>& names) {
  std::set<std::string> colors;
  for (const std::string& n : names) {
    const std::optional<std::string> c = FixedSeriesColor(n);
    ASSERT_TRUE(c.has_value()) << n;
    EXPECT_TRUE(colors.insert(*c).second) << n << " shares " << *c;
  }
}

TEST(Palette, EveryCategoryStallReasonAndPresetHasItsOwnColour) {
  std::vector<std::string> categories;
  for (taxonomy::Category c : taxonomy::AllCategories()) categories.emplace_back(taxonomy::CategoryName(c));
  EXPECT_EQ(categories.size(), 12u);
  ExpectOwnColors(categories);
  ExpectOwnColors({"long_scoreboard", "math_pipe_throttle", "branch_resolving", "short_scoreboard", "mio_throttle",
                   "lg_throttle", "wait", "barrier", "not_selected", "selected", "no_instruction", "dispatch_stall",
                   "tex_throttle", "drain", "imc_miss", "membar", "misc", "sleeping", "gmma"});
  ExpectOwnColors(config::PresetNames());
  EXPECT_EQ(FixedSeriesColor("no_instructions"), FixedSeriesColor("no_instruction"));
  EXPECT_FALSE(FixedSeriesColor("NVIDIA H200").has_value());
}

TEST(Palette, AChartNeverRepeatsAColourWithinThePalette) {
  std::vector<std::string> series = {"conv", "long_scoreboard", "NVIDIA H200", "NVIDIA A100", "baseline"};
  // conv, long_scoreboard and baseline share the fixed colour 0: the later ones take free colours.
  const std::map<std::string, std::string> colors = ChartColors(series);
  std::set<std::string> distinct;
  for (const auto& [s, c] : colors) distinct.insert(c);
  EXPECT_EQ(distinct.size(), series.size());
  EXPECT_EQ(colors.at("conv"), Palette()[0]);
}

}  // namespace
}  // namespace medprof::client::report
