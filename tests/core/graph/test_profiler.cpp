// autograd::profiler: what it records for a known graph (names, calls, input shapes, self <=
// total), its table, its Chrome trace (parsed back as JSON), user labels and module paths, and
// its errors. (The thread test is in tests/threads/test_threads.cpp; no test times anything.)
#include "core/graph/profiler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "core/ember.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

namespace profiler = autograd::profiler;

int64_t calls(const profiler::KeyAverages& averages, const std::string& key) {
  const profiler::FunctionEventAvg* row = averages.find(key);
  return row ? row->count : 0;
}

TEST(Profiler, KnownGraphForwardAndBackward) {
  const Tensor a = randn({3, 4}).requires_grad_(true);
  const Tensor b = randn({4, 5}).requires_grad_(true);
  profiler::Profile prof;
  Tensor y = relu(mm(a, b)).sum();
  y.backward();
  prof.stop();
  const profiler::KeyAverages averages = prof.key_averages();
  // MmBackward0 runs mm for each of its two gradients: 3 in all, 1 at the top level.
  EXPECT_EQ(calls(averages, "ember::mm"), 3);
  int64_t top_level_mm = 0;
  for (const profiler::Event& e : prof.events())
    top_level_mm += e.name == "ember::mm" && e.depth == 0;
  EXPECT_EQ(top_level_mm, 1);
  EXPECT_EQ(calls(averages, "ember::relu"), 1);
  EXPECT_EQ(calls(averages, "SumBackward0"), 1);
  EXPECT_EQ(calls(averages, "ReluBackward0"), 1);
  EXPECT_EQ(calls(averages, "MmBackward0"), 1);
  EXPECT_EQ(calls(averages, "AccumulateGrad"), 2);
  // Rows come in the order their names first ran: mm, relu, sum, then the backward.
  auto row_index = [&](const std::string& key) {
    for (std::size_t i = 0; i < averages.rows.size(); ++i)
      if (averages.rows[i].key == key) return static_cast<int64_t>(i);
    return int64_t{-1};
  };
  EXPECT_EQ(row_index("ember::mm"), 0);
  EXPECT_LT(row_index("ember::mm"), row_index("ember::relu"));
  EXPECT_LT(row_index("ember::relu"), row_index("ember::sum"));
  EXPECT_LT(row_index("ember::sum"), row_index("SumBackward0"));
  int64_t self_sum = 0;
  for (const profiler::FunctionEventAvg& row : averages.rows) {
    EXPECT_GE(row.self_cpu_time_total_ns, 0) << row.key;
    EXPECT_LE(row.self_cpu_time_total_ns, row.cpu_time_total_ns) << row.key;
    self_sum += row.self_cpu_time_total_ns;
  }
  EXPECT_EQ(self_sum, averages.self_cpu_time_total_ns);
  // A backward node's ops run inside it: they are its children, one level down.
  for (const profiler::Event& e : prof.events()) {
    EXPECT_LE(e.self_ns(), e.total_ns()) << e.name;
    if (e.kind == profiler::EventKind::kBackward) {
      EXPECT_EQ(e.depth, 0) << e.name;
    }
  }
  // Nothing is recorded once stopped.
  const std::size_t before = prof.events().size();
  relu(a).sum();
  EXPECT_EQ(prof.events().size(), before);
  EXPECT_FALSE(profiler::is_recording());
}

TEST(Profiler, InputShapesAndGrouping) {
  profiler::Profile prof;
  mm(ones({2, 3}), ones({3, 4}));
  mm(ones({2, 3}), ones({3, 4}));
  mm(ones({5, 3}), ones({3, 1}));
  prof.stop();
  EXPECT_EQ(calls(prof.key_averages(), "ember::mm"), 3);
  const profiler::KeyAverages grouped = prof.key_averages(/*group_by_input_shape=*/true);
  std::map<std::string, int64_t> mm_rows;
  for (const auto& row : grouped.rows)
    if (row.key == "ember::mm") mm_rows[row.input_shapes] = row.count;
  EXPECT_EQ(mm_rows,
            (std::map<std::string, int64_t>{{"[[2, 3], [3, 4]]", 2}, {"[[5, 3], [3, 1]]", 1}}));
  const std::string table = grouped.table("count");
  EXPECT_NE(table.find("Input Shapes"), std::string::npos) << table;
  EXPECT_NE(table.find("[[2, 3], [3, 4]]"), std::string::npos) << table;
}

