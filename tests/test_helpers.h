// Helpers shared by the unit tests: reading a tensor's values, comparing them with expected
// numbers, catching ember::Errors, the inputs several tests start from, float32 bit patterns as
// the PyTorch fixture files store them, and checks of fused ops (second derivatives, their two
// backwards). Header-only; a test file brings in the helpers it uses with `using test::values;`
// and the like.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/autograd/engine.h"
#include "core/base/error.h"
#include "core/base/shape.h"
#include "core/graph/node.h"
#include "core/graph/profiler.h"
#include "core/tensor/random.h"
#include "core/tensor/tensor.h"

#ifndef EMBER_FIXTURES_DIR
#error "EMBER_FIXTURES_DIR must be defined (the absolute path of tests/fixtures)"
#endif

namespace ember::test {

// `name` in GoogleTest's temporary directory.
inline std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/" + name; }

// ---- memory limits (death tests) ----

// Limits this process's address space (RLIMIT_AS) to what it maps now plus `headroom` bytes: for
// the child process of a death test, whose limit the other tests do not share. False when the
// mapped size cannot be read or the limit not set.
inline bool limit_address_space(std::size_t headroom) {
  long pages = 0;
  FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return false;
  const bool read = std::fscanf(statm, "%ld", &pages) == 1;
  std::fclose(statm);
  if (!read) return false;
  rlimit limit{};
  getrlimit(RLIMIT_AS, &limit);
  limit.rlim_cur = static_cast<rlim_t>(pages) * sysconf(_SC_PAGESIZE) + headroom;
  return setrlimit(RLIMIT_AS, &limit) == 0;
}

// ---- values ----

// Every element of t as a double, row-major.
inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Every element of t (row-major) equals the expected value within tol; nan and +-inf must match
// exactly.
inline void expect_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-6) {
  std::vector<double> actual = t.to_vector<double>();
  ASSERT_EQ(actual.size(), expected.size()) << "shape " << shape_str(t.shape());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(actual[i])) << "element " << i << " is " << actual[i];
    } else if (std::isinf(expected[i])) {
      EXPECT_EQ(actual[i], expected[i]) << "element " << i;
    } else {
      EXPECT_NEAR(actual[i], expected[i], tol) << "element " << i;
    }
  }
}

// t is defined, has `shape`, and its elements are `expected` as expect_values compares them.
inline void expect_tensor(const Tensor& t, const Shape& shape, const std::vector<double>& expected,
                          double tolerance = 1e-6) {
  ASSERT_TRUE(t.defined());
  ASSERT_EQ(t.shape(), shape);
  expect_values(t, expected, tolerance);
}

// `actual` has the shape of `expected` and its values to within rtol and atol (allclose).
inline void expect_allclose(const Tensor& actual, const Tensor& expected, double rtol = 1e-5,
                            double atol = 1e-6) {
  ASSERT_TRUE(actual.defined());
  ASSERT_EQ(actual.shape(), expected.shape());
  EXPECT_TRUE(allclose(actual, expected, rtol, atol)) << "actual:\n"
                                                      << actual << "\nexpected:\n"
                                                      << expected;
}

inline std::string grad_fn_name(const Tensor& t) {
  return t.grad_fn() ? t.grad_fn()->name() : "None";
}

// ---- errors ----

// The message of the ember::Error that fn throws; "" if it throws none, so that
// EXPECT_EQ(error_of(fn), "") checks that fn runs without error.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// fn throws an ember::Error whose message contains `fragment`.
inline void expect_error(const std::function<void()>& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown; expected one containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << fragment;
  }
}

// ---- what compiles ----

// Whether `expr` (using a Tensor x) compiles, as a constant for static_assert: the calls that
// would silently mean something else (a flag passed where a dim goes) must not compile. The
// requires-expression sits in a template (a generic lambda), so an invalid call makes it false
// instead of breaking the build.
#define EMBER_COMPILES(...)                \
  ([]<typename T = Tensor>() {             \
    return requires(T x) { __VA_ARGS__; }; \
  }())

// ---- inputs ----

