// Everything a user of Ember needs, in one include:
//   #include <ember/ember.h>   // installed, or with Ember added by add_subdirectory
// core (Tensor, ops, autograd, random), nn (Module, layers, containers, attention), optim (when
// built). Test helpers: <ember/core/testing.h> (assert_close) and <ember/core/testing_gtest.h>
// (EXPECT_TENSOR_CLOSE, EXPECT_GRADCHECK), included on their own.
#pragma once

#include "core/ember.h"
#include "nn/nn.h"
#if __has_include("optim/optim.h")
#include "optim/optim.h"
#endif
