// Everything in core/, in one include: #include "core/ember.h". (The test helpers are not
// included: their namespace ember::testing would make GoogleTest's `testing::` ambiguous in
// code that says `using namespace ember;`. Include core/testing.h or core/testing_gtest.h.)
#pragma once

#include "core/autograd/anomaly.h"
#include "core/autograd/engine.h"
#include "core/autograd/function.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/gradcheck.h"
#include "core/autograd/record.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops/elementwise.h"
#include "core/ops/functional.h"
#include "core/ops/linalg.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/ops/softmax.h"
#include "core/ops/sort.h"
#include "core/options.h"
#include "core/ordered_dict.h"
#include "core/parallel.h"
#include "core/random.h"
#include "core/repr.h"
#include "core/safetensors.h"
#include "core/sampling.h"
#include "core/tensor.h"
