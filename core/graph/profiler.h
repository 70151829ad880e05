// ember::autograd::profiler: where the time goes, op by op (torch.autograd.profiler /
// torch.profiler).
//
//   {
//     autograd::profiler::Profile prof;                  // records from here ...
//     Tensor loss = model.forward(x).sum();
//     loss.backward();
//   }                                                    // ... to here (or prof.stop())
//   std::cout << prof.key_averages().table("self_cpu_time_total", 20);
//   prof.export_chrome_trace("trace.json");            // chrome://tracing, ui.perfetto.dev
//
// What is recorded, each as an Event with its name, its inputs' shapes, its thread and its start
// and end:
//  - every op's forward, at autograd::apply<Op> (core/graph/function.h), as "ember::mm" (the
//    op's name from its backward node's name, as PyTorch shows "aten::mm"), recorded or not
//    (under no_grad too);
//  - every backward node the engine runs, by the node's name ("MmBackward0"), with the shapes of
//    the gradients it receives;
//  - every RecordFunction a user opens (`autograd::RecordFunction rf("my_label");`, also
//    spelled autograd::profiler::RecordFunction: torch.autograd.profiler.record_function), and
//    every module's forward (nn::ForwardScope, opened by Module::operator(), ModuleHolder,
//    Sequential and the modules' own forward) as "nn.Module: Linear".
// An event's self time is its total time minus the total time of the events nested directly in
// it on the same thread (an op's forward inside a user label, a backward node's ops inside the
// node): PyTorch's "Self CPU".
//
// The hook is the one anomaly mode uses (core/graph/record.h): a Profile sets the profiler's
// bit of the recorders' word, and every event carries the module path open around it on its
// thread ("trf_blocks.1.att": the dotted path from the outermost module running, as
// named_modules() names it; "" for the outermost module itself) and the innermost user label
// (current_module_path(), current_label()). A module's own event carries its own path.
//
// Cost when nothing records: one relaxed atomic load and a branch per op and per backward node
// (autograd::is_recording()); nothing is allocated, timed or locked.
//
// Threads: each thread appends to its own buffer (registered with the running Profile the first
// time the thread records); key_averages() and export_chrome_trace() merge the buffers. One
// Profile records at a time: a second one while another records (a guard nested in itself) is
// an ember::Error.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/shape.h"
#include "core/graph/record.h"

namespace ember::autograd::profiler {

// Is the profiler recording? (Its bit in the recorders' word of core/graph/record.h.)
inline bool is_recording() noexcept { return autograd::is_recording(Recorder::Profiler); }

enum class EventKind { kOp, kBackward, kUser, kModule };

// One timed region.
struct Event {
  std::string name;  // "ember::mm", "MmBackward0", "my_label", "nn.Module: Linear"
  EventKind kind = EventKind::kOp;
  std::vector<Shape> input_shapes;    // tensor arguments ([] for an undefined one); grads for nodes
  std::string module_path;            // the modules open around it on its thread ("" if none)
  std::string label;                  // the innermost user label open around it ("" if none)
  int64_t start_ns = 0, end_ns = -1;  // since the Profile started; end_ns < 0: still open
  int64_t children_ns = 0;            // total time of the events directly inside it
  uint64_t thread = 0;                // the OS thread id (gettid)
  int depth = 0;                      // how many events enclose it on its thread
  int64_t total_ns() const { return end_ns - start_ns; }
  int64_t self_ns() const { return total_ns() - children_ns; }
};

// Opens an event when the profiler records, closes it on destruction (RAII): the hooks' timer
// (apply, the engine, nn::ForwardScope, RecordFunction).
class RecordEvent {
 public:
  explicit RecordEvent(std::string_view name, EventKind kind = EventKind::kUser);
  RecordEvent(std::string_view name, EventKind kind, std::vector<Shape> input_shapes);
  ~RecordEvent();
  RecordEvent(const RecordEvent&) = delete;
  RecordEvent& operator=(const RecordEvent&) = delete;

 private:
  void begin(std::string_view name, EventKind kind, std::vector<Shape> input_shapes);
  std::shared_ptr<void> buffer_;  // the thread's buffer of the Profile it records into
  std::size_t index_ = 0;         // its event in that buffer
  bool active_ = false;
};

// A user label: the one of core/graph/record.h, seen by anomaly mode and the profiler alike.
using RecordFunction = autograd::RecordFunction;

// The module path and user label open on this thread ("" when none, or when nothing records).
std::string current_module_path();
std::string current_label();

// One row of key_averages(): every event of one name (and input shapes, when grouped by them).
struct FunctionEventAvg {
  std::string key;
  std::string input_shapes;  // "[[2, 3], [3, 4]]" when grouped by input shape, else ""
  int64_t count = 0;
  int64_t self_cpu_time_total_ns = 0;
  int64_t cpu_time_total_ns = 0;
  double cpu_time_avg_ns() const {
    return count ? static_cast<double>(cpu_time_total_ns) / static_cast<double>(count) : 0.0;
  }
};

// PyTorch's EventList of averages: rows in the order their names first occurred.
struct KeyAverages {
  std::vector<FunctionEventAvg> rows;
  int64_t self_cpu_time_total_ns = 0;  // the sum of every row's self time
  // The row of `key` (the first one, when grouped by input shape); nullptr if none.
  const FunctionEventAvg* find(std::string_view key) const;
  // PyTorch's table: Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg, # of Calls
  // (and Input Shapes when grouped by them), then "Self CPU time total: ...". sort_by is one of
  // "self_cpu_time_total", "cpu_time_total", "cpu_time" (the average), "count" (descending), or
  // "" (first occurrence); row_limit < 0 shows every row. Another sort_by is an ember::Error.
  std::string table(std::string_view sort_by = "", int64_t row_limit = 100) const;
};

// Records while it lives (or until stop()). At most one records at a time.
class Profile {
 public:
  Profile();
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  // Stops recording (events still open then are left out); idempotent.
  void stop();
  bool recording() const { return recording_; }

  // Every finished event, merged from all threads, by start time.
  std::vector<Event> events() const;
  KeyAverages key_averages(bool group_by_input_shape = false) const;
  // Chrome trace-event JSON ({"traceEvents": [{"ph": "X", ...}]}) for chrome://tracing and
  // Perfetto; an ember::Error naming `path` when it cannot be written.
  void export_chrome_trace(const std::string& path) const;

 private:
  std::shared_ptr<void> session_;
  bool recording_ = false;
};

}  // namespace ember::autograd::profiler
