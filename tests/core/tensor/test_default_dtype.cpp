// ember::set_default_dtype (torch.set_default_dtype): which dtype the factories, the math ops on
// integers and the book's GELU constant take, against PyTorch 1.13.
//
// The GELU's values come from tests/fixtures/default_dtype.txt, written by
// scripts/fixtures/gen_default_dtype.py (its docstring lists the entries; the GPT entries are
// read by tests/nn/test_gpt_default_dtype.cpp).
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/generator.h"
#include "core/kernels/gelu.h"
#include "core/ops/elementwise.h"
#include "core/tensor/options.h"
#include "core/tensor/random.h"
#include "core/tensor/tensor.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;

const test::Fixture& dtype_fixture() { return test::fixture_file("default_dtype.txt"); }

TEST(DefaultDtype, IsFloat32UntilSet) { EXPECT_EQ(get_default_dtype(), kFloat32); }

// Every floating factory given no dtype takes the default; integer factories stay int64 and
// the *_like factories keep their input's dtype, as PyTorch's.
TEST(DefaultDtype, FactoriesWithoutADtypeTakeIt) {
  for (DType d : {kFloat32, kFloat64}) {
    DefaultDtypeGuard guard(d);
    SCOPED_TRACE(dtype_name(d));
    EXPECT_EQ(get_default_dtype(), d);
    EXPECT_EQ(empty({2}).dtype(), d);
    EXPECT_EQ(zeros({2}).dtype(), d);
    EXPECT_EQ(ones({2}).dtype(), d);
    EXPECT_EQ(full({2}, 0.5).dtype(), d);
    EXPECT_EQ(scalar_tensor(0.5).dtype(), d);
    EXPECT_EQ(eye(3).dtype(), d);
    EXPECT_EQ(rand({2}).dtype(), d);
    EXPECT_EQ(randn({2}).dtype(), d);
    EXPECT_EQ(tensor({{0.5, 1.5}}).dtype(), d);
    EXPECT_EQ(from_vector(std::vector<double>{0.5, 1.5}, {2}).dtype(), d);
    EXPECT_EQ(zeros({2}, TensorOptions().requires_grad(true)).dtype(), d);
    // An explicit dtype wins.
    EXPECT_EQ(zeros({2}, kInt64).dtype(), kInt64);
    EXPECT_EQ(ones({2}, TensorOptions().dtype(kFloat32)).dtype(), kFloat32);
    // torch.arange(5) is int64 under every default; torch.arange(5.0) and
    // torch.arange(0, 1, 0.25) take the default.
    EXPECT_EQ(arange(5).dtype(), kInt64);
    EXPECT_EQ(arange(2, 10, 3).dtype(), kInt64);
    EXPECT_EQ(arange(5.0).dtype(), d);
    EXPECT_EQ(arange(0, 1, 0.25).dtype(), d);
    EXPECT_EQ(arange(0, 5, 1, kFloat64).dtype(), kFloat64);
    // *_like keep the input's dtype.
    const Tensor f32 = ones({2}, kFloat32);
    EXPECT_EQ(zeros_like(f32).dtype(), kFloat32);
    EXPECT_EQ(ones_like(f32).dtype(), kFloat32);
    EXPECT_EQ(full_like(f32, 2.0).dtype(), kFloat32);
    EXPECT_EQ(empty_like(f32).dtype(), kFloat32);
    EXPECT_EQ(rand_like(f32).dtype(), kFloat32);
    EXPECT_EQ(randn_like(f32).dtype(), kFloat32);
    // Integer inputs of true division, of math functions and beside a floating scalar give the
    // default dtype (torch.tensor([1, 2]) / 2, torch.exp(...), torch.arange(3) + 2.0).
    const Tensor ints = arange(3);
    EXPECT_EQ((ints / 2).dtype(), d);
    EXPECT_EQ(exp(ints).dtype(), d);
    EXPECT_EQ((ints + 2.5).dtype(), d);
    EXPECT_EQ((ints + 2).dtype(), kInt64);
  }
}

// Under float64 the factories draw doubles, the same stream as an explicit kFloat64 (whose
// draws tests/core/base's generator tests check against PyTorch's).
TEST(DefaultDtype, RandomFactoriesDrawDoubles) {
  DefaultDtypeGuard guard(kFloat64);
  manual_seed(123);
  const Tensor u = rand({20});
  const Tensor n = randn({20});
  manual_seed(123);
  EXPECT_TRUE(equal(u, rand({20}, kFloat64)));
  EXPECT_TRUE(equal(n, randn({20}, kFloat64)));
}

