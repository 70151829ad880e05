// Everything of nn/ in one include: Module, Parameter, init, the layers, the containers and the
// attention modules of chapter 3.
#pragma once

#include "core/ops/nn_ops.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/module.h"
