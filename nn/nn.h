// Everything of nn/ in one include: Module, Parameter, init, the layers and the containers.
#pragma once

#include "core/ops/nn_ops.h"
#include "nn/container.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/module.h"
