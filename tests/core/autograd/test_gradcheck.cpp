// gradcheck for every differentiable op: the backward of each op must agree with central
// differences on its forward, in float64, with PyTorch's tolerances.
//
// One table, one parametrized test: each row names a case, builds its inputs from a seeded
// generator and says what to compute. Rows cover broadcasting ([2, 3] with [3], [2, 1] with
// [1, 3]), non-contiguous inputs (transposed, sliced with a step, expanded with stride 0) and
// negative dims. Every case is also run against PyTorch's output and input gradients
// (tests/fixtures/op_grads.txt, below). Then a few plain tests show that gradcheck itself catches
// wrong backwards.
#include "core/autograd/gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/base/generator.h"
#include "core/graph/function.h"
#include "core/ops/elementwise.h"
#include "core/ops/functional.h"
#include "core/ops/linalg.h"
#include "core/ops/nn_ops.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/ops/softmax.h"
#include "tests/fixtures.h"

namespace ember {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;
using Inputs = std::vector<Tensor>;

// ---- Deterministic inputs ----

// A tiny linear congruential generator (Knuth's MMIX constants): the inputs are the same on
// every run and do not depend on ember's own random ops.
class Lcg {
 public:
  explicit Lcg(uint64_t seed) : state_(seed) {}
  // Uniform in [low, high), from the top 53 bits of the state.
  double uniform(double low, double high) {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return low + (high - low) * static_cast<double>(state_ >> 11) * 0x1.0p-53;
  }