TEST(Profiler, TableHasPyTorchsColumnsAndSorts) {
  profiler::Profile prof;
  {
    profiler::RecordFunction label("my_label");
    Tensor x = randn({8, 8});
    for (int i = 0; i < 3; ++i) x = tanh(x);
  }
  prof.stop();
  const profiler::KeyAverages averages = prof.key_averages();
  const std::string table = averages.table("cpu_time_total");
  for (const char* column : {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total",
                             "CPU time avg", "# of Calls", "Self CPU time total: "}) {
    EXPECT_NE(table.find(column), std::string::npos) << column << "\n" << table;
  }
  // The label holds everything else, so it is the first row by total time; its self time
  // excludes the ops inside it.
  std::vector<std::string> lines;
  std::istringstream text(table);
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  ASSERT_GE(lines.size(), 5u) << table;  // rule, header, rule, rows..., rule, total
  EXPECT_NE(lines[3].find("my_label"), std::string::npos) << table;
  const profiler::FunctionEventAvg* label = averages.find("my_label");
  ASSERT_NE(label, nullptr);
  EXPECT_LT(label->self_cpu_time_total_ns, label->cpu_time_total_ns);
  EXPECT_EQ(calls(averages, "ember::tanh"), 3);
  // The label is on the events inside it.
  for (const profiler::Event& e : prof.events()) {
    if (e.name == "ember::tanh") {
      EXPECT_EQ(e.label, "my_label");
    }
  }
  // row_limit
  const std::string one = averages.table("self_cpu_time_total", 1);
  EXPECT_EQ(std::count(one.begin(), one.end(), '\n'), 6) << one;  // 3 rules, header, 1 row, total
  test::expect_error([&] { averages.table("bogus"); }, "sort_by");
}

TEST(Profiler, ChromeTraceIsJsonWithTheEvents) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "ember_profiler_test_trace.json";
  {
    profiler::Profile prof;
    const Tensor a = randn({2, 2}).requires_grad_(true);
    (a * a).sum().backward();
    prof.export_chrome_trace(path.string());
  }
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::multiset<std::string> names;
  for (const auto& e : trace["traceEvents"]) {
    EXPECT_EQ(e["ph"], "X");
    EXPECT_TRUE(e["ts"].is_number() && e["dur"].is_number() && e["tid"].is_number());
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    names.insert(e["name"].get<std::string>());
    if (e["name"] == "ember::mul") {
      EXPECT_EQ(e["args"]["Input Dims"], nlohmann::json::parse("[[2, 2], [2, 2]]"));
    }
  }
  EXPECT_EQ(names.count("ember::sum"), 1u);
  EXPECT_EQ(names.count("SumBackward0"), 1u);
  EXPECT_EQ(names.count("MulBackward0"), 1u);
  EXPECT_EQ(names.count("AccumulateGrad"), 1u);
  EXPECT_GE(names.count("ember::mul"), 1u);
}

// A label that is not UTF-8 (the user's text) is written with U+FFFD in its place: the trace is
// JSON that parses, not the JSON writer's exception.
TEST(Profiler, ChromeTraceOfALabelThatIsNotUtf8) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "ember_profiler_test_trace_utf8.json";
  {
    profiler::Profile prof;
    {
      profiler::RecordFunction label(std::string("bad\xFF\"q\"\0x", 9));
      (ones({2}) * 2.0).sum();
    }
    prof.export_chrome_trace(path.string());
  }
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  std::multiset<std::string> names;
  for (const auto& e : trace["traceEvents"]) names.insert(e["name"].get<std::string>());
  EXPECT_EQ(names.count(std::string("bad\xEF\xBF\xBD\"q\"\0x", 11)), 1u);
}

TEST(Profiler, Errors) {
  profiler::Profile prof;
  test::expect_error([] { profiler::Profile nested; }, "nested in itself");
  EXPECT_TRUE(profiler::is_recording());  // the failed one did not stop the first
  prof.stop();
  EXPECT_FALSE(profiler::is_recording());
  profiler::Profile second;  // after stop(), another may start
  second.stop();
  const std::string path = "/nonexistent-ember-dir/trace.json";
  test::expect_error([&] { prof.export_chrome_trace(path); }, path);
}

TEST(Profiler, OffRecordsNothingAndLabelsAreEmpty) {
  EXPECT_FALSE(profiler::is_recording());
  profiler::RecordFunction label("not recorded");
  EXPECT_EQ(profiler::current_label(), "");
  EXPECT_EQ(profiler::current_module_path(), "");
}

}  // namespace
}  // namespace ember
