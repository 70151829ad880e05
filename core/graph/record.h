// What the forward was doing when an op ran: the hook that anomaly mode (core/autograd/anomaly.h)
// and the profiler hang on.
//
// Each thread keeps a stack of open scopes: labels the user opens around plain code
//
//   {
//     autograd::RecordFunction label("gradient penalty");
//     Tensor gx = autograd::grad({loss}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
//     ...
//   }
//
// and the modules whose forward is running (nn::ForwardScope pushes "trf_blocks.1.att" when a
// module's forward starts). When someone records (a bit in a global word: anomaly mode, the
// profiler), apply<Op> gives each graph node it makes the ForwardContext of the moment: the
// innermost module path and every open label. When nobody records, every hook below is one
// relaxed atomic load and a branch: no scope is pushed, no context captured.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace ember::autograd {

namespace profiler {
class RecordEvent;  // core/graph/profiler.h: one timed event
}

// Who records. Each client sets its own bit; recording is on while any bit is.
enum class Recorder : unsigned { Anomaly = 1u, Profiler = 2u };

namespace detail {
extern std::atomic<unsigned> recorders;
}

// Who records now: the bits of Recorder, read once (apply reads it once per op).
inline unsigned recorders() { return detail::recorders.load(std::memory_order_relaxed); }
// Whether anyone records (the one branch every hook costs when no one does).
inline bool is_recording() { return recorders() != 0; }
inline bool is_recording(Recorder who) {
  return (detail::recorders.load(std::memory_order_relaxed) & static_cast<unsigned>(who)) != 0;
}
// Turns one client's bit on or off (process-wide, as PyTorch's anomaly mode).
void set_recording(Recorder who, bool on);

// One open scope of the calling thread.
struct Scope {
  enum class Kind { Label, Module };
  Kind kind = Kind::Label;
  std::string name;              // the label, or the module's dotted path ("" for the outermost)
  std::string module_type;       // modules: the class name ("MultiHeadAttention")
  const void* module = nullptr;  // modules: which module (to find a submodule's name)
};

// The calling thread's open scopes, outermost first.
const std::vector<Scope>& current_scopes();
// The innermost open module scope of the calling thread, or null.
const Scope* current_module_scope();

// What a graph node remembers of the forward that made it (captured only while recording;
// nodes made while no one records have none).
struct ForwardContext {
  bool in_module = false;
  std::string module_path;          // "trf_blocks.1.att" ("" for the outermost module)
  std::string module_type;          // "MultiHeadAttention"
  std::vector<std::string> labels;  // the open RecordFunction labels, outermost first
  // "module trf_blocks.1.att (MultiHeadAttention), label "penalty"", or "" when neither.
  std::string describe() const;
};

// The context of the moment, shared by every node made until the scopes change.
std::shared_ptr<const ForwardContext> capture_forward_context();

// A user label for the code in its scope (torch.autograd.profiler.record_function):
//   autograd::RecordFunction label("my loss");
// The one label both recorders see: anomaly mode names it in its reports of the nodes made
// inside it, and while the profiler records it is also a timed event of that name (and the
// label of every event inside it). autograd::profiler::RecordFunction is this class.
// Does nothing (one branch) when no one records.
class RecordFunction {
 public:
  explicit RecordFunction(const std::string& label);
  explicit RecordFunction(const char* label);
  ~RecordFunction();
  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;

 private:
  void push(std::string label);
  bool pushed_ = false;
  std::unique_ptr<profiler::RecordEvent> event_;  // while the profiler records
};

namespace detail {
// The module scope, for nn::ForwardScope (which computes the path: core knows no modules).
void push_module_scope(const void* module, std::string path, std::string type);
void pop_scope();
}  // namespace detail

}  // namespace ember::autograd
