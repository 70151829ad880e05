// autograd::explore: the page's data against the graph (nodes, edges, values, the backward
// order), its errors, and the page itself in headless Chromium (tests/browser.h).
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "core/autograd/explore.h"
#include "core/graph/function.h"
#include "tests/browser.h"

using namespace ember;
using nlohmann::json;

namespace {

// core_tour's expression: loss = (softmax(x * w, -1)^2).sum().
struct Tour {
  Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}).requires_grad_();
  Tensor w = tensor({0.5, -1.0, 2.0}).requires_grad_();
  Tensor scores, y, loss;
  Tour() {
    autograd::KeepValuesGuard keep;
    scores = x * w;
    y = softmax(scores, -1);
    loss = (y * y).sum();
  }
  autograd::ExploreOptions options() const {
    autograd::ExploreOptions o;
    o.name("x", x).name("w", w).name("scores", scores);
    return o;
  }
};

std::vector<double> values_of(const json& t) {
  std::vector<double> v;
  for (const auto& e : t.at("values")) v.push_back(e.get<double>());
  return v;
}

std::string temp_page(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ember_test_" + name + "_" + std::to_string(getpid()) + ".html"))
      .string();
}

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST(Explore, DataMatchesTheGraph) {
  Tour t;
  const json d = json::parse(autograd::explore_data(t.loss, t.options()));
  const json& nodes = d.at("nodes");
  // The graph walked here, breadth first from loss's grad_fn: explore numbers nodes the same way.
  std::vector<std::shared_ptr<autograd::Node>> graph{t.loss.grad_fn()};
  std::map<autograd::Node*, int> id{{graph[0].get(), 0}};
  for (std::size_t k = 0; k < graph.size(); ++k) {
    for (const auto& next : graph[k]->next_functions) {
      if (next && !id.count(next.get())) {
        id[next.get()] = static_cast<int>(graph.size());
        graph.push_back(next);
      }
    }
  }
  ASSERT_EQ(nodes.size(), graph.size());
  EXPECT_EQ(nodes[0].at("name"), "SumBackward0");
  for (std::size_t k = 0; k < graph.size(); ++k) {
    const json& n = nodes[k];
    EXPECT_EQ(n.at("name"), graph[k]->name());
    EXPECT_EQ(n.at("formula"), graph[k]->formula());
    EXPECT_NE(n.at("formula"), "");
    ASSERT_EQ(n.at("inputs").size(), graph[k]->next_functions.size());
    for (std::size_t i = 0; i < graph[k]->next_functions.size(); ++i) {
      const auto& next = graph[k]->next_functions[i];
      EXPECT_EQ(n.at("inputs")[i].at("node"), next ? id.at(next.get()) : -1);
    }
  }
  // Leaves by their names, with their values; intermediates kept by KeepValuesGuard.
  std::map<std::string, json> by_label;
  for (const json& n : nodes)
    if (n.contains("label")) by_label[n.at("label")] = n;
  ASSERT_EQ(by_label.size(), 3u);
  EXPECT_EQ(by_label["x"].at("kind"), "leaf");
  EXPECT_EQ(values_of(by_label["x"].at("value")), t.x.to_vector<double>());
  EXPECT_EQ(values_of(by_label["w"].at("value")), t.w.to_vector<double>());
  EXPECT_EQ(by_label["scores"].at("name"), "MulBackward0");
  EXPECT_EQ(values_of(by_label["scores"].at("value")), t.scores.to_vector<double>());
  EXPECT_EQ(values_of(nodes[0].at("value")), t.loss.to_vector<double>());
  EXPECT_NE(by_label["scores"].at("value").at("text").get<std::string>().find("tensor("),
            std::string::npos);

  // The order: every node once, each after every node that sends it a gradient (the root
  // first), as the engine runs them; and explore leaves .grad alone.
  const json& order = d.at("order");
  ASSERT_EQ(order.size(), graph.size());
  EXPECT_EQ(order[0].at("node"), 0);
  std::map<int, int> position;
  for (std::size_t k = 0; k < order.size(); ++k)
    position[order[k].at("node")] = static_cast<int>(k);
  ASSERT_EQ(position.size(), graph.size());
  for (std::size_t k = 0; k < graph.size(); ++k) {
    for (const auto& next : graph[k]->next_functions) {
      if (next) {
        EXPECT_LT(position[static_cast<int>(k)], position[id.at(next.get())]);
      }
    }
  }
  EXPECT_FALSE(t.x.grad().defined());
  EXPECT_FALSE(t.w.grad().defined());

  // The gradients it recorded are backward()'s: the leaves' incoming gradients, the softmax's
  // gradient sent to scores, and the separately embedded leaf gradients.
  t.loss.backward({}, /*retain_graph=*/true);
  const int x_id = by_label["x"].at("id"), w_id = by_label["w"].at("id");
  EXPECT_EQ(values_of(order[position[x_id]].at("grad")), t.x.grad().to_vector<double>());
  EXPECT_EQ(values_of(order[position[w_id]].at("grad")), t.w.grad().to_vector<double>());
  EXPECT_EQ(values_of(d.at("leaf_grads").at(std::to_string(x_id))), t.x.grad().to_vector<double>());
  EXPECT_EQ(values_of(d.at("leaf_grads").at(std::to_string(w_id))), t.w.grad().to_vector<double>());
  EXPECT_EQ(d.at("gradients_note"), "");
}

