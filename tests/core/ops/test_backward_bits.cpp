// Float32 gradients bit for bit against PyTorch 1.13 (tests/fixtures/backward_bits.txt, from
// scripts/fixtures/gen_backward_bits.py): DivBackward0's db, rounded as PyTorch's
// div_tensor_other_backward, -grad * ((a / b) / b); VarBackward0's dx, rounded as var_backward,
// ((2 / dof) * grad) * (x - mean); and the book's LayerNorm written as its composite (the
// chain through mean, var, sub, sqrt, div, mul, add). Until 2026-11-26 Ember rounded the first
// two as (-grad * a) / (b * b) and (grad * centered) * (2 / dof): last-bit differences that
// the chapter-5 training run (issue 25) accumulated.
#include <gtest/gtest.h>

#include <string>

#include "core/ember.h"
#include "tests/fixtures.h"

namespace ember {
namespace {

const test::Fixture& fixture() { return test::fixture_file("backward_bits.txt"); }

Tensor input(const std::string& name) { return fixture().tensor(name).requires_grad_(); }

TEST(BackwardBits, DivisionsGradientsArePyTorchs) {
  Tensor a = input("div/a"), b = input("div/b");
  (a / b).backward(fixture().tensor("div/grad"));
  test::expect_exact(a.grad(), fixture(), "div/da");
  test::expect_exact(b.grad(), fixture(), "div/db");
}

TEST(BackwardBits, VariancesGradientIsPyTorchs) {
  Tensor x = input("var/x");
  var(x, {-1}, Correction(0), /*keepdim=*/true).backward(fixture().tensor("var/grad"));
  test::expect_exact(x.grad(), fixture(), "var/dx");
  Tensor y = input("var_unbiased_dim0/x");
  y.var(0).backward(fixture().tensor("var_unbiased_dim0/grad"));
  test::expect_exact(y.grad(), fixture(), "var_unbiased_dim0/dx");
}

TEST(BackwardBits, TheBooksLayerNormCompositeIsPyTorchs) {
  Tensor x = input("layer_norm/x"), scale = input("layer_norm/scale"),
         shift = input("layer_norm/shift");
  Tensor mean = x.mean(-1, /*keepdim=*/true);
  Tensor v = var(x, {-1}, Correction(0), /*keepdim=*/true);
  Tensor norm_x = (x - mean) / sqrt(v + 1e-5);
  (scale * norm_x + shift).backward(fixture().tensor("layer_norm/grad"));
  test::expect_exact(x.grad(), fixture(), "layer_norm/dx");
  test::expect_exact(scale.grad(), fixture(), "layer_norm/dscale");
  test::expect_exact(shift.grad(), fixture(), "layer_norm/dshift");
}

}  // namespace
}  // namespace ember
