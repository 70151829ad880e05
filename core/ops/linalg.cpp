// Products: dot, mv, mm and bmm are the differentiable primitives; matmul is a composition that
// picks one of them the way PyTorch's at::matmul does (aten/src/ATen/native/LinearAlgebra.cpp,
// _matmul_impl, as in PyTorch 1.13), so that the grad_fn a user prints is PyTorch's:
//
//   a.dim()  b.dim()   what runs                                     grad_fn of the result
//   1        1         dot(a, b)                                     DotBackward0
//   2        1         mv(a, b)                                      MvBackward0
//   1        2         mm(a.unsqueeze(0), b), row 0                  SqueezeBackward3
//   2        2         mm(a, b)                                      MmBackward0
//   >=3      1 or 2    "fold": a.reshape(-1, K) mm/mv b              UnsafeViewBackward0
//   1 or 2   >=3       fold b^T the same way (a @ b = (b^T a^T)^T)   UnsafeViewBackward0 (1-d a)
//                      and transpose the result back                 CloneBackward0 (2-d a)
//   otherwise          broadcast batch dims, bmm on 3-d copies       UnsafeViewBackward0
// (A 3-d operand whose last two dims are transposed does not fold: see should_fold.)
//
// Every product runs through kernels::gemm_batched, which reads its operands through their
// strides: a transposed or sliced operand is never copied here.
#include "core/ops/linalg.h"

#include <type_traits>

#include "core/graph/function.h"
#include "core/kernels/gemm.h"
#include "core/ops/elementwise.h"
#include "core/ops/shape.h"

namespace ember {

using autograd::apply;
using autograd::OpFunction;

namespace {

// ---- checks shared by every product ----

void check_dtypes(const char* op, const Tensor& a, const Tensor& b) {
  check(a.dtype() == b.dtype(), op, ": expected both arguments to have the same dtype, got ",
        dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  check(a.dtype() != DType::Bool, op, ": not implemented for bool tensors (shapes ", a.shape(),
        " and ", b.shape(), ")");
}

// The contracted sizes must agree: a's columns against b's rows.
void check_inner(const char* op, const Tensor& a, const Tensor& b, int64_t a_cols, int64_t b_rows) {
  check(a_cols == b_rows, op, ": shapes ", a.shape(), " and ", b.shape(), " cannot be multiplied (",
        a_cols, " != ", b_rows, ")");
}

// ---- the one kernel call ----

// A batch of matrices read from t's storage through the given sizes and strides (no copy).
struct MatrixBatch {
  const Tensor& t;
  int64_t batch, rows, cols;
  int64_t batch_stride, row_stride, col_stride;
};

// out[b] = a[b] @ b[b] for every b, returned as a new contiguous tensor of shape `out_shape`
// (which must hold batch * a.rows * b.cols elements).
Tensor product(const MatrixBatch& a, const MatrixBatch& b, const Shape& out_shape) {
  // gemm_batched writes every element of C (accumulate = false; zeros when the depth is 0).
  Tensor out = detail::empty_for_overwrite(out_shape, a.t.dtype());
  // Nothing to compute; and with an empty batch, rows * cols may be a product of huge sizes.
  if (out.numel() == 0) return out;
  dispatch(a.t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {  // bool was refused by check_dtypes
      kernels::gemm_batched<T>(a.batch, a.rows, b.cols, a.cols, a.t.data_ptr<T>(), a.batch_stride,
                               a.row_stride, a.col_stride, b.t.data_ptr<T>(), b.batch_stride,
                               b.row_stride, b.col_stride, out.data_ptr<T>(), a.rows * b.cols,
                               b.cols, /*accumulate=*/false);
    }
  });
  return out;
}

// Only the inputs that require grad get one: backward skips the products nobody needs (the
// gradient of a linear layer's input data, say), and forward saves only what those need.

// ---- dot: y = sum_k a_k b_k ----
struct Dot : OpFunction<Dot> {
  static constexpr const char* name = "DotBackward0";
  static constexpr const char* formula = "y = sum_k a_k b_k:  dy/da = b, dy/db = a";
  bool a_needs_grad = false, b_needs_grad = false;

