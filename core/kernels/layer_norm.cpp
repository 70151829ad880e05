// LayerNorm forward and backward kernels; the derivation is in layer_norm.h.
#include "core/kernels/layer_norm.h"

#include <cmath>
#include <vector>

#include "core/kernels/cascade_sum.h"
#include "core/kernels/parallel_for.h"
#include "core/kernels/reduce_kernels.h"

namespace ember::kernels {

namespace {

// The biased variance of a row around its double mean, both sums in double, one running sum
// each in index order (nn.LayerNorm's own; the book's GPTLayerNorm takes x.var(-1), with four
// running sums: sum_rows and sum_squared_deviations_rows in layer_norm_book_forward).
template <typename T>
double row_variance(const T* x, int64_t n, double* row_mean) {
  const auto count = static_cast<double>(n);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += x[j];
  const double mean = sum / count;
  *row_mean = mean;
  double squares = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double deviation = static_cast<double>(x[j]) - mean;
    squares += deviation * deviation;
  }
  return squares / count;
}

}  // namespace

template <typename T>
void layer_norm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t rows,
                        int64_t n, double eps) {
  parallel_ranges(rows, rows * n, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      double row_mean = 0;
      const double row_var = row_variance(xr, n, &row_mean);
      const T m = static_cast<T>(row_mean);
      const T s = static_cast<T>(1.0 / std::sqrt(row_var + eps));
      mean[r] = m;
      rstd[r] = s;
      const T shift = -s * m;
      if (w && b) {
        for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] * s + shift) * w[j] + b[j];
      } else {
        for (int64_t j = 0; j < n; ++j) {
          T value = xr[j] * s + shift;
          if (w) value *= w[j];
          if (b) value += b[j];
          yr[j] = value;
        }
      }
    }
  });
}

template <typename T>
void layer_norm_book_forward(const T* x, const T* scale, const T* shift, T* y, T* mean, T* denom,
                             int64_t rows, int64_t n, double eps) {
  const T eps_t = static_cast<T>(eps);  // the Python float eps, a float32 scalar next to x
  const T count = static_cast<T>(n);
  // R rows from row r: the variances' double sums (x.var(-1)'s: kernels::variance's arithmetic
  // for a reduction over the last dim, four running sums each) of the R rows run interleaved,
  // so that each row's chain of additions overlaps the others'.
  auto some_rows = [&]<int R>(int64_t r) {
    const T* xr[R];
    for (int i = 0; i < R; ++i) xr[i] = x + (r + i) * n;
    const std::array<double, R> sums = sum_rows<R>(xr, n);
    double means[R];
    for (int i = 0; i < R; ++i) means[i] = sums[i] / static_cast<double>(n);
    const std::array<double, R> squares = sum_squared_deviations_rows<R>(xr, n, means);
    for (int i = 0; i < R; ++i) {
      T* yr = y + (r + i) * n;
      const T m = cascade_row_sum(xr[i], n) / count;                      // x.mean(-1)
      const T var = static_cast<T>(squares[i] / static_cast<double>(n));  // var(unbiased=False)
      const T d = std::sqrt(var + eps_t);                                 // sqrt(var + eps)
      mean[r + i] = m;
      denom[r + i] = d;
      for (int64_t j = 0; j < n; ++j) yr[j] = scale[j] * ((xr[i][j] - m) / d) + shift[j];
    }
  };
  parallel_ranges(rows, rows * n, [&](int64_t first, int64_t last) {
    int64_t r = first;
    for (; r + 2 <= last; r += 2) some_rows.template operator()<2>(r);
    if (r < last) some_rows.template operator()<1>(r);
  });
}

template <typename T>
void layer_norm_backward(const T* x, const T* w, const T* dy, const T* mean, const T* rstd,
                         bool saved_denominator, T* dx, T* dw, T* db, int64_t rows, int64_t n) {
  if (rows == 0) return;
  const int64_t elements = rows * n;
  auto row_rstd = [&](int64_t r) {
    return saved_denominator ? 1.0 / static_cast<double>(rstd[r]) : static_cast<double>(rstd[r]);
  };
  const auto count = static_cast<double>(n);
  // dx: rows are independent, shared out among threads. Two passes over the row: the two means,
  // then dx (xhat and g recomputed: cheaper than a buffer for them).
  if (dx) {
    parallel_ranges(rows, elements, [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) {
        const T* xr = x + r * n;
        const T* dyr = dy + r * n;
        const double m = mean[r], s = row_rstd(r);
        // The two sums with four running sums each (element j into sum j mod 4), the four in
        // the lanes of a register: one running sum waited on each addition's latency.
        const int64_t whole = n - n % 4;
        Double4 g4 = {0, 0, 0, 0}, g_xhat4 = {0, 0, 0, 0};
        for (int64_t j = 0; j < whole; j += 4) {
          const Double4 xhat = (load_double4(xr + j) - m) * s;
          const Double4 g = w ? load_double4(dyr + j) * load_double4(w + j) : load_double4(dyr + j);
          g4 += g;
          g_xhat4 += g * xhat;
        }
        double g_sum = (g4[0] + g4[1]) + (g4[2] + g4[3]);
        double g_xhat_sum = (g_xhat4[0] + g_xhat4[1]) + (g_xhat4[2] + g_xhat4[3]);
        for (int64_t j = whole; j < n; ++j) {
          const double xhat = (xr[j] - m) * s;
          const double g = w ? dyr[j] * static_cast<double>(w[j]) : dyr[j];
          g_sum += g;
          g_xhat_sum += g * xhat;
        }
        const double g_mean = g_sum / count, g_xhat_mean = g_xhat_sum / count;
        T* dxr = dx + r * n;
        for (int64_t j = 0; j < n; ++j) {
          const double xhat = (xr[j] - m) * s;
          const double g = w ? dyr[j] * static_cast<double>(w[j]) : dyr[j];
          dxr[j] = static_cast<T>(s * (g - g_mean - xhat * g_xhat_mean));
        }
      }
    });
  }
  // dw, db: sums over rows, in row order, for each column; threads take ranges of columns.
  if (dw || db) {
    parallel_ranges(n, elements, [&](int64_t j0, int64_t j1) {
      std::vector<double> dw_sum(dw ? j1 - j0 : 0, 0.0), db_sum(db ? j1 - j0 : 0, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const T* xr = x + r * n;
        const T* dyr = dy + r * n;
        const double m = mean[r], s = row_rstd(r);
        if (dw) {
          for (int64_t j = j0; j < j1; ++j) dw_sum[j - j0] += dyr[j] * ((xr[j] - m) * s);
        }
        if (db) {
          for (int64_t j = j0; j < j1; ++j) db_sum[j - j0] += dyr[j];
        }
      }
      for (int64_t j = j0; j < j1; ++j) {
        if (dw) dw[j] = static_cast<T>(dw_sum[j - j0]);
        if (db) db[j] = static_cast<T>(db_sum[j - j0]);
      }
    });
  }
}

#define EMBER_LAYER_NORM_INSTANCES(T)                                                              \
  template void layer_norm_forward<T>(const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t,  \
                                      double);                                                     \
  template void layer_norm_book_forward<T>(const T*, const T*, const T*, T*, T*, T*, int64_t,      \
                                           int64_t, double);                                       \
  template void layer_norm_backward<T>(const T*, const T*, const T*, const T*, const T*, bool, T*, \
                                       T*, T*, int64_t, int64_t);
EMBER_LAYER_NORM_INSTANCES(float)
EMBER_LAYER_NORM_INSTANCES(double)
#undef EMBER_LAYER_NORM_INSTANCES

}  // namespace ember::kernels
