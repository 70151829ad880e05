// The forward value of every op against PyTorch 1.13, without PyTorch.
//
// tests/fixtures/ops.txt is written by scripts/fixtures/gen_ops.py (its docstring lists the
// entries) and read by tests/fixtures.h: for each case name, the inputs PyTorch was given (seeded
// random tensors or edge values) and what it returned. The table below maps each name to the same
// expression written with Ember's API. Every case in the file must have a lambda here and every
// lambda a case in the file, so nothing is skipped silently. One test per name:
// OpFixtures.Matches/<name>.
//
// Results must have PyTorch's dtype and shape, and its values: bit for bit for integer and bool
// results and for the cases the script marks "exact" (views, selections, comparisons, index
// ops...); within 1e-6 + 1e-5 |b| (float32) or 1e-14 + 1e-12 |b| (float64) for the "close" ones.
// nan matches nan, inf matches the same inf.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/ops/softmax.h"
#include "core/tensor/tensor.h"
#include "tests/fixtures.h"

namespace ember {
namespace {

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;
using OpFn = std::function<Outputs(const Inputs&)>;
using Dims = std::vector<int64_t>;

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------------------------------------
// The table: case name -> the same expression with Ember's API.

template <typename F>
OpFn one(F f) {  // an op with one result
  return [f](const Inputs& x) { return Outputs{f(x)}; };
}

Outputs both(const ValuesIndices& r) { return {r.values, r.indices}; }

using Compare = Tensor (*)(const Tensor&, const Tensor&);
using CompareScalar = Tensor (*)(const Tensor&, Scalar);
using Softmax = Tensor (*)(const Tensor&, int64_t);

std::map<std::string, OpFn> build_table() {
  std::map<std::string, OpFn> t = {
      // ---- elementwise arithmetic ----
      {"add_same_3x4", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"add_bcast_2x3_3", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"add_bcast_4x1x3_2x1", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"sub_bcast_3x1_1x4", one([](const Inputs& x) { return x[0] - x[1]; })},
      {"mul_bcast_4x1x3_2x1", one([](const Inputs& x) { return x[0] * x[1]; })},
      {"div_bcast_2x3_3", one([](const Inputs& x) { return x[0] / x[1]; })},
      {"add_scalar", one([](const Inputs& x) { return x[0] + 2.5; })},
      {"sub_scalar", one([](const Inputs& x) { return x[0] - 1.25; })},
      {"mul_scalar", one([](const Inputs& x) { return x[0] * -3.0; })},
      {"div_scalar", one([](const Inputs& x) { return x[0] / 3.0; })},
      {"radd_scalar", one([](const Inputs& x) { return 0.5 + x[0]; })},
      {"rsub_scalar", one([](const Inputs& x) { return 2.0 - x[0]; })},
      {"rmul_scalar", one([](const Inputs& x) { return 4.0 * x[0]; })},
      {"rdiv_scalar", one([](const Inputs& x) { return 1.0 / x[0]; })},
      {"add_fn_scalar", one([](const Inputs& x) { return add(x[0], 0.1); })},
      {"add_f64_bcast", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"div_f64_scalar", one([](const Inputs& x) { return x[0] / 7.0; })},
      {"mul_f32_f64_promotes", one([](const Inputs& x) { return x[0] * x[1]; })},
      {"add_f32_0d_f64_stays_f32", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"add_int64", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"sub_int64", one([](const Inputs& x) { return x[0] - x[1]; })},
      {"mul_int64_scalar", one([](const Inputs& x) { return x[0] * 3; })},
      {"add_int64_float_scalar", one([](const Inputs& x) { return x[0] + 2.5; })},
      {"mul_int64_float_scalar", one([](const Inputs& x) { return x[0] * 0.5; })},
      {"rsub_int64_scalar", one([](const Inputs& x) { return 2 - x[0]; })},
      {"div_int64_tensor_is_true_div", one([](const Inputs& x) { return x[0] / x[1]; })},
      {"div_int64_scalar_is_true_div", one([](const Inputs& x) { return x[0] / 2.0; })},
      {"add_int64_f32", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"sub_int64_0d_f32", one([](const Inputs& x) { return x[0] - x[1]; })},
      {"add_0d_0d", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"mul_0d_vec", one([](const Inputs& x) { return x[0] * x[1]; })},
      {"add_empty_0x3_3", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"add_inf_nan", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"div_by_zero", one([](const Inputs& x) { return x[0] / x[1]; })},
      {"mul_large_overflow", one([](const Inputs& x) { return x[0] * 10.0; })},
      {"div_int64_by_zero", one([](const Inputs& x) { return x[0] / x[1]; })},
      {"add_bool_int64_promotes", one([](const Inputs& x) { return x[0] + x[1]; })},

      // ---- unary math ----
      {"neg", one([](const Inputs& x) { return -x[0]; })},
      {"neg_fn_int64", one([](const Inputs& x) { return neg(x[0]); })},
      {"exp", one([](const Inputs& x) { return exp(x[0]); })},
      {"exp_f64", one([](const Inputs& x) { return exp(x[0]); })},
      {"exp_edge", one([](const Inputs& x) { return exp(x[0]); })},
      {"log", one([](const Inputs& x) { return log(x[0]); })},
      {"log_f64", one([](const Inputs& x) { return log(x[0]); })},
      {"log_edge", one([](const Inputs& x) { return log(x[0]); })},
      {"sqrt", one([](const Inputs& x) { return sqrt(x[0]); })},
      {"sqrt_f64", one([](const Inputs& x) { return sqrt(x[0]); })},
      {"sqrt_edge", one([](const Inputs& x) { return sqrt(x[0]); })},
      {"pow_2", one([](const Inputs& x) { return x[0].pow(2); })},
      {"pow_3", one([](const Inputs& x) { return pow(x[0], 3); })},
      {"pow_0_5", one([](const Inputs& x) { return x[0].pow(0.5); })},
      {"pow_neg1_5", one([](const Inputs& x) { return x[0].pow(-1.5); })},
      {"pow_0_5_of_negatives", one([](const Inputs& x) { return x[0].pow(0.5); })},
      {"pow_neg1_5_f64", one([](const Inputs& x) { return x[0].pow(-1.5); })},
      {"pow_edge_neg1_5", one([](const Inputs& x) { return x[0].pow(-1.5); })},
      {"pow_edge_2", one([](const Inputs& x) { return x[0].pow(2); })},
      {"pow_int64_2", one([](const Inputs& x) { return x[0].pow(2); })},
      {"abs", one([](const Inputs& x) { return abs(x[0]); })},
      {"abs_int64", one([](const Inputs& x) { return abs(x[0]); })},
      {"abs_edge", one([](const Inputs& x) { return x[0].abs(); })},
      {"tanh", one([](const Inputs& x) { return tanh(x[0]); })},
      {"tanh_f64", one([](const Inputs& x) { return tanh(x[0]); })},
      {"tanh_edge", one([](const Inputs& x) { return tanh(x[0]); })},
      {"sigmoid", one([](const Inputs& x) { return sigmoid(x[0]); })},
      {"sigmoid_f64", one([](const Inputs& x) { return sigmoid(x[0]); })},
      {"sigmoid_edge", one([](const Inputs& x) { return sigmoid(x[0]); })},
      {"relu", one([](const Inputs& x) { return relu(x[0]); })},
      {"relu_int64", one([](const Inputs& x) { return relu(x[0]); })},
      {"gelu", one([](const Inputs& x) { return gelu(x[0]); })},
      {"gelu_tanh", one([](const Inputs& x) { return gelu(x[0], "tanh"); })},
      {"gelu_f64", one([](const Inputs& x) { return gelu(x[0], "none"); })},
      {"gelu_tanh_f64", one([](const Inputs& x) { return gelu(x[0], "tanh"); })},
      {"gelu_edge", one([](const Inputs& x) { return gelu(x[0]); })},
      {"gelu_tanh_edge", one([](const Inputs& x) { return gelu(x[0], "tanh"); })},
      {"exp_0d", one([](const Inputs& x) { return x[0].exp(); })},
      {"tanh_empty", one([](const Inputs& x) { return tanh(x[0]); })},
      {"exp_int64_is_f32", one([](const Inputs& x) { return exp(x[0]); })},
      {"sqrt_int64_is_f32", one([](const Inputs& x) { return sqrt(x[0]); })},
      {"sigmoid_int64_is_f32", one([](const Inputs& x) { return sigmoid(x[0]); })},
      {"pow_0_edge", one([](const Inputs& x) { return x[0].pow(0); })},
      {"pow_neg1_edge", one([](const Inputs& x) { return x[0].pow(-1); })},
      {"pow_neg2", one([](const Inputs& x) { return x[0].pow(-2); })},

      // ---- binary selections ----
      {"maximum_bcast", one([](const Inputs& x) { return maximum(x[0], x[1]); })},
      {"minimum_bcast", one([](const Inputs& x) { return minimum(x[0], x[1]); })},
      {"maximum_nan", one([](const Inputs& x) { return maximum(x[0], x[1]); })},
      {"minimum_nan", one([](const Inputs& x) { return minimum(x[0], x[1]); })},
      {"maximum_int64", one([](const Inputs& x) { return maximum(x[0], x[1]); })},
      {"maximum_int64_f32_promotes", one([](const Inputs& x) { return maximum(x[0], x[1]); })},
      {"minimum_f64", one([](const Inputs& x) { return minimum(x[0], x[1]); })},
      {"where_bcast", one([](const Inputs& x) { return where(x[0], x[1], x[2]); })},
      {"where_0d_other", one([](const Inputs& x) { return where(x[0], x[1], x[2]); })},
      {"where_int64", one([](const Inputs& x) { return where(x[0], x[1], x[2]); })},
      {"where_f64", one([](const Inputs& x) { return where(x[0], x[1], x[2]); })},
      {"where_mixed_dtypes_promote", one([](const Inputs& x) { return where(x[0], x[1], x[2]); })},
      {"where_from_comparison",
       one([](const Inputs& x) { return where(gt(x[0], 0.0), x[0], x[1]); })},
      {"masked_fill_neginf", one([](const Inputs& x) { return x[0].masked_fill(x[1], -kInf); })},
      {"masked_fill_bcast", one([](const Inputs& x) { return x[0].masked_fill(x[1], 0.0); })},
      {"masked_fill_causal", one([](const Inputs& x) { return masked_fill(x[0], x[1], -kInf); })},
      {"masked_fill_int64", one([](const Inputs& x) { return x[0].masked_fill(x[1], 7); })},
      {"masked_fill_f64", one([](const Inputs& x) { return x[0].masked_fill(x[1], -1e300); })},
      {"masked_fill_0d_mask", one([](const Inputs& x) { return x[0].masked_fill(x[1], 2.0); })},
      {"masked_fill_inplace", one([](const Inputs& x) {
         Tensor c = x[0].clone();
         c.masked_fill_(x[1], -1e9);
         return c;
       })},

      // ---- comparisons (the six ops' tensor, scalar and nan/inf cases are added below) ----
      {"eq_scalar_0_1_rounds_to_f32", one([](const Inputs& x) { return eq(x[0], 0.1); })},
      {"lt_int64_float_scalar", one([](const Inputs& x) { return lt(x[0], 2.5); })},
      {"ge_int64_tensor", one([](const Inputs& x) { return ge(x[0], x[1]); })},
      {"gt_int64_f32", one([](const Inputs& x) { return gt(x[0], x[1]); })},
      {"eq_f64_scalar", one([](const Inputs& x) { return eq(x[0], 2.0); })},
      {"ne_0d", one([](const Inputs& x) { return ne(x[0], x[1]); })},
      {"eq_bool", one([](const Inputs& x) { return eq(x[0], x[1]); })},

      // ---- reductions ----
      {"sum_all", one([](const Inputs& x) { return sum(x[0]); })},
      {"sum_dim0", one([](const Inputs& x) { return sum(x[0], Dims{0}); })},
      {"sum_dim1_keepdim", one([](const Inputs& x) { return sum(x[0], Dims{1}, true); })},
      {"sum_dim_neg1", one([](const Inputs& x) { return sum(x[0], Dims{-1}); })},
      {"sum_dims_0_2", one([](const Inputs& x) {
         return sum(x[0], Dims{0, 2});
       })},
      {"sum_dims_neg1_0_keepdim", one([](const Inputs& x) {
         return sum(x[0], Dims{-1, 0}, true);
       })},
      {"sum_dims_empty_list_is_all", one([](const Inputs& x) { return sum(x[0], Dims{}); })},
      {"sum_method_dim", one([](const Inputs& x) { return x[0].sum(1); })},
      {"sum_method_keepdim", one([](const Inputs& x) { return x[0].sum(-2, true); })},
      {"sum_f64", one([](const Inputs& x) {
         return sum(x[0], Dims{0, 2});
       })},
      {"sum_int64_all", one([](const Inputs& x) { return sum(x[0]); })},
      {"sum_int64_dim", one([](const Inputs& x) { return sum(x[0], Dims{1}); })},
      {"sum_bool_is_int64", one([](const Inputs& x) { return sum(x[0]); })},
      {"sum_bool_dim", one([](const Inputs& x) { return sum(x[0], Dims{0}); })},
      {"sum_large_300", one([](const Inputs& x) { return x[0].sum(); })},
      {"sum_empty_all", one([](const Inputs& x) { return sum(x[0]); })},
      {"sum_empty_dim0", one([](const Inputs& x) { return sum(x[0], Dims{0}); })},
      {"sum_empty_dim1", one([](const Inputs& x) { return sum(x[0], Dims{1}); })},
      {"sum_0d", one([](const Inputs& x) { return sum(x[0]); })},
      {"sum_0d_dim0", one([](const Inputs& x) { return sum(x[0], Dims{0}); })},
      {"sum_empty_int64", one([](const Inputs& x) { return sum(x[0]); })},
      {"sum_all_dims_keepdim", one([](const Inputs& x) {
         return sum(x[0], Dims{0, 1}, true);
       })},
      {"sum_inf_nan", one([](const Inputs& x) { return sum(x[0], Dims{1}); })},
      {"mean_all", one([](const Inputs& x) { return mean(x[0]); })},
      {"mean_dim0", one([](const Inputs& x) { return mean(x[0], Dims{0}); })},
      {"mean_dims_keepdim", one([](const Inputs& x) {
         return mean(x[0], Dims{0, -1}, true);
       })},
      {"mean_dim_neg2", one([](const Inputs& x) { return mean(x[0], Dims{-2}); })},
      {"mean_method", one([](const Inputs& x) { return x[0].mean(-1, true); })},
      {"mean_f64", one([](const Inputs& x) { return mean(x[0], Dims{1}); })},
      {"mean_empty_is_nan", one([](const Inputs& x) { return x[0].mean(); })},
      {"mean_empty_dim0_is_nan", one([](const Inputs& x) { return mean(x[0], Dims{0}); })},
      {"mean_0d", one([](const Inputs& x) { return mean(x[0]); })},
      {"max_all", one([](const Inputs& x) { return max(x[0]); })},
      {"min_all", one([](const Inputs& x) { return min(x[0]); })},
      {"max_dim1", [](const Inputs& x) { return both(max(x[0], 1)); }},
      {"max_dim0_keepdim", [](const Inputs& x) { return both(max(x[0], 0, true)); }},
      {"min_dim_neg1", [](const Inputs& x) { return both(min(x[0], -1)); }},
      {"min_dim1_3d", [](const Inputs& x) { return both(min(x[0], 1)); }},
      {"max_ties_first_index", [](const Inputs& x) { return both(max(x[0], 1)); }},
      {"min_ties_first_index", [](const Inputs& x) { return both(min(x[0], 0)); }},
      {"max_int64_all", one([](const Inputs& x) { return max(x[0]); })},
      {"max_int64_dim", [](const Inputs& x) { return both(max(x[0], 1)); }},
      {"max_f64_dim", [](const Inputs& x) { return both(max(x[0], 0)); }},
      {"max_nan_all", one([](const Inputs& x) { return max(x[0]); })},
      {"min_nan_all", one([](const Inputs& x) { return min(x[0]); })},
      {"max_nan_dim", [](const Inputs& x) { return both(max(x[0], 1)); }},
      {"max_neginf_rows", [](const Inputs& x) { return both(max(x[0], 1)); }},
      {"max_0d", one([](const Inputs& x) { return max(x[0]); })},
      {"max_size1_dim_keepdim", [](const Inputs& x) { return both(max(x[0], 1, true)); }},
      {"min_int64_dim_keepdim", [](const Inputs& x) { return both(min(x[0], -1, true)); }},
      {"var_all", one([](const Inputs& x) { return var(x[0]); })},
      {"var_all_correction0", one([](const Inputs& x) { return var(x[0], Correction(0)); })},
      {"var_all_correction2", one([](const Inputs& x) { return var(x[0], Correction(2)); })},
      {"var_dim0", one([](const Inputs& x) { return var(x[0], Dims{0}); })},
      {"var_dim1_correction0_keepdim",
       one([](const Inputs& x) { return var(x[0], Dims{1}, Correction(0), true); })},
      {"var_dims_0_2", one([](const Inputs& x) {
         return var(x[0], Dims{0, 2});
       })},
      {"var_dims_neg_keepdim", one([](const Inputs& x) {
         return var(x[0], Dims{-1, -3}, Correction(1), true);
       })},
      {"var_f64", one([](const Inputs& x) { return var(x[0], Dims{1}); })},
      {"var_offset_large_mean", one([](const Inputs& x) { return var(x[0] + 1000.0); })},
      {"var_single_element_is_nan", one([](const Inputs& x) { return var(x[0]); })},
      {"var_single_correction0",
       one([](const Inputs& x) { return var(x[0], Dims{1}, Correction(0)); })},
      {"var_constant_is_zero", one([](const Inputs& x) { return var(x[0]); })},
      {"argmax_all", one([](const Inputs& x) { return argmax(x[0]); })},
      {"argmax_dim0", one([](const Inputs& x) { return argmax(x[0], 0); })},
      {"argmax_dim_neg1_keepdim", one([](const Inputs& x) { return argmax(x[0], -1, true); })},
      {"argmax_3d_dim1", one([](const Inputs& x) { return argmax(x[0], 1); })},
      {"argmax_method", one([](const Inputs& x) { return x[0].argmax(1); })},
      {"argmax_ties_first_index", one([](const Inputs& x) { return argmax(x[0], 1); })},
      {"argmax_all_ties", one([](const Inputs& x) { return argmax(x[0]); })},
      {"argmax_int64", one([](const Inputs& x) { return argmax(x[0], 0); })},
      {"argmax_nan", one([](const Inputs& x) { return argmax(x[0]); })},
      {"argmax_neginf", one([](const Inputs& x) { return argmax(x[0]); })},
      {"argmax_0d", one([](const Inputs& x) { return argmax(x[0]); })},

      // ---- products ----
      {"dot", one([](const Inputs& x) { return dot(x[0], x[1]); })},
      {"dot_f64", one([](const Inputs& x) { return dot(x[0], x[1]); })},
      {"dot_empty", one([](const Inputs& x) { return dot(x[0], x[1]); })},
      {"dot_method", one([](const Inputs& x) { return x[0].dot(x[1]); })},
      {"mv", one([](const Inputs& x) { return mv(x[0], x[1]); })},
      {"mv_transposed", one([](const Inputs& x) { return mv(x[0].t(), x[1]); })},
      {"mm", one([](const Inputs& x) { return mm(x[0], x[1]); })},
      {"mm_transposed_inputs", one([](const Inputs& x) { return mm(x[0].t(), x[1].t()); })},
      {"mm_f64", one([](const Inputs& x) { return mm(x[0], x[1]); })},
      {"mm_k0_zeros", one([](const Inputs& x) { return mm(x[0], x[1]); })},
      {"mm_m0", one([](const Inputs& x) { return mm(x[0], x[1]); })},
      {"mm_larger", one([](const Inputs& x) { return mm(x[0], x[1]); })},
      {"bmm", one([](const Inputs& x) { return bmm(x[0], x[1]); })},
      {"bmm_f64", one([](const Inputs& x) { return bmm(x[0], x[1]); })},
      {"matmul_1d_1d", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_2d_1d", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_1d_2d", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_2d_2d", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_3d_2d", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_2d_3d", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_3d_1d", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_1d_3d", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_3d_3d", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_4d_4d", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_bcast_2x1x3x4_5x4x2", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_bcast_1x3x4_2x4x5", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_f64", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_k0_zeros", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_m0", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_transposed",
       one([](const Inputs& x) { return matmul(x[0].transpose(1, 2), x[1].transpose(-1, -2)); })},
      {"matmul_method", one([](const Inputs& x) { return x[0].matmul(x[1]); })},
      {"matmul_operator_attention",
       one([](const Inputs& x) { return matmul(x[0], x[1].transpose(-2, -1)) / std::sqrt(4.0); })},
      {"matmul_2d_4d", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"bmm_noncontiguous_batch",
       one([](const Inputs& x) { return bmm(x[0].transpose(0, 1), x[1]); })},

      // ---- cat, stack, split, chunk ----
      {"cat_dim0", one([](const Inputs& x) {
         return cat({x[0], x[1]}, 0);
       })},
      {"cat_dim1_three", one([](const Inputs& x) {
         return cat({x[0], x[1], x[2]}, 1);
       })},
      {"cat_dim_neg1_3d", one([](const Inputs& x) {
         return cat({x[0], x[1]}, -1);
       })},
      {"cat_with_empty", one([](const Inputs& x) {
         return cat({x[0], x[1]});
       })},
      {"cat_int64", one([](const Inputs& x) {
         return cat({x[0], x[1]});
       })},
      {"cat_f64", one([](const Inputs& x) {
         return cat({x[0], x[1]});
       })},
      {"cat_noncontiguous", one([](const Inputs& x) {
         return cat({x[0].t(), x[1]}, 1);
       })},
      {"cat_single", one([](const Inputs& x) { return cat({x[0]}, 1); })},
      {"stack_dim0", one([](const Inputs& x) {
         return stack({x[0], x[1], x[2]});
       })},
      {"stack_dim1", one([](const Inputs& x) {
         return stack({x[0], x[1]}, 1);
       })},
      {"stack_dim2_last", one([](const Inputs& x) {
         return stack({x[0], x[1]}, 2);
       })},
      {"stack_dim_neg1", one([](const Inputs& x) {
         return stack({x[0], x[1]}, -1);
       })},
      {"stack_dim_neg3", one([](const Inputs& x) {
         return stack({x[0], x[1]}, -3);
       })},
      {"stack_0d", one([](const Inputs& x) {
         return stack({x[0], x[1]});
       })},
      {"stack_int64", one([](const Inputs& x) {
         return stack({x[0], x[1]}, 1);
       })},
      {"stack_noncontiguous", one([](const Inputs& x) {
         return stack({x[0].t(), x[1]});
       })},
      {"cat_mixed_dtypes_promote", one([](const Inputs& x) {
         return cat({x[0], x[1]});
       })},
      {"split_2_dim0", [](const Inputs& x) { return x[0].split(2, 0); }},
      {"split_2_dim1", [](const Inputs& x) { return x[0].split(2, 1); }},
      {"split_dim_neg1_exact", [](const Inputs& x) { return x[0].split(3, -1); }},
      {"split_larger_than_dim", [](const Inputs& x) { return x[0].split(5); }},
      {"chunk_3_of_5", [](const Inputs& x) { return x[0].chunk(3); }},
      {"chunk_4_of_6_gives_3", [](const Inputs& x) { return x[0].chunk(4); }},
      {"chunk_5_of_3_gives_3", [](const Inputs& x) { return x[0].chunk(5); }},
      {"chunk_dim1", [](const Inputs& x) { return x[0].chunk(2, 1); }},
      {"chunk_dim_neg1", [](const Inputs& x) { return x[0].chunk(3, -1); }},

      // ---- index_select, gather ----
      {"index_select_dim0_repeats",
       one([](const Inputs& x) { return index_select(x[0], 0, x[1]); })},
      {"index_select_dim1", one([](const Inputs& x) { return index_select(x[0], 1, x[1]); })},
      {"index_select_dim_neg1_3d",
       one([](const Inputs& x) { return index_select(x[0], -1, x[1]); })},
      {"index_select_int64", one([](const Inputs& x) { return index_select(x[0], 0, x[1]); })},
      {"index_select_empty_index",
       one([](const Inputs& x) { return index_select(x[0], 0, x[1]); })},
      {"gather_dim0", one([](const Inputs& x) { return gather(x[0], 0, x[1]); })},
      {"gather_dim1", one([](const Inputs& x) { return gather(x[0], 1, x[1]); })},
      {"gather_dim_neg1_3d", one([](const Inputs& x) { return gather(x[0], -1, x[1]); })},
      {"gather_int64", one([](const Inputs& x) { return gather(x[0], 1, x[1]); })},
      {"index_select_noncontiguous",
       one([](const Inputs& x) { return index_select(x[0].t(), 1, x[1]); })},
      {"gather_noncontiguous", one([](const Inputs& x) { return gather(x[0].t(), 1, x[1]); })},

      // ---- views (compared by their values) ----
      {"transpose_2d", one([](const Inputs& x) { return x[0].transpose(0, 1); })},
      {"transpose_3d_neg", one([](const Inputs& x) { return x[0].transpose(-1, -3); })},
      {"t_2d", one([](const Inputs& x) { return x[0].t(); })},
      {"mT_3d", one([](const Inputs& x) { return x[0].mT(); })},
      {"permute_3d", one([](const Inputs& x) {
         return x[0].permute({2, 0, 1});
       })},
      {"permute_neg", one([](const Inputs& x) {
         return x[0].permute({-1, 0, -2});
       })},
      {"slice_step2", one([](const Inputs& x) { return x[0].slice(1, 1, None, 2); })},
      {"slice_step3_dim0", one([](const Inputs& x) { return x[0].slice(0, None, None, 3); })},
      {"slice_neg_start", one([](const Inputs& x) { return x[0].slice(0, -4, -1); })},
      {"slice_clamped", one([](const Inputs& x) { return x[0].slice(0, 1, 100); })},
      {"slice_empty", one([](const Inputs& x) { return x[0].slice(0, 2, 1); })},
      {"index_int_and_step", one([](const Inputs& x) {
         return x[0].index({int64_t{1}, Slice(None, None, 2)});
       })},
      {"index_slices", one([](const Inputs& x) {
         return x[0].index({Slice(1), Slice(None, -1)});
       })},
      {"narrow", one([](const Inputs& x) { return x[0].narrow(1, 1, 2); })},
      {"select_neg", one([](const Inputs& x) { return x[0].select(-1, 2); })},
      {"select_neg_index", one([](const Inputs& x) { return x[0][-1]; })},
      {"expand", one([](const Inputs& x) {
         return x[0].expand({2, 3, 4});
       })},
      {"expand_minus1", one([](const Inputs& x) {
         return x[0].expand({2, -1, 4});
       })},
      {"unsqueeze_0d", one([](const Inputs& x) { return x[0].unsqueeze(0); })},
      {"flatten_0d", one([](const Inputs& x) { return x[0].flatten(); })},
      {"reshape_0d", one([](const Inputs& x) {
         return x[0].reshape({1, 1});
       })},
      {"view_minus1", one([](const Inputs& x) { return x[0].view({-1}); })},
      {"unsqueeze_neg", one([](const Inputs& x) { return x[0].unsqueeze(-1); })},
      {"squeeze_all", one([](const Inputs& x) { return x[0].squeeze(); })},
      {"squeeze_dim", one([](const Inputs& x) { return x[0].squeeze(2); })},
      {"flatten_from1", one([](const Inputs& x) { return x[0].flatten(1); })},
      {"flatten_all", one([](const Inputs& x) { return x[0].flatten(); })},
      {"view", one([](const Inputs& x) {
         return x[0].view({3, 4});
       })},
      {"reshape_noncontiguous", one([](const Inputs& x) {
         return x[0].t().reshape({2, 6});
       })},
      {"reshape_infer", one([](const Inputs& x) {
         return x[0].reshape({-1, 2});
       })},
      {"contiguous_of_permute", one([](const Inputs& x) {
         return x[0].permute({1, 2, 0}).contiguous();
       })},
      {"clone_of_slice",
       one([](const Inputs& x) { return x[0].slice(0, None, None, 2).slice(1, 1, None).clone(); })},
      {"chained_views", one([](const Inputs& x) {
         return x[0].transpose(0, 2).slice(0, 1, None, 2).permute({2, 0, 1}).select(2, 1);
       })},
      {"exp_of_transposed", one([](const Inputs& x) { return x[0].t().exp(); })},
      {"add_noncontiguous", one([](const Inputs& x) { return x[0].t() + x[1]; })},
      {"sum_of_permuted", one([](const Inputs& x) {
         return x[0].permute({2, 0, 1}).sum(1);
       })},
      {"mean_of_sliced", one([](const Inputs& x) { return x[0].slice(1, None, None, 2).mean(0); })},
      {"softmax_of_transposed", one([](const Inputs& x) { return x[0].t().softmax(-1); })},
      {"max_of_transposed", [](const Inputs& x) { return both(max(x[0].t(), 1)); }},

      // ---- triu, tril, arange, eye ----
      {"triu_0", one([](const Inputs& x) { return triu(x[0]); })},
      {"triu_1", one([](const Inputs& x) { return triu(x[0], 1); })},
      {"triu_neg1", one([](const Inputs& x) { return triu(x[0], -1); })},
      {"triu_batched", one([](const Inputs& x) { return triu(x[0], 1); })},
      {"triu_diag_beyond", one([](const Inputs& x) { return triu(x[0], 5); })},
      {"tril_0", one([](const Inputs& x) { return tril(x[0]); })},
      {"tril_neg1", one([](const Inputs& x) { return tril(x[0], -1); })},
      {"tril_2", one([](const Inputs& x) { return tril(x[0], 2); })},
      {"tril_int64", one([](const Inputs& x) { return tril(x[0]); })},
      {"tril_diag_below", one([](const Inputs& x) { return tril(x[0], -4); })},
      {"tril_of_ones_causal", one([](const Inputs&) {
         return tril(ones({4, 4}));
       })},
      {"triu_bool_mask", one([](const Inputs&) {
         return triu(ones({3, 4}, DType::Bool), 1);
       })},
      {"tril_tall", one([](const Inputs& x) { return tril(x[0], 1); })},
      {"arange_5", one([](const Inputs&) { return arange(5); })},
      {"arange_2_10_3", one([](const Inputs&) { return arange(2, 10, 3); })},
      {"arange_neg_step", one([](const Inputs&) { return arange(10, 0, -3); })},
      {"arange_empty", one([](const Inputs&) { return arange(3, 3); })},
      {"arange_float", one([](const Inputs&) { return arange(0, 1, 0.1, DType::Float32); })},
      {"arange_float_neg_step",
       one([](const Inputs&) { return arange(5, 0, -1.5, DType::Float32); })},
      {"arange_f64", one([](const Inputs&) { return arange(-1, 1, 0.25, DType::Float64); })},
      {"arange_float_end", one([](const Inputs&) { return arange(4, DType::Float32); })},
      {"arange_float_rounding",
       one([](const Inputs&) { return arange(0, 0.3, 0.1, DType::Float32); })},
      {"arange_half_steps", one([](const Inputs&) { return arange(1, 2.5, 0.5, DType::Float32); })},
      {"eye_3", one([](const Inputs&) { return eye(3); })},
      {"eye_1", one([](const Inputs&) { return eye(1); })},
      {"eye_0", one([](const Inputs&) { return eye(0); })},
      {"eye_4_f64", one([](const Inputs&) { return eye(4, DType::Float64); })},
      {"eye_int64", one([](const Inputs&) { return eye(2, DType::Int64); })},

      // ---- softmax, log_softmax (the shared cases are added below) ----
      {"softmax_method", one([](const Inputs& x) { return x[0].softmax(0); })},
      {"softmax_functional", one([](const Inputs& x) { return softmax(x[0], -1); })},
      {"softmax_0d", one([](const Inputs& x) { return softmax(x[0], 0); })},
      {"log_softmax_0d", one([](const Inputs& x) { return log_softmax(x[0], -1); })},
      {"softmax_size1_dim", one([](const Inputs& x) { return softmax(x[0], 1); })},

      // ---- conversions and in-place ops ----
      {"to_int64_truncates", one([](const Inputs& x) { return x[0].to(DType::Int64); })},
      {"to_bool", one([](const Inputs& x) { return x[0].to_bool(); })},
      {"to_f64", one([](const Inputs& x) { return x[0].to(DType::Float64); })},
      {"to_f32_rounds", one([](const Inputs& x) { return x[0].to(DType::Float32); })},
      {"int64_to_f32", one([](const Inputs& x) { return x[0].to(DType::Float32); })},
      {"bool_to_f32", one([](const Inputs& x) { return x[0].to(DType::Float32); })},
      {"add_inplace_bcast", one([](const Inputs& x) {
         Tensor c = x[0].clone();
         c.add_(x[1]);
         return c;
       })},
      {"mul_inplace_scalar", one([](const Inputs& x) {
         Tensor c = x[0].clone();
         c.mul_(2.5);
         return c;
       })},
      {"fill_inplace", one([](const Inputs& x) {
         Tensor c = x[0].clone();
         c.fill_(-1.25);
         return c;
       })},
      {"copy_inplace_bcast", one([](const Inputs& x) {
         Tensor c = x[0].clone();
         c.copy_(x[1]);
         return c;
       })},
      {"full_scalar", one([](const Inputs&) {
         return full({2, 3}, 0.1);
       })},
      {"zeros_ones", [](const Inputs&) { return Outputs{zeros({2, 2}), ones({3}, DType::Int64)}; }},
      {"int64_to_bool", one([](const Inputs& x) { return x[0].to_bool(); })},
  };

  // The comparisons: tensor-tensor with broadcasting, tensor-scalar, and nan/inf operands.
  struct Comparison {
    const char* name;
    Compare tensor;
    CompareScalar scalar;
  };
  const Comparison comparisons[] = {
      {"eq", eq, eq}, {"ne", ne, ne}, {"lt", lt, lt},
      {"le", le, le}, {"gt", gt, gt}, {"ge", ge, ge},
  };
  for (const Comparison& c : comparisons) {
    const std::string name = c.name;
    Compare tensor = c.tensor;
    CompareScalar scalar = c.scalar;
    t[name + "_tensor"] = one([tensor](const Inputs& x) { return tensor(x[0], x[1]); });
    t[name + "_scalar"] = one([scalar](const Inputs& x) { return scalar(x[0], 1.0); });
    t[name + "_nan_inf"] = one([tensor](const Inputs& x) { return tensor(x[0], x[1]); });
  }

  // softmax and log_softmax share their cases.
  const std::pair<const char*, Softmax> softmaxes[] = {{"softmax", softmax},
                                                       {"log_softmax", log_softmax}};
  for (const auto& [prefix, fn] : softmaxes) {
    const std::string p = prefix;
    Softmax f = fn;
    t[p + "_3d_dim0"] = one([f](const Inputs& x) { return f(x[0], 0); });
    t[p + "_3d_dim1"] = one([f](const Inputs& x) { return f(x[0], 1); });
    t[p + "_3d_dim_neg1"] = one([f](const Inputs& x) { return f(x[0], -1); });
    t[p + "_1d"] = one([f](const Inputs& x) { return f(x[0], 0); });
    t[p + "_f64"] = one([f](const Inputs& x) { return f(x[0], -1); });
    t[p + "_wide_row"] = one([f](const Inputs& x) { return f(x[0], 1); });
    t[p + "_large"] = one([f](const Inputs& x) { return f(x[0], 0); });
    t[p + "_very_negative"] = one([f](const Inputs& x) { return f(x[0], 0); });
    t[p + "_large_f64"] = one([f](const Inputs& x) { return f(x[0], 0); });
    t[p + "_row_all_neginf_is_nan"] = one([f](const Inputs& x) { return f(x[0], -1); });
    t[p + "_some_neginf"] = one([f](const Inputs& x) { return f(x[0], 1); });
    t[p + "_causal_mask"] =
        one([f](const Inputs& x) { return f(x[0].masked_fill(x[1], -kInf), -1); });
    t[p + "_empty"] = one([f](const Inputs& x) { return f(x[0], -1); });
  }
  return t;
}

const std::map<std::string, OpFn>& table() {
  static const std::map<std::string, OpFn> t = build_table();
  return t;
}

std::vector<std::string> table_names() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : table()) names.push_back(name);
  return names;
}

