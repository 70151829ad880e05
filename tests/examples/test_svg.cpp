// The examples' SVG writer (examples/common/svg.h): what a picture holds, checked in its text.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "examples/common/svg.h"

namespace ember::examples::svg {
namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST(Svg, HeatmapGridHasLabelsValuesPanelsAndScale) {
  HeatmapGrid grid;
  grid.title = "weights <&>";
  grid.panels.push_back(
      {"head 0", {1, 0, 0.25, 0.75}, 2, 2, {"Your", "journey"}, {"Your", "journey"}});
  grid.panels.push_back(
      {"head 1", {1, 0, 0.5, 0.5}, 2, 2, {"Your", "journey"}, {"Your", "journey"}});
  const std::string text = heatmap_grid(grid);
  EXPECT_EQ(text.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(text.find(">weights &lt;&amp;&gt;</text>"), std::string::npos);  // escaped
  EXPECT_EQ(count(text, ">head 0</text>"), 1);
  EXPECT_EQ(count(text, ">head 1</text>"), 1);
  EXPECT_EQ(count(text, ">journey</text>"), 4);  // on both axes of both panels
  EXPECT_EQ(count(text, ">0.75</text>"), 1);     // cell values, small maps
  EXPECT_EQ(count(text, ">0.50</text>"), 2);
  EXPECT_EQ(count(text, "<rect x="), 8 + 2 + 1);  // cells, panel frames, colour bar
  EXPECT_NE(text.find("attention weight"), std::string::npos);
  // The colour scale: 0 is viridis' dark purple, 1 its yellow.
  EXPECT_NE(text.find("fill=\"#fde725\""), std::string::npos);
  EXPECT_NE(text.find("fill=\"#440154\""), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 7), "</svg>\n");

  grid.show_values = 0;
  EXPECT_EQ(count(heatmap_grid(grid), ">0.75</text>"), 0);
  grid.panels[0].values.pop_back();
  EXPECT_THROW(heatmap_grid(grid), std::invalid_argument);
  EXPECT_THROW(heatmap_grid(HeatmapGrid{}), std::invalid_argument);
}

// svg::escape is the core's autograd::page::escape_html: all five XML specials, nothing else.
TEST(Svg, EscapeReplacesTheFiveXmlSpecials) {
  EXPECT_EQ(escape("<b class=\"x\">Tom's & co</b> 1.5"),
            "&lt;b class=&quot;x&quot;&gt;Tom&#39;s &amp; co&lt;/b&gt; 1.5");
}

// A title with invalid UTF-8 (a file name) still makes valid XML: U+FFFD, escaped once.
TEST(Svg, InvalidUtf8InATitleBecomesTheReplacementCharacter) {
  EXPECT_EQ(escape("loss of text\xFF&.txt"), "loss of text\xEF\xBF\xBD&amp;.txt");
  LineChart chart;
  chart.title = "train_gpt: \xC3(\xFE.txt";
  chart.series.push_back({"train", {0, 1}, {2, 1}});
  const std::string text = line_chart(chart);
  EXPECT_NE(text.find(">train_gpt: \xEF\xBF\xBD(\xEF\xBF\xBD.txt</text>"), std::string::npos);
  EXPECT_EQ(ember::autograd::page::valid_utf8(text), text);
}

TEST(Svg, NiceTicksAreRoundAndCoverTheRange) {
  EXPECT_EQ(nice_ticks(0, 1, 6), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1.0}));
  EXPECT_EQ(nice_ticks(0, 950, 6), (std::vector<double>{0, 200, 400, 600, 800}));
  EXPECT_EQ(nice_ticks(1.3, 2.6, 4), (std::vector<double>{1.5, 2.0, 2.5}));
}

TEST(Svg, LineChartHasAxesLegendAndOnePolylinePerSeries) {
  LineChart chart{"loss",
                  "step",
                  "cross-entropy",
                  {{"train", {0, 1, 2}, {3, 2, 1}}, {"validation", {0, 2}, {3.2, 1.5}}}};
  const std::string text = line_chart(chart);
  EXPECT_EQ(count(text, "<polyline"), 2);
  EXPECT_EQ(count(text, "<circle"), 5);  // few points: each marked
  EXPECT_NE(text.find(">train</text>"), std::string::npos);
  EXPECT_NE(text.find(">validation</text>"), std::string::npos);
  EXPECT_NE(text.find(">step</text>"), std::string::npos);
  EXPECT_NE(text.find(">cross-entropy</text>"), std::string::npos);
  chart.log_y = true;
  EXPECT_NE(line_chart(chart).find("cross-entropy (log scale)"), std::string::npos);
  chart.series[0].y.pop_back();
  EXPECT_THROW(line_chart(chart), std::invalid_argument);
}

}  // namespace
}  // namespace ember::examples::svg
