// The SVG writer's two pictures (svg.h), compiled once for every example program.
#include "examples/common/svg.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

namespace ember::examples::svg {

std::string heatmap_grid(const HeatmapGrid& g) {
  if (g.panels.empty()) throw std::invalid_argument("svg::heatmap_grid: no panels");
  int max_rows = 0, max_cols = 0;
  std::size_t longest_row_label = 0, longest_col_label = 0;
  for (const Heatmap& h : g.panels) {
    if (static_cast<int>(h.values.size()) != h.rows * h.cols) {
      throw std::invalid_argument("svg::heatmap_grid: panel '" + h.title + "' has " +
                                  std::to_string(h.values.size()) + " values for " +
                                  std::to_string(h.rows) + "x" + std::to_string(h.cols) + " cells");
    }
    max_rows = std::max(max_rows, h.rows);
    max_cols = std::max(max_cols, h.cols);
    for (const auto& l : h.row_labels) longest_row_label = std::max(longest_row_label, l.size());
    for (const auto& l : h.col_labels) longest_col_label = std::max(longest_col_label, l.size());
  }
  const int n = static_cast<int>(g.panels.size());
  const int per_row = g.columns > 0 ? std::min(g.columns, n) : n;
  const int panel_rows = (n + per_row - 1) / per_row;
  const int biggest = std::max(max_rows, max_cols);
  const double cell = g.cell > 0 ? g.cell : std::floor(std::clamp(360.0 / biggest, 14.0, 46.0));
  const bool values = g.show_values == 1 || (g.show_values == -1 && cell >= 30);
  // Hovering a cell shows its tokens and value; left out of big grids to keep files small.
  std::size_t cells = 0;
  for (const Heatmap& h : g.panels) cells += h.values.size();
  const bool tooltips = cells <= 2000;
  const double font = std::clamp(cell * 0.42, 8.0, 13.0);
  const double char_w = font * 0.62;
  const double left_labels = longest_row_label * char_w + 8;
  const double bottom_labels = longest_col_label * char_w * 0.72 + font + 10;  // rotated 45 deg
  const double row_title_w = g.row_titles.empty() ? 0 : 130;
  const double panel_w = left_labels + max_cols * cell + 18;
  const double panel_h = 24 + max_rows * cell + bottom_labels;
  const double header = g.subtitle.empty() ? 40 : 58;
  const double scale_w = 90;
  const double width = row_title_w + per_row * panel_w + scale_w + 10;
  const double height = header + panel_rows * panel_h + 10;

  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << px(width) << "\" height=\""
    << px(height) << "\" viewBox=\"0 0 " << px(width) << " " << px(height)
    << "\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  s << "<text x=\"10\" y=\"24\" font-size=\"17\" font-weight=\"bold\">" << escape(g.title)
    << "</text>\n";
  if (!g.subtitle.empty()) {
    s << "<text x=\"10\" y=\"44\" font-size=\"13\" fill=\"#444\">" << escape(g.subtitle)
      << "</text>\n";
  }
  const double range = g.vmax > g.vmin ? g.vmax - g.vmin : 1;
  // Big grids (no tooltips) draw all cells of one colour as one path: "M x y h c v c h -c z" per
  // cell is a fraction of a <rect> element, which keeps a many-panel picture small.
  std::map<std::string, std::string> cells_of_colour;
  std::ostringstream labels, frames;  // the values and panel borders, drawn over the cells
  for (int p = 0; p < n; ++p) {
    const Heatmap& h = g.panels[static_cast<std::size_t>(p)];
    const int pr = p / per_row, pc = p % per_row;
    const double x0 = row_title_w + pc * panel_w + left_labels;
    const double y0 = header + pr * panel_h + 22;
    if (pc == 0 && pr < static_cast<int>(g.row_titles.size())) {
      s << "<text x=\"10\" y=\"" << px(y0 + h.rows * cell / 2) << "\" font-size=\"13\" "
        << "font-weight=\"bold\" dominant-baseline=\"middle\">"
        << escape(g.row_titles[static_cast<std::size_t>(pr)]) << "</text>\n";
    }
    s << "<text x=\"" << px(x0 + h.cols * cell / 2) << "\" y=\"" << px(y0 - 7)
      << "\" font-size=\"13\" text-anchor=\"middle\">" << escape(h.title) << "</text>\n";
    for (int r = 0; r < h.rows; ++r) {
      for (int c = 0; c < h.cols; ++c) {
        const double v = h.values[static_cast<std::size_t>(r * h.cols + c)];
        const auto colour = viridis((v - g.vmin) / range);
        const double x = x0 + c * cell, y = y0 + r * cell;
        if (tooltips) {
          s << "<rect x=\"" << px(x) << "\" y=\"" << px(y) << "\" width=\"" << px(cell)
            << "\" height=\"" << px(cell) << "\" fill=\"" << rgb(colour) << "\"><title>"
            << escape(r < static_cast<int>(h.row_labels.size()) ? h.row_labels[r] : "") << " -> "
            << escape(c < static_cast<int>(h.col_labels.size()) ? h.col_labels[c] : "") << ": "
            << num(v) << "</title></rect>\n";
        } else {
          std::string& d = cells_of_colour[rgb(colour)];
          for (const std::string& part :
               {std::string("M"), px(x), std::string(" "), px(y), std::string("h"), px(cell),
                std::string("v"), px(cell), std::string("h-"), px(cell), std::string("z")})
            d.append(part);
        }
        if (values) {
          char buf[16];
          std::snprintf(buf, sizeof buf, "%.2f", v);
          labels << "<text x=\"" << px(x + cell / 2) << "\" y=\"" << px(y + cell / 2)
                 << "\" font-size=\"" << px(font * 0.9) << "\" text-anchor=\"middle\" "
                 << "dominant-baseline=\"central\" fill=\"" << text_colour_on(colour) << "\">"
                 << buf << "</text>\n";
        }
      }
    }
    frames << "<rect x=\"" << px(x0) << "\" y=\"" << px(y0) << "\" width=\"" << px(h.cols * cell)
           << "\" height=\"" << px(h.rows * cell) << "\" fill=\"none\" stroke=\"#888\"/>\n";
    for (int r = 0; r < h.rows && r < static_cast<int>(h.row_labels.size()); ++r) {
      s << "<text x=\"" << px(x0 - 5) << "\" y=\"" << px(y0 + (r + 0.5) * cell) << "\" font-size=\""
        << px(font) << "\" text-anchor=\"end\" dominant-baseline=\"central\">"
        << escape(h.row_labels[static_cast<std::size_t>(r)]) << "</text>\n";
    }
    for (int c = 0; c < h.cols && c < static_cast<int>(h.col_labels.size()); ++c) {
      const double x = x0 + (c + 0.5) * cell, y = y0 + h.rows * cell + 6;
      s << "<text x=\"" << px(x) << "\" y=\"" << px(y) << "\" font-size=\"" << px(font)
        << "\" text-anchor=\"end\" dominant-baseline=\"hanging\" transform=\"rotate(-45 " << px(x)
        << " " << px(y) << ")\">" << escape(h.col_labels[static_cast<std::size_t>(c)])
        << "</text>\n";
    }
  }
  // crispEdges: no anti-aliased seams where cells of two colours meet.
  s << "<g shape-rendering=\"crispEdges\">\n";
  for (const auto& [colour, d] : cells_of_colour)
    s << "<path fill=\"" << colour << "\" d=\"" << d << "\"/>\n";
  s << "</g>\n";
  s << labels.str() << frames.str();
  // The colour scale: a vertical bar with ticks.
  const double bar_x = row_title_w + per_row * panel_w + 10, bar_y = header + 22;
  const double bar_h = std::min(220.0, std::max(120.0, max_rows * cell));
  s << "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (int i = 0; i <= 8; ++i) {
    s << "<stop offset=\"" << num(i / 8.0) << "\" stop-color=\"" << rgb(viridis(i / 8.0)) << "\"/>";
  }
  s << "</linearGradient></defs>\n";
  s << "<rect x=\"" << px(bar_x) << "\" y=\"" << px(bar_y) << "\" width=\"16\" height=\""
    << px(bar_h) << "\" fill=\"url(#scale)\" stroke=\"#888\"/>\n";
  for (double t : nice_ticks(g.vmin, g.vmax, 5)) {
    const double y = bar_y + bar_h * (1 - (t - g.vmin) / range);
    s << "<line x1=\"" << px(bar_x + 16) << "\" y1=\"" << px(y) << "\" x2=\"" << px(bar_x + 20)
      << "\" y2=\"" << px(y) << "\" stroke=\"#000\"/><text x=\"" << px(bar_x + 23) << "\" y=\""
      << px(y) << "\" font-size=\"11\" dominant-baseline=\"central\">" << num(t) << "</text>\n";
  }
  s << "<text font-size=\"11\" text-anchor=\"middle\" transform=\"translate(" << px(bar_x + 62)
    << " " << px(bar_y + bar_h / 2) << ") rotate(90)\">" << escape(g.scale_label) << "</text>\n";
  s << "</svg>\n";
  return s.str();
}

