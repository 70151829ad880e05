// A small SVG writer for the examples' pictures: grids of labelled heatmaps (attention maps, one
// panel per head) and line charts (loss curves). Plain text out, no dependency; any browser
// shows the files. Not part of the library.
//
//   svg::HeatmapGrid grid;
//   grid.title = "MultiHeadAttention: attention weights";
//   grid.panels.push_back({"head 0", values, 6, 6, tokens, tokens});
//   svg::write_file("attention.svg", svg::heatmap_grid(grid));
//
//   svg::LineChart chart{"loss", "step", "cross-entropy", {{"train", steps, losses}}};
//   svg::write_file("loss.svg", svg::line_chart(chart));
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/autograd/explore.h"
#include "core/io/safetensors.h"

namespace ember::examples::svg {

// ---- text helpers ----

// s escaped for XML text and attributes (& < > " ', the core's HTML escaping: the same rules).
inline std::string escape(const std::string& s) { return autograd::page::escape_html(s); }

// A number with `digits` significant digits, without trailing zeros ("0.5", "1200", "1e-05").
inline std::string num(double v, int digits = 4) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

// A coordinate, to 0.1 px ("12", "12.5").
inline std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s == "-0" ? "0" : s;
}

// Through Ember's file writer: every write and the close checked (a full disk is an
// ember::Error), and a temporary file renamed over `path` only when complete.
inline void write_file(const std::string& path, const std::string& text) {
  ember::detail::write_file(path, text, "svg");
}

// ---- colours ----

// Viridis (perceptually uniform, readable in grey and by colour-blind readers), sampled at
// 9 points and interpolated; t in [0, 1] (clamped).
inline std::array<int, 3> viridis(double t) {
  static constexpr std::array<std::array<int, 3>, 9> stops = {{{68, 1, 84},
                                                               {71, 44, 122},
                                                               {59, 81, 139},
                                                               {44, 113, 142},
                                                               {33, 144, 141},
                                                               {39, 173, 129},
                                                               {92, 200, 99},
                                                               {170, 220, 50},
                                                               {253, 231, 37}}};
  if (!(t > 0)) t = 0;  // also NaN
  if (t > 1) t = 1;
  const double pos = t * (stops.size() - 1);
  const std::size_t i = std::min<std::size_t>(static_cast<std::size_t>(pos), stops.size() - 2);
  const double f = pos - static_cast<double>(i);
  std::array<int, 3> c{};
  for (int k = 0; k < 3; ++k) {
    c[k] = static_cast<int>(std::lround(stops[i][k] + (stops[i + 1][k] - stops[i][k]) * f));
  }
  return c;
}

// "#440154"
inline std::string rgb(const std::array<int, 3>& c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c[0] & 0xff, c[1] & 0xff, c[2] & 0xff);
  return buf;
}

// Black text on light cells, white on dark ones.
inline const char* text_colour_on(const std::array<int, 3>& c) {
  const double luminance = 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2];
  return luminance > 140 ? "#000" : "#fff";
}

// A series colour (Tableau 10).
inline const char* palette(std::size_t i) {
  static const char* colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return colours[i % 10];
}

// About `count` round tick values covering [lo, hi] (1, 2 or 5 times a power of ten apart).
inline std::vector<double> nice_ticks(double lo, double hi, int count = 6) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, count - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double multiple = 1;  // step = multiple * mag, with multiple 1, 2, 5 or 10
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    multiple = m;
    if (m * mag >= raw) break;
  }
  const double step = multiple * mag;
  // Each tick as (integer * multiple) scaled by the power of ten, dividing for negative powers,
  // so 0.6 prints as 0.6 and not 0.6000000000000001.
  auto tick = [&](double k) { return mag < 1 ? k * multiple / std::round(1 / mag) : k * step; };
  std::vector<double> ticks;
  for (double k = std::ceil(lo / step - 1e-9); tick(k) <= hi + step * 1e-9; ++k) {
    ticks.push_back(k == 0 ? 0.0 : tick(k));
  }
  return ticks;
}

// ---- heatmaps ----

struct Heatmap {
  std::string title;           // above the panel, e.g. "head 0"
  std::vector<double> values;  // rows * cols, row-major
  int rows = 0, cols = 0;
  std::vector<std::string> row_labels;  // one per row (left), e.g. the query tokens
  std::vector<std::string> col_labels;  // one per column (below, rotated), e.g. the key tokens
};

struct HeatmapGrid {
  std::string title;
  std::string subtitle;  // a second line under the title (what the rows/cols mean)
  std::vector<Heatmap> panels;
  int columns = 0;            // panels per row (0: all in one row)
  double vmin = 0, vmax = 1;  // the colour scale's range
  std::string scale_label = "attention weight";
  int show_values = -1;  // print each cell's value: 1 yes, 0 no, -1 when cells are big
  double cell = 0;       // cell size in px (0: chosen from the map size)
  // Row titles at the left of each row of panels (optional, one per row of panels).
  std::vector<std::string> row_titles;
};

// The grid as an SVG document; throws std::invalid_argument when a panel's values are not its
// rows x cols.
std::string heatmap_grid(const HeatmapGrid& g);

// ---- line charts ----

struct Series {
  std::string name;  // in the legend
  std::vector<double> x, y;
};

struct LineChart {
  std::string title;
  std::string x_label, y_label;
  std::vector<Series> series;
  bool log_y = false;  // a logarithmic y axis (losses spanning decades)
  double width = 640, height = 400;
};

// A second x axis along the top (matplotlib's twiny), linear in x: `at_xmin` and `at_xmax` are
// its values at the data's smallest and largest x (the book's "Tokens seen" over "Epochs").
struct TopAxis {
  std::string label;
  double at_xmin = 0, at_xmax = 1;
};

// The chart as an SVG document, with `top_axis` along the top when given; throws
// std::invalid_argument when a series' x and y differ in length.
std::string line_chart(const LineChart& chart,
                       const std::optional<TopAxis>& top_axis = std::nullopt);

}  // namespace ember::examples::svg