// ---------------------------------------------------------------------------------------------
// The fixture file (tests/fixtures/ops.txt, read by tests/fixtures.h; its entries: the docstring
// of scripts/fixtures/gen_ops.py).

const test::Fixture& ops_fixture() { return test::fixture_file("ops.txt"); }

// One case record, "<name>/<seed>": whether its results must be exact, and its tensors'
// entries, "<name>/<seed>/in/<i>" and "<name>/<seed>/out/<i>".
struct Record {
  std::string name;  // the case's name
  std::string id;    // "<name>/<seed>" ("-" for a case without random inputs)
  bool exact = false;
  std::vector<std::string> inputs, outputs;
};

std::vector<Record> load_records() {
  const test::Fixture& f = ops_fixture();
  std::vector<Record> records;
  for (const std::string& id : f.names()) {
    if (f.entry(id).kind != test::FixtureEntry::kKeys) continue;
    Record r;
    r.id = id;
    r.name = id.substr(0, id.find('/'));
    const std::vector<std::string>& mode = f.keys(id);
    check(mode.size() == 1 && (mode[0] == "exact" || mode[0] == "close"), "ops.txt: ", id,
          " is neither exact nor close");
    r.exact = mode[0] == "exact";
    for (int i = 0; f.has(id + "/in/" + std::to_string(i)); ++i)
      r.inputs.push_back(id + "/in/" + std::to_string(i));
    for (int i = 0; f.has(id + "/out/" + std::to_string(i)); ++i)
      r.outputs.push_back(id + "/out/" + std::to_string(i));
    records.push_back(std::move(r));
  }
  check(static_cast<int64_t>(records.size()) == f.tensor("records").item<int64_t>(),
        "ops.txt: ", records.size(), " case records, the file says ",
        f.tensor("records").item<int64_t>(), ": truncated?");
  return records;
}