TEST(Explore, LargeTensorsAreSummarised) {
  Tensor a = arange(0, 100, 1, DType::Float32).requires_grad_();
  Tensor loss = (a * a).sum();
  autograd::ExploreOptions o;
  o.full_values_up_to = 10;
  const json d = json::parse(autograd::explore_data(loss, o));
  const json& leaf = d.at("nodes").back();
  ASSERT_EQ(leaf.at("kind"), "leaf");
  const json& s = leaf.at("value").at("summary");
  EXPECT_EQ(s.at("min"), 0.0);
  EXPECT_EQ(s.at("max"), 99.0);
  EXPECT_DOUBLE_EQ(s.at("mean").get<double>(), 49.5);
  EXPECT_EQ(s.at("first").size(), 16u);
  int64_t total = 0;
  for (const auto& b : s.at("hist")) total += b.get<int64_t>();
  EXPECT_EQ(total, 100);
  EXPECT_FALSE(leaf.at("value").contains("values"));
}

TEST(Explore, AfterBackwardWithoutRetainGraphTheGraphStaysButGradientsNeedRetainGraph) {
  Tour t;
  t.loss.backward();
  const json d = json::parse(autograd::explore_data(t.loss, t.options()));
  EXPECT_EQ(d.at("nodes").size(), 6u);
  EXPECT_TRUE(d.at("order").empty());
  EXPECT_NE(d.at("gradients_note").get<std::string>().find("retain_graph=true"), std::string::npos);
  EXPECT_EQ(values_of(d.at("nodes")[0].at("value")), t.loss.to_vector<double>());
  // The leaves' .grad (from that backward) are untouched.
  const auto grad_x = t.x.grad().to_vector<double>();
  autograd::explore(t.loss, temp_page("freed"), t.options());
  EXPECT_EQ(t.x.grad().to_vector<double>(), grad_x);
  std::filesystem::remove(temp_page("freed"));
}

TEST(Explore, BadInputsAreErrors) {
  test::expect_error([] { autograd::explore_data(Tensor()); },
                     "explore: expected a defined tensor");
  test::expect_error([] { autograd::explore_data(ones({2})); }, "has no autograd graph");
  Tour t;
  test::expect_error([&] { autograd::explore(t.loss, "/nonexistent-dir/page.html"); },
                     "explore: cannot write '/nonexistent-dir/page.html'");
  autograd::ExploreOptions o;
  o.dot_program = "ember-no-such-dot";
  test::expect_error([&] { autograd::explore(t.loss, temp_page("nodot"), o); },
                     "Graphviz's 'ember-no-such-dot' program was not found on PATH");
  // A failed explore leaves no file where the page is to go.
  EXPECT_FALSE(std::filesystem::exists(temp_page("nodot")));
  test::expect_error([] { autograd::explore(ones({2}), temp_page("nograph")); },
                     "has no autograd graph");
  EXPECT_FALSE(std::filesystem::exists(temp_page("nograph")));
  std::filesystem::remove(temp_page("nodot"));
  // An empty program name or a directory is no program (access() calls a directory
  // executable; running it would fail with an exit status and no reason).
  for (const std::string program : {"", "/tmp", "."}) {
    o.dot_program = program;
    test::expect_error([&] { autograd::explore(t.loss, temp_page("nodot"), o); },
                       "Graphviz's '" + program + "' program was not found on PATH");
  }
  EXPECT_FALSE(std::filesystem::exists(temp_page("nodot")));
  // max_nodes: -1 means no limit; below it is an Error, not another way to say none.
  autograd::ExploreOptions limit;
  for (int64_t bad : {int64_t{-2}, std::numeric_limits<int64_t>::min()}) {
    limit.max_nodes = bad;
    test::expect_error([&] { autograd::explore(t.loss, temp_page("limit"), limit); },
                       "explore: ExploreOptions::max_nodes must be >= 0, or -1 for no limit, got " +
                           std::to_string(bad));
  }
  EXPECT_FALSE(std::filesystem::exists(temp_page("limit")));
}