  Tensor forward(const Tensor& a, const Tensor& b) {
    check(a.dim() == 1 && b.dim() == 1, "dot: expected 1-D tensors, got shapes ", a.shape(),
          " and ", b.shape());
    check_dtypes("dot", a, b);
    check_inner("dot", a, b, a.size(0), b.size(0));
    a_needs_grad = a.requires_grad();
    b_needs_grad = b.requires_grad();
    save_for_backward({b_needs_grad ? a : Tensor(), a_needs_grad ? b : Tensor()});
    const int64_t n = a.size(0);
    // A 1 x n row times an n x 1 column.
    return product({a, 1, 1, n, 0, 0, a.stride(0)}, {b, 1, n, 1, 0, b.stride(0), 0}, {});
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor a = saved(0), b = saved(1);
    return {a_needs_grad ? grad * b : Tensor(),   // da = dy * b
            b_needs_grad ? grad * a : Tensor()};  // db = dy * a
  }
};

// ---- mv: y = A x ----
struct Mv : OpFunction<Mv> {
  static constexpr const char* name = "MvBackward0";
  static constexpr const char* formula = "y = A x:  dA = dy x^T, dx = A^T dy";
  bool a_needs_grad = false, x_needs_grad = false;

  Tensor forward(const Tensor& a, const Tensor& x) {
    check(a.dim() == 2 && x.dim() == 1, "mv: expected a 2-D and a 1-D tensor, got shapes ",
          a.shape(), " and ", x.shape());
    check_dtypes("mv", a, x);
    check_inner("mv", a, x, a.size(1), x.size(0));
    a_needs_grad = a.requires_grad();
    x_needs_grad = x.requires_grad();
    save_for_backward({x_needs_grad ? a : Tensor(), a_needs_grad ? x : Tensor()});
    const int64_t rows = a.size(0), k = a.size(1);
    return product({a, 1, rows, k, 0, a.stride(0), a.stride(1)}, {x, 1, k, 1, 0, x.stride(0), 0},
                   {rows});
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor a = saved(0), x = saved(1);
    return {a_needs_grad ? mm(grad.unsqueeze(1), x.unsqueeze(0)) : Tensor(),  // dA = dy x^T
            x_needs_grad ? mv(a.t(), grad) : Tensor()};                       // dx = A^T dy
  }
};

// A 2-d tensor laid out column by column (the transpose of a contiguous matrix; not a vector,
// whose two layouts are one).
bool is_column_major(const Tensor& t) {
  return t.dim() == 2 && t.size(0) > 1 && t.size(1) > 1 && t.stride(0) == 1 &&
         t.stride(1) == t.size(0);
}

// ---- mm: C = A B ----
//
// Each gradient is computed in its operand's layout, as PyTorch's mm_mat1_backward and
// mm_mat2_backward do: for an operand that is a transposed view (column-major, as a linear
// layer's weight.t()), dB = A^T dC is computed as (dC^T A)^T, a row-major product viewed
// transposed, so the gradient reaching the weight through the transpose is contiguous and the
// leaf takes it over without a transposed copy (out_head's 154 MB gradient of GPT-124M).
struct Mm : OpFunction<Mm> {
  static constexpr const char* name = "MmBackward0";
  static constexpr const char* formula = "C = A B:  dA = dC B^T, dB = A^T dC";
  bool a_needs_grad = false, b_needs_grad = false;
  bool a_column_major = false, b_column_major = false;

  Tensor forward(const Tensor& a, const Tensor& b) {
    check(a.dim() == 2 && b.dim() == 2, "mm: expected 2-D tensors, got shapes ", a.shape(), " and ",
          b.shape());
    check_dtypes("mm", a, b);
    check_inner("mm", a, b, a.size(1), b.size(0));
    a_needs_grad = a.requires_grad();
    b_needs_grad = b.requires_grad();
    a_column_major = is_column_major(a);
    b_column_major = is_column_major(b);
    save_for_backward({b_needs_grad ? a : Tensor(), a_needs_grad ? b : Tensor()});
    const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
    return product({a, 1, m, k, 0, a.stride(0), a.stride(1)},
                   {b, 1, k, n, 0, b.stride(0), b.stride(1)}, {m, n});
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor a = saved(0), b = saved(1);
    Tensor da, db;
    if (a_needs_grad) da = a_column_major ? mm(b, grad.t()).t() : mm(grad, b.t());  // dC B^T
    if (b_needs_grad) db = b_column_major ? mm(grad.t(), a).t() : mm(a.t(), grad);  // A^T dC
    return {da, db};
  }
};

// ---- bmm: C[i] = A[i] B[i] for every i of the batch ----
struct Bmm : OpFunction<Bmm> {
  static constexpr const char* name = "BmmBackward0";
  static constexpr const char* formula =
      "C[i] = A[i] B[i]:  dA[i] = dC[i] B[i]^T, dB[i] = A[i]^T dC[i]";
  bool a_needs_grad = false, b_needs_grad = false;