 private:
  uint64_t state_;
};

// A float64 leaf that requires grad, over the same storage as t.
Tensor make_leaf(const Tensor& t) {
  Tensor leaf = t.detach();
  leaf.requires_grad_();
  return leaf;
}

Tensor values(Lcg& rng, const Shape& shape, double low, double high) {
  std::vector<double> v(static_cast<std::size_t>(numel_of(shape)));
  for (double& x : v) x = rng.uniform(low, high);
  return from_vector(v, shape, DType::Float64);
}

// How to build one input of a case: called with the case's generator.
using MakeInput = std::function<Tensor(Lcg&)>;

// Values in [-2, 2).
MakeInput plain(Shape shape) {
  return [=](Lcg& rng) { return make_leaf(values(rng, shape, -2.0, 2.0)); };
}

// Values in [0.5, 2): for log, sqrt, pow(0.5) and denominators.
MakeInput positive(Shape shape) {
  return [=](Lcg& rng) { return make_leaf(values(rng, shape, 0.5, 2.0)); };
}

// |values| in [0.2, 2): keeps abs and relu away from their kink at 0 (no derivative there).
MakeInput away_from_zero(Shape shape) {
  return [=](Lcg& rng) {
    std::vector<double> v = values(rng, shape, 0.2, 2.0).to_vector<double>();
    for (double& x : v) x = rng.uniform(0.0, 1.0) < 0.5 ? -x : x;
    return make_leaf(from_vector(v, shape, DType::Float64));
  };
}

// All different, at least 0.25 apart: max and min without ties (a tie has no derivative).
MakeInput distinct(Shape shape) {
  return [=](Lcg& rng) {
    std::vector<double> v(static_cast<std::size_t>(numel_of(shape)));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.25 * static_cast<double>(i) - 1.0;
    for (std::size_t i = v.size(); i > 1; --i) {  // Fisher-Yates shuffle
      auto j = static_cast<std::size_t>(rng.uniform(0.0, static_cast<double>(i)));
      std::swap(v[i - 1], v[j]);
    }
    return make_leaf(from_vector(v, shape, DType::Float64));
  };
}

// Non-contiguous leaves of the given shape. Transposed: the last two dims swapped in memory.
MakeInput transposed(Shape shape) {
  return [=](Lcg& rng) {
    Shape stored = shape;
    std::swap(stored[stored.size() - 1], stored[stored.size() - 2]);
    return make_leaf(values(rng, stored, -2.0, 2.0).transpose(-1, -2));
  };
}

// Every other element of a wider tensor along the last dim, starting at 1 (offset 1, stride 2).
MakeInput strided(Shape shape) {
  return [=](Lcg& rng) {
    Shape stored = shape;
    stored.back() = 2 * shape.back() + 1;
    return make_leaf(values(rng, stored, -2.0, 2.0).slice(-1, 1, std::nullopt, 2));
  };
}

// `small` broadcast to `shape` with stride 0: several elements share one storage element.
MakeInput expanded(Shape small, Shape shape) {
  return [=](Lcg& rng) { return make_leaf(values(rng, small, -2.0, 2.0).expand(shape)); };
}

// Non-differentiable inputs, captured by the functions below.
Tensor bool_mask(const Shape& shape, const std::vector<int>& bits) {
  std::vector<double> v(bits.begin(), bits.end());
  return from_vector(v, shape, DType::Bool);
}
Tensor int_index(const Shape& shape, const std::vector<double>& v) {
  return from_vector(v, shape, DType::Int64);
}

// ---- The table ----

struct GradcheckCase {
  std::string name;                               // test name: letters, digits, underscores
  std::vector<MakeInput> inputs;                  // built in order, from one seeded Lcg
  std::function<Tensor(const Inputs&)> function;  // what gradcheck differentiates
};

std::ostream& operator<<(std::ostream& os, const GradcheckCase& c) { return os << c.name; }

std::vector<GradcheckCase> arithmetic_cases() {
  return {
      {"add_same_shape",
       {plain({2, 3}), plain({2, 3})},
       [](const Inputs& x) { return x[0] + x[1]; }},
      {"add_broadcast_2x3_with_3",
       {plain({2, 3}), plain({3})},
       [](const Inputs& x) { return add(x[0], x[1]); }},
      {"add_broadcast_2x1_with_1x3",
       {plain({2, 1}), plain({1, 3})},
       [](const Inputs& x) { return x[0] + x[1]; }},
      {"add_0d_with_2x3", {plain({}), plain({2, 3})}, [](const Inputs& x) { return x[0] + x[1]; }},
      {"add_tensor_scalar", {plain({2, 3})}, [](const Inputs& x) { return x[0] + 1.5; }},
      {"add_scalar_tensor", {plain({2, 3})}, [](const Inputs& x) { return 1.5 + x[0]; }},
      {"add_transposed_and_strided",
       {transposed({2, 3}), strided({2, 3})},
       [](const Inputs& x) { return x[0] + x[1]; }},
      {"sub_broadcast_2x1_with_1x3",
       {plain({2, 1}), plain({1, 3})},
       [](const Inputs& x) { return x[0] - x[1]; }},
      {"sub_broadcast_3_with_2x3",
       {plain({3}), plain({2, 3})},
       [](const Inputs& x) { return sub(x[0], x[1]); }},
      {"sub_tensor_scalar", {plain({2, 3})}, [](const Inputs& x) { return x[0] - 0.7; }},
      {"sub_scalar_tensor", {plain({2, 3})}, [](const Inputs& x) { return 0.7 - x[0]; }},
      {"mul_same_shape",
       {plain({2, 3}), plain({2, 3})},
       [](const Inputs& x) { return x[0] * x[1]; }},
      {"mul_broadcast_2x3_with_3",
       {plain({2, 3}), plain({3})},
       [](const Inputs& x) { return mul(x[0], x[1]); }},
      {"mul_broadcast_2x1_with_1x3",
       {plain({2, 1}), plain({1, 3})},
       [](const Inputs& x) { return x[0] * x[1]; }},
      {"mul_input_with_itself", {plain({2, 3})}, [](const Inputs& x) { return x[0] * x[0]; }},
      {"mul_tensor_scalar", {plain({2, 3})}, [](const Inputs& x) { return x[0] * 2.5; }},
      {"mul_scalar_tensor", {plain({2, 3})}, [](const Inputs& x) { return 2.5 * x[0]; }},
      {"mul_expanded_and_transposed",
       {expanded({3}, {2, 3}), transposed({2, 3})},
       [](const Inputs& x) { return x[0] * x[1]; }},
      {"mul_expanded_2x1_and_strided",
       {expanded({2, 1}, {2, 4}), strided({2, 4})},
       [](const Inputs& x) { return x[0] * x[1]; }},
      {"div_same_shape",
       {plain({2, 3}), positive({2, 3})},
       [](const Inputs& x) { return x[0] / x[1]; }},
      {"div_broadcast_2x3_with_3",
       {plain({2, 3}), positive({3})},
       [](const Inputs& x) { return div(x[0], x[1]); }},
      {"div_broadcast_2x1_with_1x3",
       {plain({2, 1}), positive({1, 3})},
       [](const Inputs& x) { return x[0] / x[1]; }},
      {"div_tensor_scalar", {plain({2, 3})}, [](const Inputs& x) { return x[0] / 4.0; }},
      {"div_scalar_tensor", {positive({2, 3})}, [](const Inputs& x) { return 3.0 / x[0]; }},
      {"neg", {plain({2, 3})}, [](const Inputs& x) { return -x[0]; }},
      {"neg_strided", {strided({2, 3})}, [](const Inputs& x) { return neg(x[0]); }},
  };
}

std::vector<GradcheckCase> unary_cases() {
  return {
      {"exp", {plain({2, 3})}, [](const Inputs& x) { return exp(x[0]); }},
      {"exp_transposed", {transposed({3, 4})}, [](const Inputs& x) { return x[0].exp(); }},
      {"log_positive", {positive({2, 3})}, [](const Inputs& x) { return log(x[0]); }},
      {"sqrt_positive", {positive({2, 3})}, [](const Inputs& x) { return sqrt(x[0]); }},
      {"pow_2", {plain({2, 3})}, [](const Inputs& x) { return pow(x[0], 2.0); }},
      {"pow_0_5", {positive({2, 3})}, [](const Inputs& x) { return pow(x[0], 0.5); }},
      {"pow_3", {plain({2, 3})}, [](const Inputs& x) { return x[0].pow(3.0); }},
      {"pow_minus_1", {away_from_zero({2, 3})}, [](const Inputs& x) { return pow(x[0], -1.0); }},
      {"abs", {away_from_zero({2, 3})}, [](const Inputs& x) { return abs(x[0]); }},
      {"tanh", {plain({2, 3})}, [](const Inputs& x) { return tanh(x[0]); }},
      {"tanh_strided", {strided({2, 3})}, [](const Inputs& x) { return tanh(x[0]); }},
      {"sigmoid", {plain({2, 3})}, [](const Inputs& x) { return sigmoid(x[0]); }},
      {"sigmoid_expanded",
       {expanded({1, 3}, {4, 3})},
       [](const Inputs& x) { return sigmoid(x[0]); }},
      {"relu", {away_from_zero({3, 4})}, [](const Inputs& x) { return relu(x[0]); }},
      {"gelu_exact", {plain({3, 4})}, [](const Inputs& x) { return gelu(x[0]); }},
      {"gelu_tanh", {plain({3, 4})}, [](const Inputs& x) { return gelu(x[0], "tanh"); }},
  };
}

std::vector<GradcheckCase> selection_cases() {
  return {
      {"maximum_broadcast_2x3_with_3",
       {plain({2, 3}), plain({3})},
       [](const Inputs& x) { return maximum(x[0], x[1]); }},
      {"minimum_broadcast_2x1_with_1x3",
       {plain({2, 1}), plain({1, 3})},
       [](const Inputs& x) { return minimum(x[0], x[1]); }},
      {"where_broadcast",
       {plain({2, 3}), plain({3})},
       [](const Inputs& x) {
         return where(bool_mask({2, 3}, {1, 0, 1, 0, 0, 1}), x[0], x[1]);
       }},
      {"where_condition_broadcast",
       {plain({2, 1}), transposed({2, 3})},
       [](const Inputs& x) {
         return where(bool_mask({3}, {0, 1, 1}), x[0], x[1]);
       }},
      {"masked_fill",
       {plain({2, 3})},
       [](const Inputs& x) {
         return masked_fill(x[0], bool_mask({2, 3}, {1, 0, 0, 0, 1, 0}), 0.5);
       }},
      {"masked_fill_broadcast_mask_transposed",
       {transposed({2, 3})},
       [](const Inputs& x) {
         return x[0].masked_fill(bool_mask({3}, {0, 1, 0}), -1.0);
       }},
      {"masked_fill_in_place_on_clone",
       {plain({2, 3})},
       [](const Inputs& x) {
         Tensor y = x[0].clone();
         y.masked_fill_(bool_mask({2, 3}, {0, 1, 0, 1, 0, 0}), 2.0);
         return y * x[0];
       }},
  };
}

std::vector<GradcheckCase> reduction_cases() {
  return {
      {"sum_all", {plain({2, 3})}, [](const Inputs& x) { return sum(x[0]); }},
      {"sum_dim_1", {plain({2, 3, 4})}, [](const Inputs& x) { return x[0].sum(1); }},
      {"sum_dims_0_2",
       {plain({2, 3, 4})},
       [](const Inputs& x) {
         return sum(x[0], {0, 2});
       }},
      {"sum_dim_keepdim",
       {plain({2, 3, 4})},
       [](const Inputs& x) { return x[0].sum(1, /*keepdim=*/true); }},
      {"sum_negative_dim", {plain({2, 3, 4})}, [](const Inputs& x) { return x[0].sum(-1); }},
      {"sum_negative_dims_keepdim_transposed",
       {transposed({2, 3, 4})},
       [](const Inputs& x) {
         return sum(x[0], {-1, -3}, /*keepdim=*/true);
       }},
      {"sum_expanded", {expanded({3}, {2, 3})}, [](const Inputs& x) { return sum(x[0], {0}); }},
      {"mean_all", {plain({2, 3})}, [](const Inputs& x) { return x[0].mean(); }},
      {"mean_dim_0", {plain({2, 3, 4})}, [](const Inputs& x) { return x[0].mean(0); }},
      {"mean_dims_keepdim",
       {plain({2, 3, 4})},
       [](const Inputs& x) {
         return mean(x[0], {0, 1}, /*keepdim=*/true);
       }},
      {"mean_negative_dim_strided",
       {strided({3, 4})},
       [](const Inputs& x) { return x[0].mean(-1); }},
      {"max_all", {distinct({3, 4})}, [](const Inputs& x) { return max(x[0]); }},
      {"max_dim_1", {distinct({3, 4})}, [](const Inputs& x) { return max(x[0], 1).values; }},
      {"max_negative_dim_keepdim",
       {distinct({2, 3, 4})},
       [](const Inputs& x) { return max(x[0], -2, /*keepdim=*/true).values; }},
      {"min_all", {distinct({3, 4})}, [](const Inputs& x) { return min(x[0]); }},
      {"min_dim_0", {distinct({3, 4})}, [](const Inputs& x) { return min(x[0], 0).values; }},
      {"min_negative_dim_keepdim",
       {distinct({2, 3, 4})},
       [](const Inputs& x) { return min(x[0], -1, /*keepdim=*/true).values; }},
      {"var_all", {plain({3, 4})}, [](const Inputs& x) { return var(x[0]); }},
      {"var_all_correction_0",
       {plain({3, 4})},
       [](const Inputs& x) { return var(x[0], Correction(0)); }},
      {"var_dim_1_correction_0",
       {plain({3, 4})},
       [](const Inputs& x) { return var(x[0], {1}, Correction(0)); }},
      {"var_dim_1_correction_1",
       {plain({3, 4})},
       [](const Inputs& x) { return var(x[0], {1}, Correction(1)); }},
      {"var_negative_dim_keepdim_transposed",
       {transposed({2, 3, 4})},
       [](const Inputs& x) { return var(x[0], {-1}, Correction(1), /*keepdim=*/true); }},
      {"var_dims_0_2",
       {plain({2, 3, 4})},
       [](const Inputs& x) {
         return var(x[0], {0, 2}, Correction(0));
       }},
  };
}

std::vector<GradcheckCase> linalg_cases() {
  return {
      {"dot", {plain({4}), plain({4})}, [](const Inputs& x) { return dot(x[0], x[1]); }},
      {"dot_strided", {strided({4}), plain({4})}, [](const Inputs& x) { return x[0].dot(x[1]); }},
      {"mv", {plain({2, 3}), plain({3})}, [](const Inputs& x) { return mv(x[0], x[1]); }},
      {"mv_transposed",
       {transposed({2, 3}), strided({3})},
       [](const Inputs& x) { return mv(x[0], x[1]); }},
      {"mm", {plain({2, 3}), plain({3, 4})}, [](const Inputs& x) { return mm(x[0], x[1]); }},
      {"mm_transposed_and_strided",
       {transposed({2, 3}), strided({3, 4})},
       [](const Inputs& x) { return mm(x[0], x[1]); }},
      {"mm_expanded",
       {expanded({1, 3}, {2, 3}), plain({3, 2})},
       [](const Inputs& x) { return mm(x[0], x[1]); }},
      {"bmm",
       {plain({2, 2, 3}), plain({2, 3, 4})},
       [](const Inputs& x) { return bmm(x[0], x[1]); }},
      {"bmm_transposed",
       {plain({2, 2, 3}), transposed({2, 3, 2})},
       [](const Inputs& x) { return bmm(x[0], x[1]); }},
      {"matmul_1d_1d",
       {plain({3}), plain({3})},
       [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul_2d_1d",
       {plain({2, 3}), plain({3})},
       [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul_1d_2d",
       {plain({3}), plain({3, 2})},
       [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul_2d_2d",
       {plain({2, 3}), plain({3, 2})},
       [](const Inputs& x) { return x[0].matmul(x[1]); }},
      {"matmul_3d_3d",
       {plain({2, 2, 3}), plain({2, 3, 2})},
       [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul_3d_2d",
       {plain({2, 2, 3}), plain({3, 2})},
       [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul_2d_3d",
       {plain({2, 3}), plain({2, 3, 2})},
       [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul_3d_1d",
       {plain({2, 2, 3}), plain({3})},
       [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul_1d_3d",
       {plain({3}), plain({2, 3, 2})},
       [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul_4d_4d",
       {plain({2, 2, 2, 3}), plain({2, 2, 3, 2})},
       [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul_4d_3d_broadcast_batch",
       {plain({2, 1, 2, 3}), plain({3, 3, 2})},
       [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul_4d_transposed_broadcast_batch",
       {plain({1, 2, 2, 3}), transposed({2, 1, 3, 2})},
       [](const Inputs& x) { return matmul(x[0], x[1]); }},
  };
}

std::vector<GradcheckCase> view_cases() {
  return {
      {"view",
       {plain({2, 3})},
       [](const Inputs& x) {
         return x[0].view({3, 2});
       }},
      {"view_inferred_dim",
       {plain({2, 3, 2})},
       [](const Inputs& x) {
         return x[0].view({-1, 4}) * 2.0;
       }},
      {"reshape", {plain({2, 3})}, [](const Inputs& x) { return x[0].reshape({6}); }},
      {"reshape_transposed_copies",
       {transposed({2, 3})},
       [](const Inputs& x) {
         return x[0].reshape({3, 2}) * 2.0;
       }},
      {"transpose", {plain({2, 3, 4})}, [](const Inputs& x) { return x[0].transpose(0, 2); }},
      {"transpose_negative_dims",
       {plain({2, 3, 4})},
       [](const Inputs& x) { return x[0].transpose(-1, -2) * 1.5; }},
      {"t", {plain({2, 3})}, [](const Inputs& x) { return x[0].t(); }},
      {"t_strided", {strided({2, 3})}, [](const Inputs& x) { return x[0].t() * 2.0; }},
      {"permute",
       {plain({2, 3, 4})},
       [](const Inputs& x) {
         return x[0].permute({2, 0, 1});
       }},
      {"permute_negative_dims",
       {plain({2, 3, 4})},
       [](const Inputs& x) {
         return x[0].permute({-1, 0, -2}) * 2.0;
       }},
      {"unsqueeze", {plain({2, 3})}, [](const Inputs& x) { return x[0].unsqueeze(1); }},
      {"unsqueeze_negative_dim",
       {plain({2, 3})},
       [](const Inputs& x) { return x[0].unsqueeze(-1) * 2.0; }},
      {"squeeze_all", {plain({2, 1, 3, 1})}, [](const Inputs& x) { return x[0].squeeze(); }},
      {"squeeze_dim", {plain({2, 1, 3})}, [](const Inputs& x) { return x[0].squeeze(1); }},
      {"squeeze_negative_dim",
       {plain({2, 1, 3})},
       [](const Inputs& x) { return x[0].squeeze(-2) * 2.0; }},
      {"flatten_all", {plain({2, 3, 2})}, [](const Inputs& x) { return x[0].flatten(); }},
      {"flatten_from_1", {plain({2, 3, 2})}, [](const Inputs& x) { return x[0].flatten(1); }},
      {"flatten_transposed",
       {transposed({2, 3, 2})},
       [](const Inputs& x) { return x[0].flatten(0, -2) * 2.0; }},
      {"expand_3_to_2x3",
       {plain({3})},
       [](const Inputs& x) {
         return x[0].expand({2, 3}) * 2.0;
       }},
      {"expand_2x1_to_2x4",
       {plain({2, 1})},
       [](const Inputs& x) {
         return x[0].expand({2, 4});
       }},
      {"expand_new_leading_dim_and_minus_1",
       {plain({2, 1})},
       [](const Inputs& x) {
         return x[0].expand({3, -1, 2}) * 2.0;
       }},
      {"select", {plain({3, 4})}, [](const Inputs& x) { return x[0].select(0, 1); }},
      {"select_negative",
       {plain({2, 3, 4})},
       [](const Inputs& x) { return x[0].select(-1, -1) * 2.0; }},
      {"select_operator_brackets",
       {transposed({3, 4})},
       [](const Inputs& x) { return x[0][2] * 2.0; }},
      {"slice_with_step", {plain({3, 5})}, [](const Inputs& x) { return x[0].slice(1, 0, 5, 2); }},
      {"slice_negative_dim_and_start",
       {plain({3, 5})},
       [](const Inputs& x) { return x[0].slice(-2, -2, std::nullopt) * 2.0; }},
      {"narrow", {plain({4, 3})}, [](const Inputs& x) { return x[0].narrow(0, 1, 2); }},
      {"narrow_negative_dim",
       {strided({3, 4})},
       [](const Inputs& x) { return x[0].narrow(-1, 1, 2) * 2.0; }},
      {"index_slices_and_integer",
       {plain({3, 4, 2})},
       [](const Inputs& x) {
         return x[0].index({Slice(None, 2), Slice(1, None, 2), 1});
       }},
      {"split_even",
       {plain({2, 6})},
       [](const Inputs& x) {
         std::vector<Tensor> parts = x[0].split(2, 1);
         return parts[0] * parts[1] + 2.0 * parts[2];
       }},
      {"split_uneven_negative_dim",
       {plain({2, 5})},
       [](const Inputs& x) {
         std::vector<Tensor> parts = x[0].split(2, -1);
         return parts[0] + parts[2];  // [2, 2] + [2, 1]
       }},
      {"chunk",
       {plain({6, 2})},
       [](const Inputs& x) {
         std::vector<Tensor> parts = x[0].chunk(3);
         return parts[0] - parts[2] * parts[1];
       }},
      {"chunk_uneven_negative_dim",
       {plain({2, 5})},
       [](const Inputs& x) {
         std::vector<Tensor> parts = x[0].chunk(2, -1);
         return parts[1] * 2.0;  // the second of [2, 3] and [2, 2]
       }},
  };
}

std::vector<GradcheckCase> combining_cases() {
  return {
      {"cat_dim_0",
       {plain({2, 3}), plain({1, 3})},
       [](const Inputs& x) {
         return cat({x[0], x[1]}, 0);
       }},
      {"cat_negative_dim_three_inputs",
       {transposed({2, 3}), plain({2, 1}), strided({2, 2})},
       [](const Inputs& x) {
         return cat({x[0], x[1], x[2]}, -1) * 2.0;
       }},
      {"cat_same_input_twice",
       {plain({2, 3})},
       [](const Inputs& x) {
         return cat({x[0], x[0]}, 1);
       }},
      {"stack_dim_0",
       {plain({2, 3}), plain({2, 3})},
       [](const Inputs& x) {
         return stack({x[0], x[1]});
       }},
      {"stack_negative_dim",
       {plain({2, 3}), transposed({2, 3})},
       [](const Inputs& x) {
         return stack({x[0], x[1]}, -1) * 2.0;
       }},
      {"index_select_repeated_rows",
       {plain({3, 2})},
       [](const Inputs& x) {
         return index_select(x[0], 0, int_index({4}, {2, 0, 2, 1}));
       }},
      {"index_select_negative_dim_strided",
       {strided({2, 4})},
       [](const Inputs& x) {
         return index_select(x[0], -1, int_index({3}, {3, 3, 0})) * 2.0;
       }},
      {"gather_dim_1",
       {plain({2, 3})},
       [](const Inputs& x) {
         return gather(x[0], 1, int_index({2, 2}, {2, 0, 1, 1}));
       }},
      {"gather_dim_0_transposed",
       {transposed({3, 2})},
       [](const Inputs& x) {
         return gather(x[0], 0, int_index({2, 2}, {0, 2, 2, 1})) * 2.0;
       }},
      {"gather_negative_dim",
       {plain({2, 2, 3})},
       [](const Inputs& x) {
         return gather(x[0], -1, int_index({2, 2, 1}, {0, 2, 1, 1})) * 2.0;
       }},
  };
}

std::vector<GradcheckCase> softmax_cases() {
  const double inf = std::numeric_limits<double>::infinity();
  return {
      {"softmax_last_dim", {plain({2, 3, 4})}, [](const Inputs& x) { return softmax(x[0], -1); }},
      {"softmax_dim_0", {plain({2, 3, 4})}, [](const Inputs& x) { return softmax(x[0], 0); }},
      {"softmax_dim_1_transposed",
       {transposed({2, 3, 4})},
       [](const Inputs& x) { return x[0].softmax(1); }},
      {"softmax_with_minus_inf_masked_entries",
       {plain({3, 3})},
       [inf](const Inputs& x) {
         // The causal mask of attention: entries above the diagonal are -inf, weight 0.
         Tensor above_diagonal = bool_mask({3, 3}, {0, 1, 1, 0, 0, 1, 0, 0, 0});
         return softmax(x[0].masked_fill(above_diagonal, -inf), -1);
       }},
      {"log_softmax_last_dim",
       {plain({2, 3, 4})},
       [](const Inputs& x) { return log_softmax(x[0], -1); }},
      {"log_softmax_dim_0_strided",
       {strided({3, 4})},
       [](const Inputs& x) { return log_softmax(x[0], 0); }},
      {"log_softmax_dim_1",
       {plain({2, 3, 4})},
       [](const Inputs& x) { return log_softmax(x[0], 1); }},
  };
}

std::vector<GradcheckCase> copy_cases() {
  return {
      {"clone", {plain({2, 3})}, [](const Inputs& x) { return x[0].clone(); }},
      {"clone_expanded",
       {expanded({3}, {2, 3})},
       [](const Inputs& x) { return x[0].clone() * x[0]; }},
      {"contiguous_of_transposed",
       {transposed({2, 3})},
       [](const Inputs& x) { return x[0].contiguous(); }},
      {"contiguous_of_contiguous",
       {plain({2, 3})},
       [](const Inputs& x) { return x[0].contiguous() * 2.0; }},
      {"copy_into_non_leaf_broadcast",
       {plain({2, 3}), plain({3})},
       [](const Inputs& x) {
         Tensor destination = x[0] * 2.0;  // a non-leaf: its old history is overwritten
         destination.copy_(x[1]);
         return destination * x[0];
       }},
      {"copy_constant_into_non_leaf",
       {plain({2, 3})},
       [](const Inputs& x) {
         Tensor destination = x[0] * 2.0;
         destination.copy_(full({2, 3}, 0.5, DType::Float64));  // no gradient flows through
         return destination * x[0];
       }},
  };
}

std::vector<GradcheckCase> dropout_cases() {
  return {
      {"dropout_p_0_is_identity",
       {plain({2, 3})},
       [](const Inputs& x) { return dropout(x[0], 0.0, /*training=*/true) * 2.0; }},
      {"dropout_not_training_is_identity",
       {plain({2, 3})},
       [](const Inputs& x) { return dropout(x[0], 0.5, /*training=*/false); }},
      {"dropout_training_fixed_seed",
       {plain({4, 5})},
       [](const Inputs& x) {
         manual_seed(0);  // every call of fn draws the same mask, so fn is a function of x
         return dropout(x[0], 0.4, /*training=*/true);
       }},
  };
}

std::vector<GradcheckCase> in_place_cases() {
  return {
      {"add_in_place_on_non_leaf_broadcast",
       {plain({2, 3}), plain({3})},
       [](const Inputs& x) {
         Tensor y = x[0] * 1.5;  // a non-leaf: in place is allowed, its history is rebased
         y.add_(x[1]);
         return y * x[0];
       }},
      {"plus_equals_on_clone",
       {transposed({2, 3}), plain({2, 3})},
       [](const Inputs& x) {
         Tensor y = x[0].clone();
         y += x[1];
         return y;
       }},
      {"mul_in_place_on_clone",
       {plain({2, 3})},
       [](const Inputs& x) {
         Tensor y = x[0].clone();
         y.mul_(3.0);
         return y * x[0];
       }},
  };
}

std::vector<GradcheckCase> nn_op_cases() {
  return {
      {"unsafe_view",
       {plain({2, 3})},
       [](const Inputs& x) {
         return unsafe_view(x[0] * 2.0, {3, 2});
       }},
      {"addmm_bias_broadcast_3",
       {plain({3}), plain({2, 4}), plain({4, 3})},
       [](const Inputs& x) { return addmm(x[0], x[1], x[2]); }},
      {"addmm_full_bias_transposed",
       {plain({2, 3}), transposed({2, 4}), strided({4, 3})},
       [](const Inputs& x) { return addmm(x[0], x[1], x[2]); }},
      {"linear_2d_with_bias",
       {plain({2, 4}), plain({3, 4}), plain({3})},
       [](const Inputs& x) { return linear(x[0], x[1], x[2]); }},
      {"linear_3d_contiguous_with_bias",
       {plain({2, 2, 4}), plain({3, 4}), plain({3})},
       [](const Inputs& x) { return linear(x[0], x[1], x[2]); }},
      {"linear_3d_transposed_with_bias",
       {transposed({2, 2, 4}), plain({3, 4}), plain({3})},
       [](const Inputs& x) { return linear(x[0], x[1], x[2]); }},
      {"linear_2d_without_bias",
       {plain({2, 4}), plain({3, 4})},
       [](const Inputs& x) { return linear(x[0], x[1]); }},
      {"linear_3d_without_bias",
       {plain({2, 2, 4}), strided({3, 4})},
       [](const Inputs& x) { return linear(x[0], x[1]); }},
      {"embedding_repeated_indices",
       {plain({5, 3})},
       [](const Inputs& x) {
         return embedding(x[0], int_index({2, 3}, {4, 0, 4, 1, 4, 2}));
       }},
      {"embedding_transposed_weight",
       {transposed({4, 3})},
       [](const Inputs& x) {
         return embedding(x[0], int_index({3}, {3, 3, 0})) * 2.0;
       }},
      {"layer_norm_last_dim_with_weight_and_bias",
       {plain({2, 3, 4}), plain({4}), plain({4})},
       [](const Inputs& x) { return layer_norm(x[0], {4}, x[1], x[2]); }},
      {"layer_norm_two_dims_without_affine",
       {plain({2, 3, 4})},
       [](const Inputs& x) {
         return layer_norm(x[0], {3, 4});
       }},
      {"layer_norm_weight_only_transposed",
       {transposed({3, 4}), plain({4})},
       [](const Inputs& x) { return layer_norm(x[0], {4}, x[1]); }},
      {"layer_norm_bias_only_large_eps",
       {plain({3, 4}), plain({4})},
       [](const Inputs& x) { return layer_norm(x[0], {4}, Tensor(), x[1], /*eps=*/0.1); }},
  };
}

std::vector<GradcheckCase> all_cases() {
  std::vector<GradcheckCase> all;
  for (auto family :
       {arithmetic_cases, unary_cases, selection_cases, reduction_cases, linalg_cases, view_cases,
        combining_cases, softmax_cases, copy_cases, in_place_cases, nn_op_cases, dropout_cases}) {
    for (GradcheckCase& c : family()) all.push_back(std::move(c));
  }
  return all;
}

class GradcheckOps : public ::testing::TestWithParam<GradcheckCase> {};

TEST_P(GradcheckOps, BackwardMatchesCentralDifferences) {
  const GradcheckCase& c = GetParam();
  // The dropout case reseeds the global generator; other tests must not see that.
  const Generator generator_before = default_generator();
  Lcg rng(20240601);
  Inputs inputs;
  for (const MakeInput& make : c.inputs) inputs.push_back(make(rng));
  autograd::GradcheckResult result = gradcheck(c.function, inputs);
  EXPECT_TRUE(result.ok) << c.name << "\n" << result.report;
  default_generator() = generator_before;
}

// Second derivatives (issue 21): the backward of every case, differentiated again through the
// graph a create_graph backward records, against central differences of its first derivatives.
TEST_P(GradcheckOps, DoubleBackwardMatchesCentralDifferences) {
  const GradcheckCase& c = GetParam();
  const Generator generator_before = default_generator();
  Lcg rng(20240601);
  Inputs inputs;
  for (const MakeInput& make : c.inputs) inputs.push_back(make(rng));
  autograd::GradcheckResult result = gradgradcheck(c.function, inputs);
  EXPECT_TRUE(result.ok) << c.name << "\n" << result.report;
  default_generator() = generator_before;
}

INSTANTIATE_TEST_SUITE_P(Gradcheck, GradcheckOps, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<GradcheckCase>& info) {
                           return info.param.name;
                         });

// Every op of the table carries its derivative formula as data (Op::formula, shown by
// autograd::explore beside the node): each node of each case's graph has a non-empty one.
TEST(GradcheckTable, EveryOpHasAFormula) {
  const Generator generator_before = default_generator();
  std::set<std::string> ops;
  for (const GradcheckCase& c : all_cases()) {
    Lcg rng(20240601);
    Inputs inputs;
    for (const MakeInput& make : c.inputs) inputs.push_back(make(rng));
    const Tensor out = c.function(inputs);
    std::vector<std::shared_ptr<autograd::Node>> stack{out.grad_fn()};
    std::set<autograd::Node*> seen;
    while (!stack.empty()) {
      auto node = stack.back();
      stack.pop_back();
      if (!node || !seen.insert(node.get()).second) continue;
      ops.insert(node->name());
      EXPECT_NE(std::string(node->formula()), "") << c.name << ": " << node->name();
      for (const auto& next : node->next_functions) stack.push_back(next);
    }
  }
  default_generator() = generator_before;
  EXPECT_GE(ops.size(), 50u);  // the table's ops, each met at least once
}

// ---- every case against PyTorch's output and gradients ----
//
// tests/fixtures/op_grads.txt (scripts/fixtures/gen_op_grads.py) holds, for each case of the
// table, PyTorch 1.13's inputs (built by the same Lcg), output, a fixed upstream gradient and
// every input's gradient, in float64. gradcheck above checks each backward against Ember's own
// forward; this checks the forward and the backward against PyTorch's, as tinygrad's
// helper_test_op does.

constexpr double kPyTorchRtol = 1e-12;  // float64: a few ulps of difference in summation order
constexpr double kPyTorchAtol = 1e-14;  // for results that cancel to (almost) zero

// Runs case c in Ember on the inputs of the table, checks that they are PyTorch's bit for bit,
// then compares the output and, after backward(upstream), every input's gradient with PyTorch's.
void expect_matches_pytorch(const GradcheckCase& c) {
  const test::Fixture& f = test::fixture_file("op_grads.txt");
  ASSERT_TRUE(f.has(c.name + "/out"))
      << "no PyTorch fixture for " << c.name << ": add it to scripts/fixtures/gen_op_grads.py";
  const Generator generator_before = default_generator();  // the dropout case reseeds it
  Lcg rng(20240601);
  Inputs inputs;
  for (const MakeInput& make : c.inputs) inputs.push_back(make(rng));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    test::expect_exact(inputs[i], f, c.name + "/in" + std::to_string(i));
  }
  Tensor out = c.function(inputs);
  default_generator() = generator_before;
  test::expect_near(out, f, c.name + "/out", kPyTorchRtol, kPyTorchAtol);
  out.backward(f.tensor(c.name + "/upstream"));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string grad = c.name + "/grad" + std::to_string(i);
    ASSERT_TRUE(f.has(grad)) << grad;
    test::expect_near(inputs[i].grad(), f, grad, kPyTorchRtol, kPyTorchAtol);
  }
}

TEST_P(GradcheckOps, ForwardAndBackwardMatchPyTorch) { expect_matches_pytorch(GetParam()); }

// The fixture and the table name the same cases: none of the table lacks PyTorch's gradients,
// and none in the fixture is stale.
TEST(GradcheckTable, EveryCaseHasPyTorchGradients) {
  std::set<std::string> table;
  for (const GradcheckCase& c : all_cases()) table.insert(c.name);
  std::set<std::string> fixture;
  const std::string suffix = "/out";
  for (const std::string& name : test::fixture_file("op_grads.txt").names()) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      fixture.insert(name.substr(0, name.size() - suffix.size()));
    }
  }
  EXPECT_EQ(table, fixture);
  EXPECT_GE(table.size(), 150u);
}

// ---- gradcheck checks itself: custom ops with wrong backwards must fail ----

// y = x, with a wrong backward: it claims dy/dx = 2.
struct WrongIdentity : autograd::OpFunction<WrongIdentity> {
  static constexpr const char* name = "WrongIdentityBackward";
  Tensor forward(const Tensor& x) { return x.clone(); }
  std::vector<Tensor> backward(const Tensor& grad) { return {2.0 * grad}; }
};
Tensor wrong_identity(const Tensor& x) { return autograd::apply<WrongIdentity>(x); }

// y = x^3 with the right backward: dy/dx = 3 x^2.
struct Cube : autograd::OpFunction<Cube> {
  static constexpr const char* name = "CubeBackward";
  Tensor forward(const Tensor& x) {
    save_for_backward({x});
    return x * x * x;
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor x = saved(0);
    return {grad * 3.0 * x * x};
  }
};
Tensor cube(const Tensor& x) { return autograd::apply<Cube>(x); }

// y = x, with a backward that adds a tiny constant: its Jacobian is within tolerance, but a
// zero grad_output does not give a zero gradient.
struct LeakyIdentity : autograd::OpFunction<LeakyIdentity> {
  static constexpr const char* name = "LeakyIdentityBackward";
  Tensor forward(const Tensor& x) { return x.clone(); }
  std::vector<Tensor> backward(const Tensor& grad) { return {grad + 1e-12}; }
};

// y = x, with a backward that changes a little every time it runs (like a nondeterministic
// atomic-add kernel): within tolerance, but not reentrant.
struct DriftingIdentity : autograd::OpFunction<DriftingIdentity> {
  static constexpr const char* name = "DriftingIdentityBackward";
  static inline int calls = 0;
  Tensor forward(const Tensor& x) { return x.clone(); }
  std::vector<Tensor> backward(const Tensor& grad) {
    ++calls;
    return {grad * (1.0 + 1e-12 * calls)};
  }
};

TEST(Gradcheck, WrongBackwardFailsAndTheReportNamesInputAndElement) {
  Lcg rng(7);
  Inputs inputs = {plain({2, 3})(rng), plain({2, 3})(rng)};
  // Input 0 goes through a correct op, input 1 through the wrong one.
  auto fn = [](const Inputs& x) { return x[0] * 3.0 + wrong_identity(x[1]); };
  autograd::GradcheckResult result = gradcheck(fn, inputs);
  EXPECT_FALSE(result.ok);
  const std::string& report = result.report;
  EXPECT_NE(report.find("Jacobian mismatch for input 1 (shape [2, 3])"), std::string::npos)
      << report;
  EXPECT_EQ(report.find("input 0"), std::string::npos) << report;
  // dy_j/dx_i is 1 on the diagonal (6 entries), where the backward claims 2.
  EXPECT_NE(report.find("6 of 36 entries differ"), std::string::npos) << report;
  // The worst entry is on the diagonal: output element j against input element j, both named
  // by flat index and multi-index.
  const std::string worst = "worst: d output element ";
  ASSERT_NE(report.find(worst), std::string::npos) << report;
  const int j = std::stoi(report.substr(report.find(worst) + worst.size()));
  const std::string index =
      "(index [" + std::to_string(j / 3) + ", " + std::to_string(j % 3) + "])";
  const std::string expected = worst + std::to_string(j) + " " + index + " / d input 1 element " +
                               std::to_string(j) + " " + index;
  EXPECT_NE(report.find(expected), std::string::npos) << expected << "\n" << report;
  // Its values: the true derivative 1 (up to rounding), and the claimed 2.
  const std::string numerical = "numerical ";
  ASSERT_NE(report.find(numerical), std::string::npos) << report;
  EXPECT_NEAR(std::stod(report.substr(report.find(numerical) + numerical.size())), 1.0, 1e-6);
  EXPECT_NE(report.find(", analytic 2 ("), std::string::npos) << report;
}

TEST(Gradcheck, WrongBackwardOnAnExpandedInputNamesItsStorageElement) {
  Lcg rng(7);
  Inputs inputs = {expanded({3}, {2, 3})(rng)};
  autograd::GradcheckResult result =
      gradcheck([](const Inputs& x) { return wrong_identity(x[0]); }, inputs);
  EXPECT_FALSE(result.ok);
  // Storage element k holds the logical elements k (index [0, k]) and 3 + k (index [1, k]).
  const std::string storage = "storage element ";
  ASSERT_NE(result.report.find(storage), std::string::npos) << result.report;
  const int k = std::stoi(result.report.substr(result.report.find(storage) + storage.size()));
  const std::string expected = storage + std::to_string(k) + ", which holds elements " +
                               std::to_string(k) + " (index [0, " + std::to_string(k) + "]) and " +
                               std::to_string(3 + k) + " (index [1, " + std::to_string(k) + "])";
  EXPECT_NE(result.report.find(expected), std::string::npos) << expected << "\n" << result.report;
}

TEST(Gradcheck, CorrectCustomOpPasses) {
  Lcg rng(11);
  Inputs inputs = {plain({2, 3})(rng)};
  autograd::GradcheckResult result = gradcheck([](const Inputs& x) { return cube(x[0]); }, inputs);
  EXPECT_TRUE(result.ok) << result.report;
  EXPECT_NE(result.report.find("gradcheck passed"), std::string::npos) << result.report;
}

TEST(Gradcheck, NonzeroGradientFromZeroGradOutputFails) {
  Lcg rng(13);
  Inputs inputs = {plain({3})(rng)};
  auto fn = [](const Inputs& x) { return autograd::apply<LeakyIdentity>(x[0]); };
  autograd::GradcheckResult result = gradcheck(fn, inputs);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.report.find("a zero grad_output gave a nonzero gradient for input 0"),
            std::string::npos)
      << result.report;
  autograd::GradcheckOptions without_zero_check;
  without_zero_check.check_zero_grad = false;
  EXPECT_TRUE(gradcheck(fn, inputs, without_zero_check).ok);
}

TEST(Gradcheck, NonReentrantBackwardFails) {
  Lcg rng(17);
  Inputs inputs = {plain({3})(rng)};
  auto fn = [](const Inputs& x) { return autograd::apply<DriftingIdentity>(x[0]); };
  autograd::GradcheckResult result = gradcheck(fn, inputs);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.report.find("backward is not reentrant for input 0"), std::string::npos)
      << result.report;
  autograd::GradcheckOptions without_reentrancy_check;
  without_reentrancy_check.check_reentrant = false;
  EXPECT_TRUE(gradcheck(fn, inputs, without_reentrancy_check).ok);
}

TEST(Gradcheck, RejectsFloat32InputsNamingTheInput) {
  Lcg rng(19);
  Tensor good = plain({2})(rng);
  Tensor single = make_leaf(values(rng, {2}, -1.0, 1.0).to(DType::Float32));
  try {
    gradcheck([](const Inputs& x) { return x[0] + x[1].to(DType::Float64); }, {good, single});
    FAIL() << "gradcheck accepted a float32 input";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 1 has dtype float32"), std::string::npos)
        << e.what();
  }
}

TEST(Gradcheck, RejectsInputsThatDoNotRequireGrad) {
  Tensor constant = full({2}, 1.0, DType::Float64);
  EXPECT_THROW(gradcheck([](const Inputs& x) { return x[0] * 2.0; }, {constant}), Error);
}

TEST(Gradcheck, RejectsInputsThatShareStorage) {
  Lcg rng(29);
  Tensor x = plain({2, 3})(rng);
  // Perturbing x would also move x.detach(): the numerical derivative would count both.
  try {
    gradcheck([](const Inputs& in) { return in[0] * in[1]; }, {x, x.detach()});
    FAIL() << "gradcheck accepted two inputs over the same storage";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inputs 0 and 1 share storage"), std::string::npos)
        << e.what();
  }
  // Disjoint parts of one storage are fine.
  Tensor base = values(rng, {2, 3}, -2.0, 2.0);
  Inputs halves = {make_leaf(base[0]), make_leaf(base[1])};
  EXPECT_TRUE(gradcheck([](const Inputs& in) { return in[0] * in[1]; }, halves).ok);
}

TEST(Gradcheck, GradgradcheckRefusesAnOutputWithoutAGraph) {
  // No first derivatives to differentiate: PyTorch's gradgradcheck raises; "passed, 0 Jacobian
  // entries" would say nothing was wrong.
  Lcg rng(31);
  Tensor x = plain({3})(rng);
  try {
    gradgradcheck([](const Inputs& in) { return in[0].detach() * 2.0; }, {x});
    FAIL() << "gradgradcheck accepted an output with no graph";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradgradcheck: fn's output (shape [3]) does not require "
                                         "grad"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(gradgradcheck([](const Inputs& in) { return in[0] * 2.0; }, {x}).ok);
}

TEST(Gradcheck, RefusesAnFnThatModifiesItsInputsInPlace) {
  // Each later call would see the modified values: PyTorch's gradcheck reports a Jacobian of
  // garbage (numerical 1e6 against analytic 0).
  Lcg rng(37);
  Tensor x = plain({3})(rng);
  Tensor c = values(rng, {3}, -1.0, 1.0);  // a constant input, modified
  try {
    gradcheck(
        [](const Inputs& in) {
          Tensor t = in[1];
          return in[0] * t.add_(1.0);
        },
        {x, c});
    FAIL() << "gradcheck accepted an fn that modifies its input";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradcheck: fn modified input 1 (shape [3]) in place"),
              std::string::npos)
        << e.what();
  }
  Tensor a = x * 1.0;  // a non-leaf input modified in place
  EXPECT_THROW(gradcheck(
                   [](const Inputs& in) {
                     Tensor t = in[0];
                     return t.mul_(2.0) * 1.0;
                   },
                   {a}),
               Error);
}

TEST(Gradcheck, LeavesInputValuesBitForBitUnchanged) {
  Lcg rng(23);
  Inputs inputs = {strided({2, 3})(rng), expanded({3}, {2, 3})(rng)};
  std::vector<double> before0 = inputs[0].to_vector<double>();
  std::vector<double> before1 = inputs[1].to_vector<double>();
  EXPECT_TRUE(gradcheck([](const Inputs& x) { return x[0] * x[1]; }, inputs).ok);
  EXPECT_EQ(inputs[0].to_vector<double>(), before0);
  EXPECT_EQ(inputs[1].to_vector<double>(), before1);
}

}  // namespace
}  // namespace ember
