// The profiler's recording (see profiler.h): a buffer of events per thread, registered with the
// running session; the merge and the tables at the end.
#include "core/graph/profiler.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/base/error.h"

namespace ember::autograd::profiler {

namespace {

using Clock = std::chrono::steady_clock;

// One thread's events in one session. Only its thread appends; the merge reads it under the
// mutex, so a profile can be read while other threads still record.
struct ThreadBuffer {
  std::mutex mutex;
  std::vector<Event> events;
  uint64_t thread = 0;
  Clock::time_point start;  // the session's
};

struct Session {
  uint64_t id = 0;
  Clock::time_point start;
  std::mutex mutex;  // guards buffers
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
};

std::mutex current_mutex;             // guards current (start, stop, a thread joining)
std::shared_ptr<Session> current;     // the recording session, if any
std::atomic<uint64_t> current_id{0};  // its id (0: none), read without the lock
std::atomic<uint64_t> next_session_id{1};

// What a thread knows: its buffer in the current session, and the events open on it.
struct Open {
  ThreadBuffer* buffer;
  std::size_t index;
};
struct ThreadState {
  uint64_t session = 0;
  std::shared_ptr<ThreadBuffer> buffer;
  std::vector<Open> open;
};
thread_local ThreadState state;

int64_t since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

// The innermost user label open on this thread (core/graph/record.h's scopes).
std::string innermost_label() {
  const auto& scopes = current_scopes();
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    if (it->kind == Scope::Kind::Label) return it->name;
  }
  return {};
}

std::string innermost_module_path() {
  const Scope* module = current_module_scope();
  return module ? module->name : std::string();
}

std::string shapes_string(const std::vector<Shape>& shapes) {
  std::string s = "[";
  for (std::size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shape_str(shapes[i]);
  return s + "]";
}

}  // namespace

// ---- recording ----

void RecordEvent::begin(std::string_view name, EventKind kind, std::vector<Shape> shapes) {
  const uint64_t id = current_id.load(std::memory_order_acquire);
  if (id == 0) return;
  if (state.session != id) {
    // First event of this thread in this session: make and register its buffer.
    std::lock_guard<std::mutex> lock(current_mutex);
    if (!current || current->id != id) return;  // stopped meanwhile
    auto buffer = std::make_shared<ThreadBuffer>();
    buffer->thread = static_cast<uint64_t>(::gettid());
    buffer->start = current->start;
    {
      std::lock_guard<std::mutex> session_lock(current->mutex);
      current->buffers.push_back(buffer);
    }
    state.session = id;
    state.buffer = buffer;
    state.open.clear();
  }
  ThreadBuffer& buffer = *state.buffer;
  Event event;
  event.name = std::string(name);
  event.kind = kind;
  event.input_shapes = std::move(shapes);
  event.module_path = innermost_module_path();
  event.label = innermost_label();
  event.thread = buffer.thread;
  event.depth = static_cast<int>(state.open.size());
  event.start_ns = since(buffer.start);
  {
    std::lock_guard<std::mutex> lock(buffer.mutex);
    index_ = buffer.events.size();
    buffer.events.push_back(std::move(event));
  }
  state.open.push_back({&buffer, index_});
  buffer_ = state.buffer;
  active_ = true;
}

RecordEvent::RecordEvent(std::string_view name, EventKind kind) {
  if (is_recording()) begin(name, kind, {});
}

RecordEvent::RecordEvent(std::string_view name, EventKind kind, std::vector<Shape> input_shapes) {
  if (is_recording()) begin(name, kind, std::move(input_shapes));
}

RecordEvent::~RecordEvent() {
  if (!active_) return;
  auto* buffer = static_cast<ThreadBuffer*>(buffer_.get());
  // Events close in the reverse order they opened (RAII), so this one is on top.
  if (!state.open.empty() && state.open.back().buffer == buffer &&
      state.open.back().index == index_) {
    state.open.pop_back();
  }
  int64_t total;
  {
    std::lock_guard<std::mutex> lock(buffer->mutex);
    Event& event = buffer->events[index_];
    event.end_ns = std::max(event.start_ns, since(buffer->start));
    total = event.total_ns();
    if (!state.open.empty() && state.open.back().buffer == buffer) {
      buffer->events[state.open.back().index].children_ns += total;
    }
  }
}

std::string current_module_path() { return innermost_module_path(); }
std::string current_label() { return innermost_label(); }

// ---- the session ----

Profile::Profile() {
  std::lock_guard<std::mutex> lock(current_mutex);
  check(!current,
        "autograd::profiler::Profile: a Profile is already recording (a profiler guard cannot be "
        "nested in itself, or run beside another); stop() the first one before starting another");
  auto session = std::make_shared<Session>();
  session->id = next_session_id.fetch_add(1);
  session->start = Clock::now();
  current = session;
  current_id.store(session->id, std::memory_order_release);
  set_recording(Recorder::Profiler, true);
  session_ = session;
  recording_ = true;
}

Profile::~Profile() { stop(); }

void Profile::stop() {
  if (!recording_) return;
  std::lock_guard<std::mutex> lock(current_mutex);
  current.reset();
  current_id.store(0, std::memory_order_release);
  set_recording(Recorder::Profiler, false);
  recording_ = false;
}

std::vector<Event> Profile::events() const {
  auto& session = *static_cast<Session*>(session_.get());
  std::vector<Event> all;
  std::lock_guard<std::mutex> lock(session.mutex);
  for (const auto& buffer : session.buffers) {
    std::lock_guard<std::mutex> buffer_lock(buffer->mutex);
    for (const Event& e : buffer->events)
      if (e.end_ns >= e.start_ns) all.push_back(e);
  }
  std::stable_sort(all.begin(), all.end(), [](const Event& a, const Event& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.depth < b.depth;
  });
  return all;
}

KeyAverages Profile::key_averages(bool group_by_input_shape) const {
  KeyAverages out;
  std::map<std::pair<std::string, std::string>, std::size_t> row_of;
  for (const Event& e : events()) {
    const std::string shapes = group_by_input_shape ? shapes_string(e.input_shapes) : "";
    auto [it, inserted] = row_of.try_emplace({e.name, shapes}, out.rows.size());
    if (inserted) out.rows.push_back({e.name, shapes, 0, 0, 0});
    FunctionEventAvg& row = out.rows[it->second];
    ++row.count;
    row.self_cpu_time_total_ns += e.self_ns();
    row.cpu_time_total_ns += e.total_ns();
    out.self_cpu_time_total_ns += e.self_ns();
  }
  return out;
}

const FunctionEventAvg* KeyAverages::find(std::string_view key) const {
  for (const FunctionEventAvg& row : rows)
    if (row.key == key) return &row;
  return nullptr;
}

namespace {

// PyTorch's _format_time: microseconds with three decimals, as us, ms or s.
std::string format_time(double ns) {
  const double us = ns / 1000.0;
  char text[64];
  if (us >= 1e6) {
    std::snprintf(text, sizeof text, "%.3fs", us / 1e6);
  } else if (us >= 1e3) {
    std::snprintf(text, sizeof text, "%.3fms", us / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%.3fus", us);
  }
  return text;
}

std::string format_share(double part, double total) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f%%", total > 0 ? 100.0 * part / total : 0.0);
  return text;
}

}  // namespace

std::string KeyAverages::table(std::string_view sort_by, int64_t row_limit) const {
  std::vector<const FunctionEventAvg*> order;
  for (const FunctionEventAvg& row : rows) order.push_back(&row);
  auto sort_on = [&](auto value) {
    std::stable_sort(order.begin(), order.end(),
                     [&](const FunctionEventAvg* a, const FunctionEventAvg* b) {
                       return value(*a) > value(*b);
                     });
  };
  if (sort_by == "self_cpu_time_total") {
    sort_on(
        [](const FunctionEventAvg& r) { return static_cast<double>(r.self_cpu_time_total_ns); });
  } else if (sort_by == "cpu_time_total") {
    sort_on([](const FunctionEventAvg& r) { return static_cast<double>(r.cpu_time_total_ns); });
  } else if (sort_by == "cpu_time") {
    sort_on([](const FunctionEventAvg& r) { return r.cpu_time_avg_ns(); });
  } else if (sort_by == "count") {
    sort_on([](const FunctionEventAvg& r) { return static_cast<double>(r.count); });
  } else {
    check(sort_by.empty(),
          "profiler table: sort_by must be one of \"self_cpu_time_total\", "
          "\"cpu_time_total\", \"cpu_time\", \"count\" or \"\", got \"",
          std::string(sort_by), "\"");
  }
  if (row_limit >= 0 && static_cast<int64_t>(order.size()) > row_limit) order.resize(row_limit);

  // PyTorch's layout: the name column as wide as the longest name + 4 (at most 55), the others
  // 12, every cell right-aligned and followed by two spaces; shapes last, at most 80 wide.
  const bool with_shapes = std::any_of(
      rows.begin(), rows.end(), [](const FunctionEventAvg& r) { return !r.input_shapes.empty(); });
  std::size_t name_width = 4;
  std::size_t shapes_width = 12;
  for (const FunctionEventAvg* row : order) {
    name_width = std::max(name_width, row->key.size() + 4);
    shapes_width = std::max(shapes_width, row->input_shapes.size() + 4);
  }
  name_width = std::min<std::size_t>(name_width, 55);
  shapes_width = std::min<std::size_t>(shapes_width, 80);
  std::vector<std::size_t> widths = {name_width, 12, 12, 12, 12, 12, 12};
  std::vector<std::string> headers = {"Name",      "Self CPU %",   "Self CPU",  "CPU total %",
                                      "CPU total", "CPU time avg", "# of Calls"};
  if (with_shapes) {
    widths.push_back(shapes_width);
    headers.push_back("Input Shapes");
  }
  auto fit = [](std::string text, std::size_t width) {
    if (text.size() > width) text = text.substr(0, width - 3) + "...";
    return text;
  };
  std::ostringstream out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string text = fit(cells[c], widths[c]);
      out << std::string(widths[c] - text.size(), ' ') << text << "  ";
    }
    out << "\n";
  };
  auto rule = [&] {
    for (std::size_t w : widths) out << std::string(w, '-') << "  ";
    out << "\n";
  };
  const auto total = static_cast<double>(self_cpu_time_total_ns);
  rule();
  line(headers);
  rule();
  for (const FunctionEventAvg* row : order) {
    std::vector<std::string> cells = {
        row->key,
        format_share(static_cast<double>(row->self_cpu_time_total_ns), total),
        format_time(static_cast<double>(row->self_cpu_time_total_ns)),
        format_share(static_cast<double>(row->cpu_time_total_ns), total),
        format_time(static_cast<double>(row->cpu_time_total_ns)),
        format_time(row->cpu_time_avg_ns()),
        std::to_string(row->count)};
    if (with_shapes) cells.push_back(row->input_shapes);
    line(cells);
  }
  rule();
  out << "Self CPU time total: " << format_time(total) << "\n";
  return out.str();
}