const std::vector<Record>& records() {
  static const std::vector<Record> r = load_records();
  return r;
}

// ---------------------------------------------------------------------------------------------
// Comparing results.

std::string show(double v) {
  std::ostringstream s;
  s << std::setprecision(17) << v << " (" << std::hexfloat << v << ")";
  return s.str();
}

bool close_enough(double got, double want, bool exact, DType dtype) {
  if (std::isnan(want)) return std::isnan(got);
  if (exact) return got == want && std::signbit(got) == std::signbit(want);
  if (std::isinf(want)) return got == want;
  const double atol = dtype == DType::Float64 ? 1e-14 : 1e-6;
  const double rtol = dtype == DType::Float64 ? 1e-12 : 1e-5;
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

// Adds a failure naming `where` for each difference (the first few values only).
void expect_matches(const Tensor& got, const std::string& entry, bool exact,
                    const std::string& where) {
  const Tensor want = ops_fixture().tensor(entry);
  if (!got.defined()) {
    ADD_FAILURE() << where << ": undefined result";
    return;
  }
  if (got.dtype() != want.dtype()) {
    ADD_FAILURE() << where << ": dtype " << dtype_name(got.dtype()) << ", PyTorch gives "
                  << dtype_name(want.dtype());
    return;
  }
  if (got.shape() != want.shape()) {
    ADD_FAILURE() << where << ": shape " << shape_str(got.shape()) << ", PyTorch gives "
                  << shape_str(want.shape());
    return;
  }
  int reported = 0, mismatches = 0;
  std::ostringstream details;
  if (is_floating(want.dtype())) {
    const std::vector<double> values = got.to_vector<double>();
    const std::vector<double> wanted = want.to_vector<double>();
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (close_enough(values[i], wanted[i], exact, want.dtype())) continue;
      ++mismatches;
      if (reported++ < 6)
        details << "\n  [" << i << "] got " << show(values[i]) << ", PyTorch " << show(wanted[i]);
    }
  } else {
    const std::vector<int64_t> values = got.to_vector<int64_t>();
    const std::vector<int64_t> wanted = want.to_vector<int64_t>();
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (values[i] == wanted[i]) continue;
      ++mismatches;
      if (reported++ < 6)
        details << "\n  [" << i << "] got " << values[i] << ", PyTorch " << wanted[i];
    }
  }
  if (mismatches > 0)
    ADD_FAILURE() << where << ": " << mismatches << " of " << want.numel() << " values differ ("
                  << (exact ? "exact" : "close") << ", " << dtype_name(want.dtype()) << ")"
                  << details.str();
}

