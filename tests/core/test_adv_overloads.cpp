// Adversarial: overloads. An integer or a braced list must not bind to the
// wrong parameter: var(x, {1}) and var(x, 1) are per-dim as torch.var(x, 1); a flag takes a
// bool only and a dim an integer only, so the calls that would silently mean something else do
// not compile. The static_asserts below are the compile-time half of the test: each
// requires-expression states whether a call compiles.
#include <gtest/gtest.h>

#include <concepts>
#include <vector>

#include "core/ember.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

// PyTorch's tensors for these tests (scripts/fixtures/gen_adversarial.py).
const test::Fixture& adv() { return test::fixture_file("adversarial.txt"); }

// ---- what compiles and what does not ----

// Whether `expr` (using a Tensor x) compiles. The requires-expression sits in a template (a
// generic lambda), so an invalid call makes it false instead of breaking the build.
#define EMBER_COMPILES(...)                \
  ([]<typename T = Tensor>() {             \
    return requires(T x) { __VA_ARGS__; }; \
  }())

// var / std
static_assert(EMBER_COMPILES(var(x)));
static_assert(EMBER_COMPILES(var(x, 1)));                   // dim 1
static_assert(EMBER_COMPILES(var(x, {1})));                 // dim 1 as well
static_assert(EMBER_COMPILES(var(x, {0, 2})));              // dims
static_assert(EMBER_COMPILES(var(x, true)));                // unbiased
static_assert(EMBER_COMPILES(var(x, 1, false, true)));      // dim, unbiased, keepdim
static_assert(EMBER_COMPILES(var(x, {1}, Correction(0))));  // an explicit correction
static_assert(EMBER_COMPILES(var(x, Correction(2))));
static_assert(!EMBER_COMPILES(var(x, 1.5)));           // a dim is an integer
static_assert(!EMBER_COMPILES(var(x, {1}, 2)));        // 2 is not a flag...
static_assert(!EMBER_COMPILES(var(x, {1}, 0, true)));  // ...nor is 0
static_assert(!EMBER_COMPILES(var(x, 1, 1)));
static_assert(!EMBER_COMPILES(var(x, {1}, {0})));  // correction must be named
static_assert(EMBER_COMPILES(std(x, 1)));
static_assert(EMBER_COMPILES(std(x, {0, 1}, false, true)));
static_assert(!EMBER_COMPILES(std(x, {1}, 2)));
static_assert(!EMBER_COMPILES(std(x, 0.5)));
static_assert(EMBER_COMPILES(x.var(1)));
static_assert(EMBER_COMPILES(x.var(-1, false, true)));
static_assert(!EMBER_COMPILES(x.var(1, 0)));
static_assert(!EMBER_COMPILES(x.std(true)));  // a flag where the dim goes
static_assert(!EMBER_COMPILES(x.std(1.0)));

// sum / mean / max / min / argmax: keepdim is a bool, the dim an integer.
static_assert(EMBER_COMPILES(x.sum(0, true)));
static_assert(!EMBER_COMPILES(x.sum(0, 1)));  // torch: TypeError (not keepdim=True)
static_assert(!EMBER_COMPILES(x.sum(true)));  // would be dim 1
static_assert(!EMBER_COMPILES(x.mean(0.5)));
static_assert(!EMBER_COMPILES(x.argmax(0, 1)));
static_assert(EMBER_COMPILES(sum(x, {0, 1}, true)));
static_assert(!EMBER_COMPILES(sum(x, {0}, 1)));
static_assert(!EMBER_COMPILES(mean(x, {0}, 0)));
static_assert(EMBER_COMPILES(max(x, 1, true)));
static_assert(!EMBER_COMPILES(max(x, true)));  // would be dim 1
static_assert(!EMBER_COMPILES(min(x, 0, 1)));
static_assert(!EMBER_COMPILES(argmax(x, false)));
static_assert(!EMBER_COMPILES(argmax(x, 1.0)));

// Scalars: an integer and a floating point number are both accepted, and mean different things.
static_assert(EMBER_COMPILES(x + 1));
static_assert(EMBER_COMPILES(x + 1.5));
static_assert(EMBER_COMPILES(x.add_(x, 2)));
static_assert(EMBER_COMPILES(x.clamp_(0, 1)));
static_assert(EMBER_COMPILES(x.clamp_(None, 1.5)));

// ---- what the calls that compile mean ----

TEST(AdvOverloads, VarOfABracedDimIsPerDimLikeTorchVar) {
  // torch.var(x, 1): per-dim, unbiased.
  Tensor x = adv().tensor("var/in/x");
  adv().expect_exact(var(x, 1), "var/var_dim1/out");
  adv().expect_exact(var(x, {1}), "var/var_dim1/out");
  adv().expect_exact(var(x, std::vector<int64_t>{1}), "var/var_dim1/out");
  adv().expect_exact(x.var(1), "var/var_dim1/out");
  adv().expect_exact(var(x, {0, 2}, false, true), "var/var_dims02_biased_keep/out");
  adv().expect_exact(var(x, false), "var/var_all_biased/out");
  adv().expect_exact(var(x, {1}, Correction(2)), "var/var_correction2/out");
}

TEST(AdvOverloads, StdOverloads) {
  Tensor x = adv().tensor("var/in/x");
  adv().expect_exact(std(x), "var/std_all/out");
  adv().expect_exact(std(x, 1), "var/std_dim1/out");
  adv().expect_exact(x.std(1), "var/std_dim1/out");
  adv().expect_exact(x.std(-1, true, true), "var/std_dim_neg1_keep/out");
  adv().expect_exact(std(x, {0, 2}, false), "var/std_dims02_biased/out");
}

TEST(AdvOverloads, IntegerAndFloatScalarsPromoteDifferently) {
  Tensor i = arange(3);
  EXPECT_EQ((i * 2).to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ((i * 2).dtype(), DType::Int64);
  EXPECT_EQ((i * 2.0).dtype(), DType::Float32);  // torch.arange(3) * 2.0 -> float32
  EXPECT_EQ((i * 2u).dtype(), DType::Int64);     // any C++ integer type is an integer
  EXPECT_EQ((i * 2.0f).dtype(), DType::Float32);
}

}  // namespace
}  // namespace ember
