// The numbers of examples/web/attention_live.html: chapter 3's multi-head attention on its six
// tokens, forward and backward, for the settings the learner picked in the page.
//
// One function, attention_state, compiled twice: into the page's WebAssembly (the wasm preset;
// the page calls ember_attention_live_state through Module.ccall) and into the native program
// attention_live (every other preset), which prints the same JSON for the settings given on its
// command line. The page's test (tests/web/page_test.py) compares the two.
//
// Settings (JSON; every key optional, the chapter's value when absent; read by web::Settings,
// which refuses any other key, type or shape with an ember::Error, shown by the page and printed
// by the native program, which then exits with 2):
//   inputs   [6][3]  the embeddings of "Your journey starts with one step" (cell [24])
//   heads    1 or 2  MultiHeadAttention(d_in 3, d_out 2, context 6, dropout, heads) (cell [131])
//   dropout  bool    dropout 0.5 on the attention weights, its mask drawn after manual_seed(123)
//   weights  {name: nested list}  parameters in place of those torch.manual_seed(123) draws
//                    (names: those of named_parameters(), each list of the parameter's shape)
// The state: the settings used, the attention weights of each head, the context vectors, the
// loss (the mean of the squared context vectors: a target of zero, so that every number has a
// gradient), the gradient of every parameter and of the inputs, and the autograd graph as
// autograd::explore_data writes it (the nodes with their formulas, values and gradients).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/ember.h"
#include "examples/web/web_settings.h"
#include "nn/attention.h"

using namespace ember;
using json = nlohmann::ordered_json;  // keys in the order written: the parameters' order

namespace {

const std::vector<std::string> kTokens = {"Your", "journey", "starts", "with", "one", "step"};
const nlohmann::json kChapterInputs = {{0.43, 0.15, 0.89}, {0.55, 0.87, 0.66}, {0.57, 0.85, 0.64},
                                       {0.22, 0.58, 0.33}, {0.77, 0.25, 0.10}, {0.05, 0.80, 0.55}};

// A float32 tensor as nested JSON lists (each float widened to double: the same digits
// everywhere, written by nlohmann's shortest round-trip printer; NaN and the infinities as the
// strings "nan", "inf", "-inf", as autograd::explore_data writes them).
json to_json(const Tensor& t) {
  const std::vector<float> values = t.contiguous().to_vector<float>();
  const Shape shape = t.shape();
  std::function<json(size_t, size_t&)> nest = [&](size_t dim, size_t& at) {
    json out = json::array();
    for (int64_t i = 0; i < shape[dim]; ++i)
      out.push_back(dim + 1 == shape.size() ? web::number_json<json>(values[at++])
                                            : nest(dim + 1, at));
    return out;
  };
  size_t at = 0;
  return shape.empty() ? web::number_json<json>(values[0]) : nest(0, at);
}

}  // namespace

json attention_state(const char* settings_text) {
  const web::Settings settings(settings_text, {"inputs", "heads", "dropout", "weights"});
  const int64_t heads = settings.integer("heads", 2, 1, 2);  // d_out is 2
  const bool use_dropout = settings.boolean("dropout", false);

  manual_seed(123);
  auto mha = std::make_shared<nn::MultiHeadAttention>(3, 2, 6, use_dropout ? 0.5 : 0.0, heads);
  mha->keep_trace = true;
  if (settings.has("weights")) {
    const nlohmann::json& weights = settings["weights"];
    std::string names;
    for (const auto& [name, parameter] : mha->named_parameters())
      names += (names.empty() ? "" : ", ") + name;
    check(weights.is_object(), "settings: \"weights\" must be an object {name: nested list} (",
          names, "), got ", web::shown(weights));
    for (const auto& item : weights.items())
      check(mha->named_parameters().contains(item.key()), "settings: \"weights\" has no parameter ",
            web::shown(item.key()), " (", heads, " head", heads == 1 ? "" : "s", ": ", names, ")");
    NoGradGuard no_grad;
    for (auto& [name, parameter] : mha->named_parameters())
      if (weights.contains(name))
        parameter.copy_(web::tensor_from_json(weights[name], parameter.shape(), "weights." + name));
  }
  Tensor inputs =
      web::tensor_from_json(settings.has("inputs") ? settings["inputs"] : kChapterInputs, {6, 3},
                            "inputs")
          .requires_grad_();

  manual_seed(123);  // the dropout mask of cell [116]
  Tensor context;
  Tensor loss;
  json graph;
  {
    autograd::KeepValuesGuard keep_values;  // the graph's intermediate values, for the page
    context = mha->forward(inputs.unsqueeze(0));
    loss = (context * context).mean();
    autograd::ExploreOptions options;
    options.name_all(mha->named_parameters()).name("inputs", inputs).name("context", context);
    graph = json::parse(autograd::explore_data(loss, options));
  }
  loss.backward();

  json state;
  state["tokens"] = kTokens;
  state["inputs"] = to_json(inputs.detach());
  state["heads"] = heads;
  state["dropout"] = use_dropout;
  state["attn_weights"] = to_json(mha->trace.attn_weights.detach()[0]);
  state["context"] = to_json(context.detach()[0]);
  state["loss"] = to_json(loss.detach());
  state["weights"] = json::object();
  state["grads"] = json::object();
  for (const auto& [name, parameter] : mha->named_parameters()) {
    state["weights"][name] = to_json(parameter.detach());
    state["grads"][name] = to_json(parameter.grad());
  }
  state["grads"]["inputs"] = to_json(inputs.grad());
  state["graph"] = graph;
  return state;
}

#ifdef __EMSCRIPTEN__
// The page's entry point: the state as JSON text, or {"error": ...} (valid until the next call).
extern "C" const char* ember_attention_live_state(const char* settings) {
  static std::string result;
  result = web::answer_or_error([&] { return attention_state(settings); });
  return result.c_str();
}
#else
#include <iostream>

// attention_live [SETTINGS_JSON]: the state the page shows for these settings (default: the
// chapter's). --help says so; more arguments, or settings that are not JSON of the keys below,
// are refused.
int main(int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  if (first == "--help" || first == "-h") {
    std::cout << "usage: attention_live [SETTINGS_JSON]: the JSON state attention_live.html shows "
                 "for these settings (default: the chapter's; examples/web/attention_live.cpp "
                 "lists the keys)\n";
    return 0;
  }
  try {
    check(argc <= 2, "expected at most one argument (the settings, JSON), got ", argc - 1);
    std::cout << attention_state(first.c_str()).dump() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "attention_live: " << e.what() << "\n";
    return 2;
  }
}
#endif
