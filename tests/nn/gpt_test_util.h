// The tiny GPT several nn tests build: the "tiny" model of tests/fixtures/gpt.txt
// (scripts/fixtures/gen_gpt.py's GPT_CONFIG_TINY), whose weights and logits PyTorch gives after
// manual_seed(123). A test that wants it without dropout or without the qkv bias changes that
// field of the copy it gets, in sight.
#pragma once

#include "nn/gpt.h"

namespace ember::test {

inline nn::GPTConfig tiny_gpt_config() {
  return nn::GPTConfig{.vocab_size = 16,
                       .context_length = 8,
                       .emb_dim = 8,
                       .n_heads = 2,
                       .n_layers = 2,
                       .drop_rate = 0.1,
                       .qkv_bias = true};
}

}  // namespace ember::test
