// Everything of nn/ in one include: Module, Parameter, init, the layers, the containers, the
// losses, the attention modules of chapter 3 and the GPT model of chapter 4.
#pragma once

#include "core/ops/nn_ops.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/gpt.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/module.h"