// ---------------------------------------------------------------------------------------------
// The tests.

class OpFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(OpFixtures, Matches) {
  const OpFn& fn = table().at(GetParam());
  int matched = 0;
  for (const Record& r : records()) {
    if (r.name != GetParam()) continue;
    ++matched;
    const std::string where = "case " + r.id;
    Inputs inputs;
    for (const std::string& t : r.inputs) inputs.push_back(ops_fixture().tensor(t));
    Outputs outputs;
    try {
      outputs = fn(inputs);
    } catch (const std::exception& e) {
      ADD_FAILURE() << where << ": threw " << e.what();
      continue;
    }
    if (outputs.size() != r.outputs.size()) {
      ADD_FAILURE() << where << ": " << outputs.size() << " results, PyTorch gives "
                    << r.outputs.size();
      continue;
    }
    for (std::size_t i = 0; i < outputs.size(); ++i)
      expect_matches(outputs[i], r.outputs[i], r.exact,
                     where + (outputs.size() > 1 ? " output " + std::to_string(i) : ""));
  }
  EXPECT_GT(matched, 0) << GetParam() << " has a lambda but no case in ops.txt: regenerate it";
}

INSTANTIATE_TEST_SUITE_P(, OpFixtures, ::testing::ValuesIn(table_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(OpFixturesFile, EveryCaseHasALambda) {
  std::set<std::string> missing;
  for (const Record& r : records())
    if (!table().count(r.name)) missing.insert(r.name);
  for (const std::string& name : missing)
    ADD_FAILURE() << "case " << name << " in ops.txt has no lambda in test_op_fixtures.cpp";
  EXPECT_GE(records().size(), 900u);
}

}  // namespace
}  // namespace ember