// A graph of more nodes than ExploreOptions::max_nodes is an Error before Graphviz runs (its
// layout time grows with the square of the nodes); explore_data takes it, and a higher limit
// lets explore lay it out.
TEST(Explore, AGraphOfMoreThanMaxNodesIsAnErrorBeforeTheLayout) {
  Tensor x = tensor({1.0}).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 10000; ++i) y = y * 1.0001;  // 10,000 MulBackward0 and x's leaf
  const std::string path = temp_page("max_nodes");
  test::expect_error([&] { autograd::explore(y, path); },
                     "explore: the graph has 10001 nodes, more than ExploreOptions::max_nodes = "
                     "10000");
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(json::parse(autograd::explore_data(y)).at("nodes").size(), 10001u);
  Tensor small = (x * x).sum();
  autograd::ExploreOptions o;
  o.max_nodes = 2;
  test::expect_error([&] { autograd::explore(small, path, o); }, "the graph has 3 nodes");
  o.max_nodes = 3;
  autograd::explore(small, path, o);
  EXPECT_TRUE(std::filesystem::exists(path));
  std::filesystem::remove(path);
}

// Names Graphviz cannot lay out as written make the page too: a NUL byte (it ends a DOT string)
// shows as U+FFFD, and a long name shows its first 200 characters and "..." in the graph (Graphviz
// takes no node wider than 65535 points) while the data keeps it whole. dot_quote writes text
// longer than Graphviz's 16384 bytes per quoted string in pieces joined by '+'.
TEST(Explore, NamesWithNulOrLongNamesMakeThePage) {
  Tensor p = tensor({1.0, -2.0}).requires_grad_();
  Tensor q = tensor({3.0, 4.0}).requires_grad_();
  Tensor loss = (p * q).sum();
  autograd::ExploreOptions o;
  o.name(std::string("nul\0byte", 8), p);
  const std::string long_name = std::string(199, 'x') + "\xC3\xA9" + std::string(40000, 'y');
  o.name(long_name, q);
  const std::string path = temp_page("nul");
  autograd::explore(loss, path, o);
  const std::string page = read(path);
  EXPECT_NE(page.find("nul\xEF\xBF\xBD"
                      "byte"),
            std::string::npos);  // in the SVG
  EXPECT_NE(page.find(std::string(199, 'x') + "\xC3\xA9\xE2\x80\xA6\\u003c"), std::string::npos);
  EXPECT_NE(page.find("\"label\":\"" + long_name + "\""), std::string::npos);
  EXPECT_EQ(autograd::page::dot_quote("a\"b\\c\nd&e"), "\"a\\\"b\\\\c\\nd&amp;e\"");
  const std::string quoted = autograd::page::dot_quote(long_name);
  EXPECT_NE(quoted.find("\" + \""), std::string::npos);
  EXPECT_EQ(quoted.find("\xC3\" + \"\xA9"), std::string::npos);  // never inside a character
  std::filesystem::remove(path);
}

TEST(Explore, NamesAreEscaped) {
  Tensor p = tensor({1.0, -2.0}).requires_grad_();
  Tensor loss = (p * p).sum();
  autograd::ExploreOptions o;
  o.name("<script>document.title='pwned'</script>", p);
  o.title = "</title><script>x</script>";
  const std::string path = temp_page("escape");
  autograd::explore(loss, path, o);
  const std::string page = read(path);
  EXPECT_EQ(page.find("<script>document"), std::string::npos);
  EXPECT_EQ(page.find("</title><script>x"), std::string::npos);
  EXPECT_NE(page.find("\\u003cscript>document"), std::string::npos);  // in the JSON data
  if (!test::chromium_path().empty()) {
    // In the browser the name shows as text (the self-check finds it in the panel's text).
    EXPECT_EQ(test::run_selftest(path).substr(0, 4), "PASS");
  }
  std::filesystem::remove(path);
}

