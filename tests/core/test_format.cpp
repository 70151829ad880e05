// format_tensor must print exactly what PyTorch 1.13's repr() prints.
//
// Most cases come from tests/fixtures/format.txt (scripts/fixtures/gen_format.py); a few
// are written out by hand, as they appear in the book.
#include "core/format.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"

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

struct FixtureCase {
  std::string name;
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;
  std::vector<double> values;
  std::vector<std::string> suffixes;
  std::string repr;
};

DType parse_dtype(const std::string& s) {
  if (s == "bool") return DType::Bool;
  if (s == "int64") return DType::Int64;
  if (s == "float32") return DType::Float32;
  if (s == "float64") return DType::Float64;
  ADD_FAILURE() << "unknown dtype " << s;
  return DType::Float32;
}

// Reads the record format documented in scripts/fixtures/gen_format.py.
std::vector<FixtureCase> load_fixtures(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file) << "cannot open " << path;
  std::stringstream in;
  in << file.rdbuf();

  std::vector<FixtureCase> cases;
  std::string word;
  while (in >> word) {
    if (word[0] == '#') {
      std::getline(in, word);  // a comment line
      continue;
    }
    EXPECT_EQ(word, "case");
    FixtureCase c;
    in >> c.name;

    in >> word;
    EXPECT_EQ(word, "dtype") << c.name;
    in >> word;
    c.dtype = parse_dtype(word);

    std::size_t ndim = 0;
    in >> word >> ndim;
    EXPECT_EQ(word, "shape") << c.name;
    c.shape.resize(ndim);
    for (int64_t& d : c.shape) in >> d;

    std::size_t n = 0;
    in >> word >> n;
    EXPECT_EQ(word, "values") << c.name;
    for (std::size_t i = 0; i < n; ++i) {
      in >> word;  // hex float, decimal, nan or inf: strtod reads them all exactly
      c.values.push_back(std::strtod(word.c_str(), nullptr));
    }

    std::size_t k = 0;
    in >> word >> k;
    EXPECT_EQ(word, "suffixes") << c.name;
    in.ignore(1);  // the newline
    for (std::size_t i = 0; i < k; ++i) {
      std::getline(in, word);
      c.suffixes.push_back(word);
    }

    std::size_t bytes = 0;
    in >> word >> bytes;
    EXPECT_EQ(word, "repr") << c.name;
    in.ignore(1);
    c.repr.resize(bytes);
    in.read(c.repr.data(), static_cast<std::streamsize>(bytes));

    in >> word;
    EXPECT_EQ(word, "end") << c.name;
    if (!in) break;
    cases.push_back(std::move(c));
  }
  return cases;
}

TEST(FormatTensor, MatchesPyTorchRepr) {
  std::vector<FixtureCase> cases = load_fixtures(std::string(EMBER_FIXTURES_DIR) + "/format.txt");
  ASSERT_GE(cases.size(), 60u);
  for (const FixtureCase& c : cases) {
    EXPECT_EQ(format_tensor(c.shape, c.values, c.dtype, c.suffixes), c.repr) << "case " << c.name;
  }
}

}  // namespace
}  // namespace ember
