#include "nn/gpt_weights.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/base/error.h"
#include "core/base/grad_mode.h"
#include "core/base/repr.h"

namespace ember::nn {

GPTConfig gpt2_config(const std::string& name) {
  GPTConfig cfg = GPT_CONFIG_124M;
  cfg.context_length = 1024;
  cfg.qkv_bias = true;
  if (name == "gpt2-small (124M)" || name == "124M" || name == "gpt2" || name == "gpt2-small") {
    cfg.emb_dim = 768, cfg.n_layers = 12, cfg.n_heads = 12;
  } else if (name == "gpt2-medium (355M)" || name == "355M" || name == "gpt2-medium") {
    cfg.emb_dim = 1024, cfg.n_layers = 24, cfg.n_heads = 16;
  } else if (name == "gpt2-large (774M)" || name == "774M" || name == "gpt2-large") {
    cfg.emb_dim = 1280, cfg.n_layers = 36, cfg.n_heads = 20;
  } else if (name == "gpt2-xl (1558M)" || name == "1558M" || name == "gpt2-xl") {
    cfg.emb_dim = 1600, cfg.n_layers = 48, cfg.n_heads = 25;
  } else {
    fail("gpt2_config: unknown model '", name,
         "' (expected gpt2-small (124M), gpt2-medium (355M), gpt2-large (774M) or gpt2-xl "
         "(1558M), or 124M, 355M, 774M, 1558M)");
  }
  return cfg;
}

void load_gpt2_weights(GPTModel& model, const std::string& safetensors_path) {
  load_gpt2_weights(model, load_safetensors(safetensors_path).tensors);
}

namespace {

// GPT-2's weights are all finite: a NaN or an infinity is a corrupt file (or one saved after
// training diverged), whose model would generate garbage without a word. An Error names the
// tensor, the value and where it is.
void check_finite(const std::string& name, const Tensor& t) {
  const Tensor c = t.contiguous();
  const float* data = c.data_ptr<float>();
  const int64_t n = c.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(data[i])) continue;
    std::string index;
    for (int64_t d = c.dim() - 1, rest = i; d >= 0; --d) {
      index = std::to_string(rest % c.size(d)) + (index.empty() ? "" : ", ") + index;
      rest /= c.size(d);
    }
    fail("load_gpt2_weights: ", name, " holds ", float_repr(data[i]), " at [", index,
         "]: GPT-2's weights are all finite (a corrupt file?); nothing was loaded");
  }
}

}  // namespace