// 2^62: a size whose product with any size above 3 overflows int64, for the tests that sizes and
// byte counts are checked (and that an empty tensor with such a dim beside its zero is harmless).
inline constexpr int64_t kHugeDim = int64_t{1} << 62;
inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// The oracle scripts' helper, exactly (every value is a multiple of 1/8, so products and sums
// are exact in float64 and float32 alike):
//   P = lambda *shape, seed=0: torch.tensor([((i * 7 + seed * 13) % 17) / 8 - 1
//           for i in range(math.prod(shape))], dtype=torch.float64).reshape(shape)
inline Tensor pattern(const Shape& shape, int seed, DType dtype = DType::Float64) {
  std::vector<double> values(static_cast<std::size_t>(numel_of(shape)));
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<double>((i * 7 + static_cast<std::size_t>(seed) * 13) % 17) / 8 - 1;
  }
  return from_vector(values, shape, dtype);
}

// The book's six token embeddings, "Your journey starts with one step" (6x3, float32).
inline Tensor book_inputs() {
  return tensor({{0.43, 0.15, 0.89},
                 {0.55, 0.87, 0.66},
                 {0.57, 0.85, 0.64},
                 {0.22, 0.58, 0.33},
                 {0.77, 0.25, 0.10},
                 {0.05, 0.80, 0.55}});
}

// a = torch.tensor([[0.3, -1.2, 2.5, 0.7], [1.1, 0.4, -0.6, 2.5], [-2.0, 0.9, 0.2, 1.3]])
inline Tensor sample_3x4() {
  return tensor({{0.3, -1.2, 2.5, 0.7}, {1.1, 0.4, -0.6, 2.5}, {-2.0, 0.9, 0.2, 1.3}});
}

// ---- names ----

// The names of a list of (name, value) pairs, in order: keys(module.named_parameters()). An
// empty name (named_modules() names the module itself "") is listed as `empty_name`.
template <typename Named>
std::vector<std::string> keys(const Named& named, const std::string& empty_name = "") {
  std::vector<std::string> out;
  for (const auto& [key, value] : named) out.push_back(key.empty() ? empty_name : key);
  return out;
}

// ---- fixture files (tests/fixtures.h reads them) and float32 bit patterns ----

// The path of tests/fixtures/<file_name>.
inline std::string fixture_path(const std::string& file_name) {
  return std::string(EMBER_FIXTURES_DIR) + "/" + file_name;
}

// A fixture shape: "2x3", or "-" for a 0-d tensor.
inline Shape parse_shape(const std::string& text) {
  Shape shape;
  if (text == "-") return shape;
  std::istringstream dims(text);
  for (std::string d; std::getline(dims, d, 'x');) shape.push_back(std::stoll(d));
  return shape;
}

// The bit patterns of t's elements as float32, row-major.
inline std::vector<uint32_t> bits_of(const Tensor& t) {
  std::vector<uint32_t> out;
  for (float v : t.to_vector<float>()) out.push_back(std::bit_cast<uint32_t>(v));
  return out;
}

// ---- second derivatives: a fused op (or module path) against its composite ----

// The Hessian-vector products of fn: d/d inputs of sum_i <d fn(inputs) . v / d input_i, w_i>,
// with v and the w_i fixed random tensors (seeded). An input the output is linear in (a bias, a
// LayerNorm's shift) has no second derivative: its entry is undefined (allow_unused), as in
// PyTorch.
inline std::vector<Tensor> second_derivative(
    const std::function<Tensor(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& inputs) {
  Tensor out = fn(inputs);
  Generator gen(99);
  Tensor v = randn(out.shape(), DType::Float64, &gen);
  std::vector<Tensor> g = autograd::grad({out}, inputs, {v}, std::nullopt, /*create_graph=*/true);
  Tensor total = scalar_tensor(0.0, DType::Float64);
  for (const Tensor& gi : g) total = total + (gi * randn(gi.shape(), DType::Float64, &gen)).sum();
  return autograd::grad({total}, inputs, {}, std::nullopt, false, /*allow_unused=*/true);
}

// fused's and composite's second derivatives: undefined for the same inputs, and otherwise every
// element within 1e-10 * max|composite's| (which is not all zero).
inline void expect_same_second_derivative(
    const std::function<Tensor(const std::vector<Tensor>&)>& fused,
    const std::function<Tensor(const std::vector<Tensor>&)>& composite,
    const std::vector<Tensor>& inputs) {
  const std::vector<Tensor> a = second_derivative(fused, inputs);
  const std::vector<Tensor> b = second_derivative(composite, inputs);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << "input " << i;
    if (!b[i].defined()) continue;
    const std::vector<double> av = values(a[i]), bv = values(b[i]);
    ASSERT_EQ(av.size(), bv.size());
    double scale = 0;
    for (double x : bv) scale = std::max(scale, std::abs(x));
    EXPECT_GT(scale, 0.0) << "input " << i;
    for (std::size_t j = 0; j < av.size(); ++j) {
      EXPECT_NEAR(av[j], bv[j], 1e-10 * scale) << "input " << i << ", element " << j;
    }
  }
}