// Invalid UTF-8 becomes U+FFFD, one per longest failing start of a sequence; valid text (up to
// U+10FFFF) is kept as it is.
TEST(Explore, ValidUtf8ReplacesWhatIsNotUtf8) {
  using autograd::page::valid_utf8;
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(valid_utf8("plain \xC3\xA9 \xE2\x82\xAC \xF4\x8F\xBF\xBF"),
            "plain \xC3\xA9 \xE2\x82\xAC \xF4\x8F\xBF\xBF");
  EXPECT_EQ(valid_utf8("a\xFF"
                       "b"),
            "a" + fffd + "b");  // never a lead byte
  EXPECT_EQ(valid_utf8("a\x80"
                       "b"),
            "a" + fffd + "b");  // a stray continuation
  EXPECT_EQ(valid_utf8("a\xE2\x82"
                       "b"),
            "a" + fffd + "b");                                           // truncated: one U+FFFD
  EXPECT_EQ(valid_utf8("a\xE2\x82"), "a" + fffd);                        // truncated at the end
  EXPECT_EQ(valid_utf8("\xC0\xAF"), fffd + fffd);                        // overlong '/'
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), fffd + fffd + fffd);             // a surrogate
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // past U+10FFFF
  EXPECT_EQ(autograd::page::escape_html("\xFF<&amp;"), fffd + "&lt;&amp;amp;");
}

// A title or name with invalid UTF-8 reaches the page as U+FFFD; a name holding "&amp;" shows as
// those five characters in the graph (Graphviz's SVG) as in the side panel (the JSON data).
TEST(Explore, NamesAreValidUtf8AndEscapedOnceEverywhere) {
  Tensor p = tensor({1.0, -2.0}).requires_grad_();
  Tensor loss = (p * p).sum();
  autograd::ExploreOptions o;
  o.name("w&amp;b\xFF", p);
  o.title = "title \xC3(";
  const std::string path = temp_page("utf8");
  autograd::explore(loss, path, o);
  const std::string page = read(path);
  EXPECT_EQ(autograd::page::valid_utf8(page), page);  // the whole page is valid UTF-8
  EXPECT_NE(page.find("<title>title \xEF\xBF\xBD(</title>"), std::string::npos);
  // In Graphviz's SVG text (inside the JSON data, which escapes '&' no further): shown as
  // "w&amp;b\uFFFD", the text the panel shows from the data's "label".
  EXPECT_NE(page.find("w&amp;amp;b\xEF\xBF\xBD"), std::string::npos);
  EXPECT_NE(page.find("\"label\":\"w&amp;b\xEF\xBF\xBD\""), std::string::npos);
  if (!test::chromium_path().empty()) {
    EXPECT_EQ(test::run_selftest(path).substr(0, 4), "PASS");
  }
  std::filesystem::remove(path);
}

// The page in a real browser: its self-check clicks every node, plays the backward to the end
// and compares the leaves' gradients with autograd::grad's.
TEST(ExploreBrowser, TourPagePassesItsSelfCheck) {
  EMBER_SKIP_WITHOUT_CHROMIUM();
  Tour t;
  const std::string path = temp_page("tour");
  autograd::explore(t.loss, path, t.options());
  EXPECT_EQ(test::run_selftest(path), "PASS 6 nodes, 6 steps, 2 leaf gradients");
  std::filesystem::remove(path);
}

TEST(ExploreBrowser, FreedGraphPagePassesItsSelfCheck) {
  EMBER_SKIP_WITHOUT_CHROMIUM();
  Tour t;
  t.loss.backward();
  const std::string path = temp_page("freed_browser");
  autograd::explore(t.loss, path, t.options());
  EXPECT_EQ(test::run_selftest(path), "PASS 6 nodes, 0 steps, 0 leaf gradients");
  std::filesystem::remove(path);
}

// A broken page fails the check: a JavaScript error is reported, not swallowed.
TEST(ExploreBrowser, AJavaScriptErrorFailsTheSelfCheck) {
  EMBER_SKIP_WITHOUT_CHROMIUM();
  Tour t;
  const std::string path = temp_page("broken");
  autograd::explore(t.loss, path, t.options());
  std::string page = read(path);
  const auto at = page.find("'use strict';");
  ASSERT_NE(at, std::string::npos);
  page.insert(at, "window.addEventListener('load', () => undefinedFunction());\n");
  std::ofstream(path) << page;
  EXPECT_EQ(test::run_selftest(path).substr(0, 25), "FAIL JavaScript error: Un");
  std::filesystem::remove(path);
}
