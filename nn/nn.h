// Everything of nn/ in one include: Module, Parameter, hooks, init, the layers, the containers,
// the losses, the attention modules of chapter 3, the GPT model of chapter 4 with its GPT-2
// weights, and the tokenizer and data loaders of chapter 2.
#pragma once

#include "core/ops/nn_ops.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/data.h"
#include "nn/gpt.h"
#include "nn/gpt_weights.h"
#include "nn/hooks.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/tokenizer.h"