std::string line_chart(const LineChart& chart, const std::optional<TopAxis>& top_axis) {
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const Series& s : chart.series) {
    if (s.x.size() != s.y.size()) {
      throw std::invalid_argument("svg::line_chart: series '" + s.name + "' has " +
                                  std::to_string(s.x.size()) + " x and " +
                                  std::to_string(s.y.size()) + " y values");
    }
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i]) || (chart.log_y && s.y[i] <= 0)) continue;
      xmin = std::min(xmin, s.x[i]), xmax = std::max(xmax, s.x[i]);
      ymin = std::min(ymin, s.y[i]), ymax = std::max(ymax, s.y[i]);
    }
  }
  if (!std::isfinite(xmin)) xmin = 0, xmax = 1, ymin = chart.log_y ? 1 : 0, ymax = 1;
  auto ty = [&](double v) { return chart.log_y ? std::log10(v) : v; };
  std::vector<double> yticks;
  double ylo, yhi;
  if (chart.log_y) {
    // The data's range (in decades) with a little margin; ticks at 1, 2 and 5 times a power of
    // ten inside it.
    const double lo = std::log10(ymin), hi = std::log10(ymax);
    const double margin = std::max(0.05, 0.04 * (hi - lo));
    ylo = lo - margin, yhi = hi + margin;
    for (double e = std::floor(ylo); e <= std::ceil(yhi); ++e) {
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, e);
        if (std::log10(v) >= ylo && std::log10(v) <= yhi) yticks.push_back(v);
      }
    }
  } else {
    if (!chart.log_y && ymin > 0 && ymin < 0.3 * ymax) ymin = 0;  // show the floor when near
    yticks = nice_ticks(ymin, ymax, 6);
    ylo = std::min(ymin, yticks.front()), yhi = std::max(ymax, yticks.back());
  }
  const std::vector<double> xticks = nice_ticks(xmin, xmax, 7);
  const double xlo = std::min(xmin, xticks.front()), xhi = std::max(xmax, xticks.back());

  const double W = chart.width, H = chart.height;
  const double left = 70, right = 20, top = top_axis ? 80 : 40, bottom = 55;
  const double pw = W - left - right, ph = H - top - bottom;
  auto X = [&](double v) { return left + (v - xlo) / (xhi - xlo) * pw; };
  auto Y = [&](double v) { return top + ph - (ty(v) - ylo) / (yhi - ylo) * ph; };

  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << px(W) << "\" height=\"" << px(H)
    << "\" viewBox=\"0 0 " << px(W) << " " << px(H)
    << "\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  s << "<text x=\"" << px(W / 2) << "\" y=\"24\" font-size=\"16\" font-weight=\"bold\" "
    << "text-anchor=\"middle\">" << escape(chart.title) << "</text>\n";
  // Grid and ticks.
  for (double t : xticks) {
    const double x = X(t);
    s << "<line x1=\"" << px(x) << "\" y1=\"" << px(top) << "\" x2=\"" << px(x) << "\" y2=\""
      << px(top + ph) << "\" stroke=\"#e5e5e5\"/><text x=\"" << px(x) << "\" y=\""
      << px(top + ph + 16) << "\" font-size=\"11\" text-anchor=\"middle\">" << num(t, 6)
      << "</text>\n";
  }
  for (double t : yticks) {
    const double y = Y(t);
    s << "<line x1=\"" << px(left) << "\" y1=\"" << px(y) << "\" x2=\"" << px(left + pw)
      << "\" y2=\"" << px(y) << "\" stroke=\"#e5e5e5\"/><text x=\"" << px(left - 6) << "\" y=\""
      << px(y) << "\" font-size=\"11\" text-anchor=\"end\" dominant-baseline=\"central\">" << num(t)
      << "</text>\n";
  }
  s << "<rect x=\"" << px(left) << "\" y=\"" << px(top) << "\" width=\"" << px(pw) << "\" height=\""
    << px(ph) << "\" fill=\"none\" stroke=\"#333\"/>\n";
  s << "<text x=\"" << px(left + pw / 2) << "\" y=\"" << px(H - 12)
    << "\" font-size=\"13\" text-anchor=\"middle\">" << escape(chart.x_label) << "</text>\n";
  s << "<text font-size=\"13\" text-anchor=\"middle\" transform=\"translate(18 " << px(top + ph / 2)
    << ") rotate(-90)\">" << escape(chart.y_label + (chart.log_y ? " (log scale)" : ""))
    << "</text>\n";
  if (top_axis && xmax > xmin && top_axis->at_xmax != top_axis->at_xmin) {
    const auto& t = *top_axis;
    const double per_x = (t.at_xmax - t.at_xmin) / (xmax - xmin);
    auto to_x = [&](double v) { return xmin + (v - t.at_xmin) / per_x; };
    const double vlo = t.at_xmin + (xlo - xmin) * per_x, vhi = t.at_xmin + (xhi - xmin) * per_x;
    for (double v : nice_ticks(std::min(vlo, vhi), std::max(vlo, vhi), 6)) {
      const double x = X(to_x(v));
      if (x < left - 0.5 || x > left + pw + 0.5) continue;
      s << "<line x1=\"" << px(x) << "\" y1=\"" << px(top) << "\" x2=\"" << px(x) << "\" y2=\""
        << px(top - 5) << "\" stroke=\"#333\"/><text x=\"" << px(x) << "\" y=\"" << px(top - 8)
        << "\" font-size=\"11\" text-anchor=\"middle\">" << num(v, 6) << "</text>\n";
    }
    s << "<text x=\"" << px(left + pw / 2) << "\" y=\"" << px(top - 26)
      << "\" font-size=\"13\" text-anchor=\"middle\">" << escape(t.label) << "</text>\n";
  }
  // The series.
  for (std::size_t k = 0; k < chart.series.size(); ++k) {
    const Series& ser = chart.series[k];
    std::ostringstream points;
    int count = 0;
    for (std::size_t i = 0; i < ser.x.size(); ++i) {
      if (!std::isfinite(ser.y[i]) || (chart.log_y && ser.y[i] <= 0)) continue;
      points << px(X(ser.x[i])) << "," << px(Y(ser.y[i])) << " ";
      ++count;
    }
    s << "<polyline fill=\"none\" stroke=\"" << palette(k) << "\" stroke-width=\"2\" points=\""
      << points.str() << "\"/>\n";
    if (count <= 40) {  // few points: mark them
      for (std::size_t i = 0; i < ser.x.size(); ++i) {
        if (!std::isfinite(ser.y[i]) || (chart.log_y && ser.y[i] <= 0)) continue;
        s << "<circle cx=\"" << px(X(ser.x[i])) << "\" cy=\"" << px(Y(ser.y[i]))
          << "\" r=\"3\" fill=\"" << palette(k) << "\"/>\n";
      }
    }
  }
  // The legend, top right inside the plot.
  std::size_t longest = 0;
  for (const Series& ser : chart.series) longest = std::max(longest, ser.name.size());
  const double lw = 36 + longest * 7.5, lx = left + pw - lw - 8, ly = top + 8;
  s << "<rect x=\"" << px(lx) << "\" y=\"" << px(ly) << "\" width=\"" << px(lw) << "\" height=\""
    << px(8 + 18 * chart.series.size())
    << "\" fill=\"#fff\" fill-opacity=\"0.85\" stroke=\"#bbb\"/>\n";
  for (std::size_t k = 0; k < chart.series.size(); ++k) {
    const double y = ly + 13 + 18 * k;
    s << "<line x1=\"" << px(lx + 6) << "\" y1=\"" << px(y) << "\" x2=\"" << px(lx + 26)
      << "\" y2=\"" << px(y) << "\" stroke=\"" << palette(k) << "\" stroke-width=\"3\"/>"
      << "<text x=\"" << px(lx + 31) << "\" y=\"" << px(y)
      << "\" font-size=\"12\" dominant-baseline=\"central\">" << escape(chart.series[k].name)
      << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace ember::examples::svg
