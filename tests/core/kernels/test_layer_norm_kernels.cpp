// The LayerNorm kernels (core/kernels/layer_norm.h) on every Highway target this CPU has, against
// the same kernels with plain loops for their elementwise passes (the *_plain functions): the
// same bits, float32 and float64, in nn.LayerNorm's forward (with and without weight and bias),
// the book's forward, and the backward (dx, dw, db, from rstd or from the saved denominator),
// for row lengths 1 to 40 (each target's tails), 768, and enough rows for a second thread.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/ember.h"
#include "core/kernels/layer_norm.h"
#include "tests/core/kernels/targets.h"

namespace ember {
namespace {

template <typename T>
std::vector<T> values(int64_t n, double seed, double scale, double offset = 0) {
  std::vector<T> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<T>(offset + scale * std::sin(seed + 1.3 * static_cast<double>(i)));
  return v;
}

template <typename T>
void check(int64_t rows, int64_t n) {
  const std::string what = std::to_string(sizeof(T) * 8) + "-bit, " + std::to_string(rows) +
                           " rows of " + std::to_string(n);
  const int64_t size = rows * n;
  const std::vector<T> x = values<T>(size, 0.2, 2.0, 0.5), dy = values<T>(size, 1.9, 0.1),
                       w = values<T>(n, 3.1, 0.3, 1.0), b = values<T>(n, 4.3, 0.2);
  const double eps = 1e-5;
  for (int affine = 0; affine < 4; ++affine) {
    const T* wp = affine & 1 ? w.data() : nullptr;
    const T* bp = affine & 2 ? b.data() : nullptr;
    std::vector<T> y(size), mean(rows), rstd(rows);
    kernels::layer_norm_forward_plain(x.data(), wp, bp, y.data(), mean.data(), rstd.data(), rows, n,
                                      eps);
    std::vector<T> dx(size), dw(n), db(n);
    kernels::layer_norm_backward_plain(x.data(), wp, dy.data(), mean.data(), rstd.data(), false,
                                       dx.data(), dw.data(), db.data(), rows, n);
    test::on_every_target([&] {
      const std::string here = what + ", affine " + std::to_string(affine);
      std::vector<T> y1(size), mean1(rows), rstd1(rows);
      kernels::layer_norm_forward(x.data(), wp, bp, y1.data(), mean1.data(), rstd1.data(), rows, n,
                                  eps);
      test::expect_same_bits(y1, y, here + ", forward");
      test::expect_same_bits(mean1, mean, here + ", mean");
      test::expect_same_bits(rstd1, rstd, here + ", rstd");
      std::vector<T> dx1(size), dw1(n), db1(n);
      kernels::layer_norm_backward(x.data(), wp, dy.data(), mean.data(), rstd.data(), false,
                                   dx1.data(), dw1.data(), db1.data(), rows, n);
      test::expect_same_bits(dx1, dx, here + ", dx");
      test::expect_same_bits(dw1, dw, here + ", dw");
      test::expect_same_bits(db1, db, here + ", db");
      std::vector<T> db_only(n);  // dx and dw not wanted
      kernels::layer_norm_backward(x.data(), wp, dy.data(), mean.data(), rstd.data(), false,
                                   static_cast<T*>(nullptr), static_cast<T*>(nullptr),
                                   db_only.data(), rows, n);
      test::expect_same_bits(db_only, db, here + ", db alone");
    });
  }
  // The book's forward, and the backward from its saved denominator.
  std::vector<T> y(size), mean(rows), denom(rows), dx(size), dw(n), db(n);
  kernels::layer_norm_book_forward_plain(x.data(), w.data(), b.data(), y.data(), mean.data(),
                                         denom.data(), rows, n, eps);
  kernels::layer_norm_backward_plain(x.data(), w.data(), dy.data(), mean.data(), denom.data(), true,
                                     dx.data(), dw.data(), db.data(), rows, n);
  test::on_every_target([&] {
    std::vector<T> y1(size), mean1(rows), denom1(rows), dx1(size), dw1(n), db1(n);
    kernels::layer_norm_book_forward(x.data(), w.data(), b.data(), y1.data(), mean1.data(),
                                     denom1.data(), rows, n, eps);
    test::expect_same_bits(y1, y, what + ", the book's forward");
    test::expect_same_bits(mean1, mean, what + ", the book's mean");
    test::expect_same_bits(denom1, denom, what + ", the book's denominator");
    kernels::layer_norm_backward(x.data(), w.data(), dy.data(), mean.data(), denom.data(), true,
                                 dx1.data(), dw1.data(), db1.data(), rows, n);
    test::expect_same_bits(dx1, dx, what + ", dx from the denominator");
    test::expect_same_bits(dw1, dw, what + ", dw from the denominator");
    test::expect_same_bits(db1, db, what + ", db from the denominator");
  });
}

TEST(LayerNormKernels, EveryTargetHasThePlainLoopsBits) {
  for (int64_t n = 1; n <= 40; ++n) {
    check<float>(3, n);
    check<double>(3, n);
  }
  check<float>(5, 768);
  check<double>(2, 768);
}

TEST(LayerNormKernels, EveryTargetHasThePlainLoopsBitsAtTwoThreads) {
  const int threads_before = get_num_threads();
  set_num_threads(2);
  check<float>(200, 384);  // 76,800 elements: two threads share the rows, then the columns
  set_num_threads(threads_before);
}

}  // namespace
}  // namespace ember
