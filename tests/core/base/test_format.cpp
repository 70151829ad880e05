// format_tensor must print exactly what PyTorch 1.13's repr() prints.
//
// Most cases come from tests/fixtures/format.txt (scripts/fixtures/gen_format.py, read by
// tests/fixtures.h); a few are written out by hand, as they appear in the book.
#include "core/base/format.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "tests/fixtures.h"

namespace ember {
namespace {

// ---- Hand-written cases ----

TEST(FormatTensor, SoftmaxWithGradFnOnItsOwnLine) {
  // The last line is 58 characters long: ", grad_fn=<SoftmaxBackward0>" would pass 80, so the
  // suffix goes on a new line, indented by the width of "tensor(".
  std::vector<double> v = {0.1921, 0.1646, 0.1652, 0.1550, 0.1721, 0.1510,  //
                           0.1878, 0.1690, 0.1611, 0.1567, 0.1702, 0.1552,  //
                           0.1903, 0.1633, 0.1689, 0.1575, 0.1684, 0.1516,  //
                           0.1890, 0.1651, 0.1643, 0.1601, 0.1690, 0.1525,  //
                           0.1912, 0.1622, 0.1670, 0.1559, 0.1700, 0.1537,  //
                           0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529};
  EXPECT_EQ(format_tensor({6, 6}, v, DType::Float32, {"grad_fn=<SoftmaxBackward0>"}),
            "tensor([[0.1921, 0.1646, 0.1652, 0.1550, 0.1721, 0.1510],\n"
            "        [0.1878, 0.1690, 0.1611, 0.1567, 0.1702, 0.1552],\n"
            "        [0.1903, 0.1633, 0.1689, 0.1575, 0.1684, 0.1516],\n"
            "        [0.1890, 0.1651, 0.1643, 0.1601, 0.1690, 0.1525],\n"
            "        [0.1912, 0.1622, 0.1670, 0.1559, 0.1700, 0.1537],\n"
            "        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]],\n"
            "       grad_fn=<SoftmaxBackward0>)");
}

TEST(FormatTensor, IntegerValuedFloatsPrintWithATrailingDot) {
  std::vector<double> v = {2, 2, 0, 2, 2, 0, 0, 2, 2, 0, 2, 2};
  EXPECT_EQ(format_tensor({2, 6}, v, DType::Float32),
            "tensor([[2., 2., 0., 2., 2., 0.],\n"
            "        [0., 2., 2., 0., 2., 2.]])");
}

TEST(FormatTensor, InfinitiesArePaddedToTheWidthOfTheFiniteValues) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.2899, -inf, -inf, 0.1344, 0.5202, -inf, 0.7421, 0.0512, 0.3057};
  EXPECT_EQ(format_tensor({3, 3}, v, DType::Float32),
            "tensor([[0.2899,   -inf,   -inf],\n"
            "        [0.1344, 0.5202,   -inf],\n"
            "        [0.7421, 0.0512, 0.3057]])");
}

TEST(FormatTensor, Float32ValuesAreRoundedFromTheirExactBinaryValue) {
  // 0.30065f is 0.3006500005..., which rounds up; the double 0.30065 is 0.3006499999...
  EXPECT_EQ(format_tensor({}, {static_cast<double>(0.30065f)}, DType::Float32), "tensor(0.3007)");
  EXPECT_EQ(format_tensor({}, {0.30065}, DType::Float64), "tensor(0.3006, dtype=torch.float64)");
}

TEST(FormatTensor, ScalarsIntegersAndBools) {
  EXPECT_EQ(format_tensor({}, {0.9544}, DType::Float32), "tensor(0.9544)");
  EXPECT_EQ(format_tensor({}, {1.0}, DType::Float32), "tensor(1.)");
  EXPECT_EQ(format_tensor({2}, {1, 2}, DType::Int64), "tensor([1, 2])");
  EXPECT_EQ(format_tensor({2}, {1, 0}, DType::Bool), "tensor([ True, False])");
  EXPECT_EQ(format_tensor({}, {3.0}, DType::Float32, {"requires_grad=True"}),
            "tensor(3., requires_grad=True)");
}

TEST(FormatTensor, EmptyTensorsNameTheirShapeAndDType) {
  EXPECT_EQ(format_tensor({0}, {}, DType::Float32), "tensor([])");
  EXPECT_EQ(format_tensor({0, 3}, {}, DType::Float32), "tensor([], size=(0, 3))");
  EXPECT_EQ(format_tensor({0}, {}, DType::Int64), "tensor([], dtype=torch.int64)");
}

TEST(FormatTensor, RejectsAValueCountThatDoesNotMatchTheShape) {
  EXPECT_THROW(format_tensor({2, 3}, {1, 2, 3}, DType::Float32), Error);
}

TEST(FormatSize, PrintsLikeTorchSize) {
  EXPECT_EQ(format_size({2, 6, 3}), "torch.Size([2, 6, 3])");
  EXPECT_EQ(format_size({5}), "torch.Size([5])");
  EXPECT_EQ(format_size({}), "torch.Size([])");
}

TEST(FormatShapeTuple, PrintsLikeAPythonTuple) {
  EXPECT_EQ(format_shape_tuple({2, 0, 3}), "(2, 0, 3)");
  EXPECT_EQ(format_shape_tuple({0}), "(0,)");
  EXPECT_EQ(format_shape_tuple({}), "()");
}

// ---- Fixture cases: repr() of ~70 tensors, printed by PyTorch ----

// Each case: the tensor (its values, dtype and shape), the suffixes repr() appends and repr().
TEST(FormatTensor, MatchesPyTorchRepr) {
  const test::Fixture& f = test::fixture_file("format.txt");
  const std::vector<std::string>& cases = f.keys("cases");
  ASSERT_GE(cases.size(), 60u);
  for (const std::string& name : cases) {
    const Tensor t = f.tensor(name);
    EXPECT_EQ(
        format_tensor(t.shape(), t.to_vector<double>(), t.dtype(), f.keys(name + ".suffixes")),
        f.text(name + ".repr"))
        << "case " << name;
  }
}

}  // namespace
}  // namespace ember