  Tensor forward(const Tensor& a, const Tensor& b) {
    check(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D tensors, got shapes ", a.shape(),
          " and ", b.shape());
    check_dtypes("bmm", a, b);
    check(a.size(0) == b.size(0), "bmm: shapes ", a.shape(), " and ", b.shape(),
          " have different batch sizes (", a.size(0), " != ", b.size(0), ")");
    check_inner("bmm", a, b, a.size(2), b.size(1));
    a_needs_grad = a.requires_grad();
    b_needs_grad = b.requires_grad();
    save_for_backward({b_needs_grad ? a : Tensor(), a_needs_grad ? b : Tensor()});
    const int64_t batch = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
    return product({a, batch, m, k, a.stride(0), a.stride(1), a.stride(2)},
                   {b, batch, k, n, b.stride(0), b.stride(1), b.stride(2)}, {batch, m, n});
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    Tensor a = saved(0), b = saved(1);
    return {a_needs_grad ? bmm(grad, b.mT()) : Tensor(),   // dA[i] = dC[i] B[i]^T
            b_needs_grad ? bmm(a.mT(), grad) : Tensor()};  // dB[i] = A[i]^T dC[i]
  }
};

// ---- the row of a 1 x n product, as PyTorch's matmul takes it: mm(...).squeeze_(0) ----
//
// In place in PyTorch, so the result is the product itself, not a view of it: in-place ops on
// `vector @ matrix` are allowed. The node keeps PyTorch 1.13's name for squeeze_(dim)
// (PyTorch 2.x numbers it SqueezeBackward4).
struct SqueezeRow : OpFunction<SqueezeRow> {
  static constexpr const char* name = "SqueezeBackward3";
  static constexpr const char* formula =
      "y = x without its size-1 row dim:  dx = dy with it put back";
  Tensor forward(const Tensor& row) {
    return detail::make_view(row, {row.size(1)}, {row.stride(1)}, row.offset());
  }
  std::vector<Tensor> backward(const Tensor& grad) {
    return {grad.unsqueeze(0)};  // d(row) = dy as a 1 x n matrix
  }
};

// ---- matmul's strategies (compositions: autograd sees the primitives they call) ----

// PyTorch 1.13's should_fold: can `big` (>= 3-d) be folded into one matrix and multiplied by
// the other operand (1- or 2-d) with a single mm/mv? Yes, except for a 3-d tensor times a
// matrix when its last two dims are transposed over a contiguous batch (a.permute(0, 2, 1)):
// folding it would copy, while bmm reads it in place.
bool should_fold(const Tensor& big, int64_t other_dim) {
  if (big.dim() < 3 || other_dim > 2) return false;
  const bool transposed_matrices = big.dim() == 3 && other_dim == 2 && big.stride(2) != 1 &&
                                   big.stride(0) == mul_wrap(big.size(1), big.size(2));
  return !transposed_matrices;
}

// N-d @ 1- or 2-d: the batch dims of the N-d operand become rows of one matrix:
//   [b..., n, k] @ [k, p]  ->  [b... * n, k] mm [k, p]  ->  unsafe_view [b..., n, p]
// When it is b that is N-d (a is 1- or 2-d), fold b^T instead, using a @ b = (b^T a^T)^T.
Tensor folded_matmul(const Tensor& a, const Tensor& b) {
  const bool transpose = b.dim() > a.dim();
  const Tensor big = transpose ? b.mT() : a;
  const Tensor small = !transpose ? b : (a.dim() == 2 ? a.t() : a);

  Shape out_shape(big.shape().begin(), big.shape().end() - 1);
  const int64_t folded_rows = numel_of(out_shape);
  const bool small_is_matrix = small.dim() == 2;
  if (small_is_matrix) out_shape.push_back(small.size(1));
  // reshape, not view(-1, k): with k == 0 the -1 would be ambiguous.
  const Tensor big_folded = big.reshape({folded_rows, big.size(-1)});
  if (!small_is_matrix) return unsafe_view(mv(big_folded, small), out_shape);
  const Tensor out = unsafe_view(mm(big_folded, small), out_shape);
  return transpose ? out.mT().contiguous() : out;
}

// The batch shape two operands broadcast to, or an error naming both full shapes.
Shape broadcast_batch(const Tensor& a, const Tensor& b, const Shape& batch_a,
                      const Shape& batch_b) {
  const std::size_t n = std::max(batch_a.size(), batch_b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - batch_a.size() ? 1 : batch_a[i - (n - batch_a.size())];
    const int64_t db = i < n - batch_b.size() ? 1 : batch_b[i - (n - batch_b.size())];
    check(da == db || da == 1 || db == 1, "matmul: shapes ", a.shape(), " and ", b.shape(),
          " cannot be multiplied (batch dimensions ", batch_a, " and ", batch_b,
          " cannot be broadcast)");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Everything else: broadcast the batch dims, flatten them into one, bmm, shape the result.
//   a [b_a..., n, k], b [b_b..., k, p]  ->  expand both to batch B = broadcast(b_a, b_b),
//   reshape to [prod(B), n, k] and [prod(B), k, p], bmm, unsafe_view to [B..., n, p].
// A 1-d operand takes part as a single row (a) or column (b), dropped from the result.
//
// A product with no rows or no columns (n or p is 0) is empty, but expanding the other operand
// over the batch would still copy it batch-many times ([4, 1, 2, 2] @ [1, 2^22, 2, 0] copied 2^26
// elements to give none: 15 s under ASan; the fuzzer makes batches of 2^32). Its value reads
// neither operand, so it is taken over an empty k: both operands narrowed to k = 0 expand to empty
// tensors. (The gradients stay right: zeros, the narrow's backward.)
Tensor batched_matmul(const Tensor& a_in, const Tensor& b_in) {
  const bool empty_product =
      (a_in.dim() > 1 && a_in.size(-2) == 0) || (b_in.dim() > 1 && b_in.size(-1) == 0);
  const Tensor a = empty_product ? a_in.narrow(-1, 0, 0) : a_in;
  const Tensor b = empty_product ? b_in.narrow(b_in.dim() > 1 ? -2 : 0, 0, 0) : b_in;
  const int64_t n = a.dim() > 1 ? a.size(-2) : 1;
  const int64_t k = a.size(-1);
  const int64_t p = b.dim() > 1 ? b.size(-1) : 1;
  const Shape batch_a(a.shape().begin(), a.shape().end() - std::min<int64_t>(a.dim(), 2));
  const Shape batch_b(b.shape().begin(), b.shape().end() - std::min<int64_t>(b.dim(), 2));
  const Shape batch = broadcast_batch(a, b, batch_a, batch_b);
  const int64_t batch_size = numel_of(batch);

  Shape a_expanded = batch;
  a_expanded.insert(a_expanded.end(), {n, k});
  const Tensor a3 = a.expand(a_expanded).reshape({batch_size, n, k});

  const bool b_is_vector = b.dim() == 1;
  Shape b_expanded = batch;
  if (b_is_vector) {
    b_expanded.push_back(k);
  } else {
    b_expanded.insert(b_expanded.end(), {k, p});
  }
  const Tensor b3 = b_is_vector ? b.expand(b_expanded).reshape({batch_size, k}).unsqueeze(2)
                                : b.expand(b_expanded).reshape({batch_size, k, p});

  Shape out_shape = batch;
  if (a.dim() > 1) out_shape.push_back(n);
  if (b.dim() > 1) out_shape.push_back(p);
  const Tensor out = bmm(a3, b3);
  return unsafe_view(b_is_vector ? out.squeeze(-1) : out, out_shape);
}

}  // namespace

Tensor dot(const Tensor& a, const Tensor& b) { return apply<Dot>(a, b); }
Tensor mv(const Tensor& a, const Tensor& b) { return apply<Mv>(a, b); }
Tensor mm(const Tensor& a, const Tensor& b) { return apply<Mm>(a, b); }
Tensor bmm(const Tensor& a, const Tensor& b) { return apply<Bmm>(a, b); }

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "matmul");
  detail::check_defined(b, "matmul");
  OpScope scope("matmul");
  check(a.dim() >= 1 && b.dim() >= 1,
        "matmul: both arguments need at least 1 dimension, got shapes ", a.shape(), " and ",
        b.shape());
  check_dtypes("matmul", a, b);
  check_inner("matmul", a, b, a.size(-1), b.dim() == 1 ? b.size(0) : b.size(-2));

  const int64_t a_dim = a.dim(), b_dim = b.dim();
  if (a_dim == 1 && b_dim == 1) return dot(a, b);
  if (a_dim == 2 && b_dim == 1) return mv(a, b);
  if (a_dim == 1 && b_dim == 2) return apply<SqueezeRow>(mm(a.unsqueeze(0), b));
  if (a_dim == 2 && b_dim == 2) return mm(a, b);
  if (should_fold(a, b_dim) || should_fold(b, a_dim)) return folded_matmul(a, b);
  return batched_matmul(a, b);
}

Tensor Tensor::dot(const Tensor& other) const { return ember::dot(*this, other); }
Tensor Tensor::matmul(const Tensor& other) const { return ember::matmul(*this, other); }

}  // namespace ember