TEST(DefaultDtype, OnlyFloatingTypesCanBeTheDefault) {
  expect_error([] { set_default_dtype(kInt64); },
               "set_default_dtype: only floating-point types are supported as the default type, "
               "got int64");
  expect_error([] { set_default_dtype(kBool); }, "got bool");
  EXPECT_EQ(get_default_dtype(), kFloat32);
}

TEST(DefaultDtype, TheGuardRestoresThePreviousDefault) {
  {
    DefaultDtypeGuard outer(kFloat64);
    {
      DefaultDtypeGuard inner(kFloat32);
      EXPECT_EQ(zeros({1}).dtype(), kFloat32);
    }
    EXPECT_EQ(zeros({1}).dtype(), kFloat64);
  }
  EXPECT_EQ(get_default_dtype(), kFloat32);
  // Also when the scope ends by an exception.
  try {
    DefaultDtypeGuard guard(kFloat64);
    throw std::runtime_error("a failing test");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(get_default_dtype(), kFloat32);
  // A guard given a non-floating dtype throws before changing anything.
  expect_error([] { DefaultDtypeGuard guard(kInt64); }, "got int64");
  EXPECT_EQ(get_default_dtype(), kFloat32);
}

// repr names a floating dtype when it is not the default, as PyTorch's.
TEST(DefaultDtype, ReprNamesTheOtherFloatingDtype) {
  EXPECT_EQ(repr(ones({2}, kFloat64)), "tensor([1., 1.], dtype=torch.float64)");
  EXPECT_EQ(repr(ones({2}, kFloat32)), "tensor([1., 1.])");
  DefaultDtypeGuard guard(kFloat64);
  EXPECT_EQ(repr(ones({2}, kFloat64)), "tensor([1., 1.])");
  EXPECT_EQ(repr(ones({2}, kFloat32)), "tensor([1., 1.], dtype=torch.float32)");
  EXPECT_EQ(repr(ones({2}, kInt64)), "tensor([1, 1])");
  EXPECT_EQ(repr(zeros({0}, kFloat32)), "tensor([], dtype=torch.float32)");
  EXPECT_EQ(repr(zeros({0})), "tensor([])");
}

// The book's GELU builds torch.tensor(2.0 / torch.pi) at the default dtype on each call: its
// sqrt(2 / pi) is the float one under float32 (also for a float64 input) and the double one
// under float64, and the two differ, as PyTorch's do.
TEST(DefaultDtype, TheBookGelusConstantIsThatOfTheDefaultDtype) {
  const test::Fixture& f = dtype_fixture();
  const double k32 = f.tensor("gelu/k/float32").item<double>();
  const double k64 = f.tensor("gelu/k/float64").item<double>();
  EXPECT_NE(k32, k64);
  EXPECT_EQ(kernels::book_sqrt_2_over_pi(), k32);
  DefaultDtypeGuard guard(kFloat64);
  EXPECT_EQ(kernels::book_sqrt_2_over_pi(), k64);
}

TEST(DefaultDtype, TheBookGeluOnFloat64IsPyTorchsUnderEachDefault) {
  const test::Fixture& f = dtype_fixture();
  for (DType d : {kFloat32, kFloat64}) {
    DefaultDtypeGuard guard(d);
    const std::string name = dtype_name(d);
    SCOPED_TRACE(name);
    const Tensor x = f.tensor("gelu/x").requires_grad_(true);
    const Tensor y = gpt_gelu(x);
    f.expect_near(y, "gelu/y/" + name, 0, 1e-12);
    y.backward(f.tensor("gelu/dy"));
    f.expect_near(x.grad(), "gelu/dx/" + name, 0, 1e-12);
  }
  // Under float64 the values are not those of float32's constant (the test above can fail).
  const Tensor y32 = f.tensor("gelu/y/float32"), y64 = f.tensor("gelu/y/float64");
  EXPECT_FALSE(allclose(y32, y64, 0, 1e-12));
}

// The backward uses the constant its forward read, as the composite's saved tensor does, even
// when the default changes in between.
TEST(DefaultDtype, TheBookGelusBackwardKeepsItsForwardsConstant) {
  const test::Fixture& f = dtype_fixture();
  Tensor x = f.tensor("gelu/x").requires_grad_(true);
  Tensor y;
  {
    DefaultDtypeGuard guard(kFloat64);
    y = gpt_gelu(x);
  }
  y.backward(f.tensor("gelu/dy"));
  f.expect_near(x.grad(), "gelu/dx/float64", 0, 1e-12);
}

}  // namespace
}  // namespace ember
