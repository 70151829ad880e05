// autograd::explore: a web page that explains the graph behind a tensor.
//
//   autograd::ExploreOptions options;
//   options.name_all(model.named_parameters());   // leaves shown as "W_query.weight"
//   autograd::explore(loss, "attention.html", options);
//
// One self-contained HTML file (its CSS, JavaScript and data inline; no network): the graph laid
// out by Graphviz's `dot` program (found on PATH), leaves by their names, nodes by PyTorch's
// names (SoftmaxBackward0) with shapes on the edges. Click a node for its forward value, the
// gradient that reached it, the gradients it sent to each input, its saved tensors and its
// derivative formula; "play backward" steps through the engine's real order.
//
// The gradients come from a backward pass of explore's own (autograd::observe_backward: retain-
// graph semantics, no leaf's .grad touched), so explore works before or after backward(), as
// long as the graph was kept: after a backward() without retain_graph the saved tensors are
// gone, and the page shows the graph and the values it still can, and says that gradients need
// retain_graph=true. Intermediate values are those of tensors still alive, or of every node when
// the forward ran under autograd::KeepValuesGuard (core/graph/function.h).
//
// The page's files are core/autograd/explorer/ (graph.html, graph.js, common.js, page.css),
// embedded at build time; `#selftest` at the end of its URL makes the page test itself (the
// browser tests in tests/core/autograd/test_explore.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember::autograd {

struct ExploreOptions {
  std::string title = "Ember: autograd graph";
  // Names for tensors: leaves (parameters, inputs) and intermediates still alive.
  std::vector<std::pair<std::string, Tensor>> names;
  // Tensors with more elements are summarised (shape, min/max/mean, a histogram, the first
  // values) instead of written in full.
  int64_t full_values_up_to = 4096;
  // explore refuses (an ember::Error) a graph of more nodes: Graphviz's layout takes seconds
  // for 10,000 nodes and grows with their square (dot 2.43 on a chain of MulBackward0 nodes:
  // 0.5 s for 2,000, 12 s for 8,000, inside dot's own ranking and positioning), while
  // explore's own work is linear (explore_data: under a second for a chain of 20,000). -1: no
  // limit; below -1 is an Error. explore_data has none.
  int64_t max_nodes = 10000;
  // The Graphviz layout program, looked up on PATH unless it contains a '/' (an executable
  // file; an empty name or a directory is not found, an Error).
  std::string dot_program = "dot";

  // Adds every (name, tensor) of a range of pairs, e.g. a Module's named_parameters(), with an
  // optional prefix ("attention." + "W_query.weight").
  template <typename Named>
  ExploreOptions& name_all(const Named& named, const std::string& prefix = "") {
    for (const auto& item : named) names.emplace_back(prefix + item.first, item.second);
    return *this;
  }
  ExploreOptions& name(const std::string& name, const Tensor& t) {
    names.emplace_back(name, t);
    return *this;
  }
};

// Writes the page for the graph behind `output` to `path`. Errors (ember::Error): an undefined
// tensor, a tensor with no graph (requires_grad false), a graph of more than options.max_nodes
// nodes, a path that cannot be written, no `dot`.
void explore(const Tensor& output, const std::string& path, const ExploreOptions& options = {});

// The data the page is made from, as JSON text (what explore embeds; for tests):
//   nodes[i]: id, name, kind ("op"/"leaf"), label, formula, shape, value, value_note, saved,
//             saved_note, inputs [{node, shape}]
//   order[k]: {node, grad, sent: [per input]}  the backward in the engine's order
//   leaf_grads: {node id: gradient}              from autograd::grad, to check the replay
//   gradients_note: why there are no gradients ("" when there are)
// A tensor is {shape, dtype, numel, text?, values?, summary?}.
std::string explore_data(const Tensor& output, const ExploreOptions& options = {});

// Pieces shared with other pages (the training report of examples/common/report.h).
namespace page {
// `json` made safe inside <script type="application/json"> ('<' escaped as \u003c).
std::string script_json(const std::string& json);
// Replaces each {{KEY}} of `html` by parts[KEY], in one pass (inserted text is not scanned).
std::string assemble(const std::string& html, const std::map<std::string, std::string>& parts);
// `text` with every byte sequence that is not UTF-8 (a stray continuation byte, a truncated or
// overlong sequence, a surrogate, past U+10FFFF) replaced by U+FFFD, one per longest failing start
// of a sequence. Every name a page or picture shows as text goes through it.
std::string valid_utf8(const std::string& text);
// Text made valid UTF-8 (valid_utf8) and escaped for HTML (& < > " ').
std::string escape_html(const std::string& text);
// `text` as a DOT double-quoted string (what explore and to_dot write for Graphviz): valid UTF-8
// (valid_utf8), a NUL byte as U+FFFD, quotes and backslashes escaped, a newline as \n, and '&'
// as "&amp;" (Graphviz reads entities in labels, so a name holding "&amp;" shows as those five
// characters, as the page's side panel shows it). Text longer than Graphviz's 16384 bytes per
// quoted string is written as several quoted strings joined by '+'.
std::string dot_quote(const std::string& text);
// A page made like explore's: `html`'s {{TITLE}} (escaped here), {{CSS}} (page.css), {{JS}}
// (common.js, then `page_js`) and {{DATA}} (`data_json`, through script_json) filled in.
std::string fill(const std::string& html, const std::string& title, const std::string& page_js,
                 const std::string& data_json);
const char* css();        // core/autograd/explorer/page.css
const char* common_js();  // core/autograd/explorer/common.js
}  // namespace page

}  // namespace ember::autograd