// ---- a fused op's two backwards (core/graph/function.h) ----

// The ops the profiler saw run inside the backward of the node named `node` (the op events
// nested in that node's events, on its thread).
inline std::set<std::string> ops_inside_backward(const autograd::profiler::Profile& prof,
                                                 const std::string& node) {
  using autograd::profiler::EventKind;
  const std::vector<autograd::profiler::Event> events = prof.events();  // by start time
  std::set<std::string> ops;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const autograd::profiler::Event& n = events[i];
    if (n.kind != EventKind::kBackward || n.name != node) continue;
    for (std::size_t j = i + 1; j < events.size(); ++j) {
      if (events[j].thread != n.thread) continue;
      if (events[j].depth <= n.depth) break;  // past the node's end
      if (events[j].kind == EventKind::kOp) ops.insert(events[j].name);
    }
  }
  return ops;
}

// f(inputs)'s grad_fn is the fused op `node`; its backward of `upstream` runs twice. First order:
// the kernel runs (the profiler sees no `formula_op`, an op of the formula, inside the node) and
// the gradients have no graph. With create_graph: the formula runs (formula_op inside the node)
// and every gradient has a graph of its own, not the NotImplemented stand-in (upstream requires
// grad there, as in a double backward, so a gradient linear in it has a graph too). The two give
// the same gradients: bit for bit when rtol is 0, else each element within rtol * max|gradient|.
inline void expect_fused_dispatch(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                  const std::vector<Tensor>& inputs, const Tensor& upstream,
                                  const std::string& node, const std::string& formula_op,
                                  double rtol) {
  SCOPED_TRACE(node + " (" + dtype_name(inputs.at(0).dtype()) + ")");
  std::vector<Tensor> first, second;
  {
    autograd::profiler::Profile prof;
    const Tensor out = f(inputs);
    ASSERT_TRUE(out.grad_fn() && out.grad_fn()->name() == node);
    first = autograd::grad({out}, inputs, {upstream});
    prof.stop();
    EXPECT_EQ(ops_inside_backward(prof, node).count(formula_op), 0u);
  }
  {
    autograd::profiler::Profile prof;
    const Tensor upstream_with_grad = upstream.detach().requires_grad_();
    second = autograd::grad({f(inputs)}, inputs, {upstream_with_grad}, std::nullopt,
                            /*create_graph=*/true);
    prof.stop();
    EXPECT_EQ(ops_inside_backward(prof, node).count(formula_op), 1u);
  }
  ASSERT_EQ(first.size(), second.size());
  for (std::size_t i = 0; i < first.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i));
    ASSERT_TRUE(first[i].defined() && second[i].defined());
    EXPECT_FALSE(first[i].requires_grad());
    ASSERT_TRUE(second[i].grad_fn() != nullptr);
    EXPECT_NE(second[i].grad_fn()->name(), "NotImplemented");
    const std::vector<double> a = values(first[i]), b = values(second[i]);
    ASSERT_EQ(a.size(), b.size());
    double scale = 0;
    for (double v : b) scale = std::max(scale, std::abs(v));
    EXPECT_GT(scale, 0.0);
    for (std::size_t j = 0; j < a.size(); ++j) {
      if (rtol == 0) {
        EXPECT_EQ(a[j], b[j]) << "element " << j;
      } else {
        EXPECT_NEAR(a[j], b[j], rtol * scale) << "element " << j;
      }
    }
  }
}

}  // namespace ember::test