void Profile::export_chrome_trace(const std::string& path) const {
  using nlohmann::json;
  json trace_events = json::array();
  const auto pid = static_cast<int64_t>(::getpid());
  for (const Event& e : events()) {
    json shapes = json::array();
    for (const Shape& s : e.input_shapes)
      shapes.push_back(std::vector<int64_t>(s.begin(), s.end()));
    json args = {{"Input Dims", shapes}};
    if (!e.module_path.empty()) args["Module Path"] = e.module_path;
    if (!e.label.empty() && e.kind != EventKind::kUser) args["Label"] = e.label;
    const char* category = e.kind == EventKind::kUser     ? "user_annotation"
                           : e.kind == EventKind::kModule ? "python_function"
                                                          : "cpu_op";
    trace_events.push_back({{"ph", "X"},
                            {"cat", category},
                            {"name", e.name},
                            {"pid", pid},
                            {"tid", e.thread},
                            {"ts", static_cast<double>(e.start_ns) / 1000.0},
                            {"dur", static_cast<double>(e.total_ns()) / 1000.0},
                            {"args", args}});
  }
  const json trace = {{"traceEvents", trace_events}, {"displayTimeUnit", "ms"}};
  std::ofstream file(path);
  check(file.good(), "export_chrome_trace: cannot open '", path, "' for writing (",
        std::strerror(errno), ")");
  // Names, module paths and labels are the user's text: bytes that are not UTF-8 are written as
  // U+FFFD (the JSON writer would throw its own exception on them).
  file << trace.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  file.close();
  check(!file.fail(), "export_chrome_trace: writing '", path, "' failed (", std::strerror(errno),
        ")");
}

}  // namespace ember::autograd::profiler