void load_gpt2_weights(GPTModel& model, const NamedTensorList& tensors) {
  const GPTConfig& cfg = model.cfg;
  check(cfg.qkv_bias, "load_gpt2_weights: GPT-2 has biases in the query, key and value ",
        "projections: build the model with qkv_bias = true");
  // The file's tensors by name, without the "transformer." prefix transformers may write.
  std::map<std::string, Tensor> file;
  for (const auto& [raw_name, t] : tensors) {
    const std::string name = raw_name.rfind("transformer.", 0) == 0
                                 ? raw_name.substr(std::strlen("transformer."))
                                 : raw_name;
    check(file.emplace(name, t).second, "load_gpt2_weights: the tensor ", name,
          " appears twice (with and without the transformer. prefix)");
  }
  const StateDict state = model.state_dict();
  const int64_t E = cfg.emb_dim;

  // (model parameter, file tensor, the file tensor's view that goes into the parameter)
  struct Assignment {
    std::string param, source;
    Tensor value;
  };
  std::vector<Assignment> plan;
  std::set<std::string> used;
  auto source = [&](const std::string& name, const Shape& expected) -> const Tensor& {
    const auto it = file.find(name);
    check(it != file.end(), "load_gpt2_weights: the file has no tensor ", name, " (expected shape ",
          expected, " for the config: vocab ", cfg.vocab_size, ", context ", cfg.context_length,
          ", emb_dim ", E, ", ", cfg.n_layers, " layers)");
    check(it->second.shape() == expected, "load_gpt2_weights: ", name, " has shape ",
          it->second.shape(), ", expected ", expected, " for the config (vocab ", cfg.vocab_size,
          ", context ", cfg.context_length, ", emb_dim ", E, ")");
    check(it->second.dtype() == DType::Float32, "load_gpt2_weights: ", name, " has dtype ",
          dtype_name(it->second.dtype()), ", expected float32 (or F16/BF16, read as float32)");
    check_finite(name, it->second);
    used.insert(name);
    return it->second;
  };
  auto assign = [&](const std::string& param, const std::string& src, const Tensor& value) {
    const Tensor* p = state.find(param);
    check(p != nullptr, "load_gpt2_weights: the model has no parameter ", param);
    check(p->shape() == value.shape(), "load_gpt2_weights: ", src, " gives ", param, " the shape ",
          value.shape(), ", but the model's is ", p->shape());
    plan.push_back({param, src, value});
  };
  auto whole = [&](const std::string& param, const std::string& src, const Shape& shape) {
    assign(param, src, source(src, shape));
  };
  // GPT-2's Conv1D weight [in, out] -> Linear's [out, in].
  auto conv1d = [&](const std::string& param, const std::string& src, int64_t in, int64_t out) {
    assign(param + ".weight", src + ".weight", source(src + ".weight", {in, out}).t());
    whole(param + ".bias", src + ".bias", {out});
  };

  whole("tok_emb.weight", "wte.weight", {cfg.vocab_size, E});
  whole("pos_emb.weight", "wpe.weight", {cfg.context_length, E});
  whole("out_head.weight", "wte.weight", {cfg.vocab_size, E});  // tied, as the book assigns
  for (int64_t b = 0; b < cfg.n_layers; ++b) {
    const std::string h = "h." + std::to_string(b) + ".",
                      m = "trf_blocks." + std::to_string(b) + ".";
    whole(m + "norm1.scale", h + "ln_1.weight", {E});
    whole(m + "norm1.shift", h + "ln_1.bias", {E});
    const Tensor& w = source(h + "attn.c_attn.weight", {E, 3 * E});
    const Tensor& bias = source(h + "attn.c_attn.bias", {3 * E});
    const char* names[3] = {"W_query", "W_key", "W_value"};
    for (int64_t k = 0; k < 3; ++k) {
      assign(m + "att." + names[k] + ".weight", h + "attn.c_attn.weight",
             w.narrow(1, k * E, E).t());
      assign(m + "att." + names[k] + ".bias", h + "attn.c_attn.bias", bias.narrow(0, k * E, E));
    }
    conv1d(m + "att.out_proj", h + "attn.c_proj", E, E);
    whole(m + "norm2.scale", h + "ln_2.weight", {E});
    whole(m + "norm2.shift", h + "ln_2.bias", {E});
    conv1d(m + "ff.layers.0", h + "mlp.c_fc", E, 4 * E);
    conv1d(m + "ff.layers.2", h + "mlp.c_proj", 4 * E, E);
  }
  whole("final_norm.scale", "ln_f.weight", {E});
  whole("final_norm.shift", "ln_f.bias", {E});

  // What else the file may hold: the causal masks (buffers, not weights) and a tied lm_head.
  for (const auto& entry : file) {
    // (Not a structured binding: clang before 16 cannot capture one in the lambda below.)
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    if (used.count(name)) continue;
    auto ends_with = [&](const std::string& suffix) {
      return name.size() >= suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    const bool mask =
        name.rfind("h.", 0) == 0 && (ends_with(".attn.bias") || ends_with(".attn.masked_bias"));
    if (mask) continue;
    if (name == "lm_head.weight") {
      const Tensor& wte = file.at("wte.weight");
      check(t.shape() == wte.shape(), "load_gpt2_weights: lm_head.weight has shape ", t.shape(),
            ", expected wte's ", wte.shape(), " (GPT-2 ties them)");
      const Tensor a = t.contiguous(), c = wte.contiguous();
      check(std::memcmp(a.data_ptr<float>(), c.data_ptr<float>(),
                        static_cast<std::size_t>(a.numel()) * sizeof(float)) == 0,
            "load_gpt2_weights: lm_head.weight differs from wte.weight (GPT-2 ties them; the ",
            "book's GPTModel takes out_head from wte)");
      continue;
    }
    // A layer beyond the config's, or a name GPT-2 does not have.
    fail("load_gpt2_weights: the file's tensor ", name, " (shape ", t.shape(),
         ") has no place in a GPTModel of ", cfg.n_layers, " layers and emb_dim ", E);
  }

  NoGradGuard no_grad;
  for (const Assignment& a : plan) {
    Tensor p = *state.find(a.param);
    p.copy_(a.value);
  }
}

}  // namespace ember::nn
