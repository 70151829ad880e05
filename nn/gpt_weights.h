// OpenAI's pretrained GPT-2 weights in nn::GPTModel (chapter 5, section 5.5), read from GPT-2's
// model.safetensors as the Hugging Face hub stores it ("gpt2", "gpt2-medium", "gpt2-large",
// "gpt2-xl"; the transformers GPT2Model layout, names with or without a "transformer." prefix):
//
//   wte.weight [vocab, emb]            -> tok_emb.weight, and out_head.weight (GPT-2 ties them)
//   wpe.weight [context, emb]          -> pos_emb.weight
//   h.N.ln_1.weight / .bias [emb]      -> trf_blocks.N.norm1.scale / .shift
//   h.N.attn.c_attn.weight [emb, 3 emb], .bias [3 emb]
//                                      -> att.W_query, W_key, W_value (weight and bias): the
//                                         columns [0, emb), [emb, 2 emb), [2 emb, 3 emb),
//                                         transposed (GPT-2's Conv1D stores x @ W, [in, out];
//                                         nn::Linear keeps [out, in])
//   h.N.attn.c_proj.weight [emb, emb] -> att.out_proj (transposed), .bias
//   h.N.ln_2.weight / .bias            -> norm2.scale / .shift
//   h.N.mlp.c_fc.weight [emb, 4 emb]   -> ff.layers.0 (transposed), .bias
//   h.N.mlp.c_proj.weight [4 emb, emb] -> ff.layers.2 (transposed), .bias
//   ln_f.weight / .bias                -> final_norm.scale / .shift
// Buffers the file may hold (h.N.attn.bias, h.N.attn.masked_bias: causal masks) are ignored; an
// lm_head.weight, if present, must equal wte. This is the book's load_weights_into_gpt (which
// reads the TensorFlow checkpoint's params dict of the same tensors, with the same transposes).
//
// The model must be built with qkv_bias = true and the file's sizes: a tensor the config does
// not expect, a missing one, or a shape that does not fit is an ember::Error naming the tensor
// and both shapes, before any parameter is changed. So is a NaN or an infinity in a tensor (its
// name, value and index): GPT-2's weights are all finite, and a model loaded from a corrupt file
// would generate garbage without a word (PyTorch's load_state_dict copies whatever it is given).
#pragma once

#include <string>

#include "core/io/safetensors.h"
#include "nn/gpt.h"

namespace ember::nn {

// The book's model_configs over GPT_CONFIG_124M with context 1024 and qkv_bias on:
// "gpt2-small (124M)" (also "124M", "gpt2", "gpt2-small"), "gpt2-medium (355M)" ("355M"),
// "gpt2-large (774M)" ("774M"), "gpt2-xl (1558M)" ("1558M"). drop_rate 0.1 as in the book.
GPTConfig gpt2_config(const std::string& name);

// Copies the tensors into `model` (under no-grad). `tensors` as load_safetensors returns them.
void load_gpt2_weights(GPTModel& model, const NamedTensorList& tensors);
void load_gpt2_weights(GPTModel& model, const std::string& safetensors_path);

}  // namespace ember::nn
