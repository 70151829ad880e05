// LayerNorm forward and backward kernels; the derivation is in layer_norm.h.
//
// The elementwise passes (the forwards' normalisation and affine map, the backward's dx from the
// row's two means, and its per-column sums for dw and db) are written once over Highway
// (core/kernels/README.md) and compiled for each target: each scalar operation of the plain loops
// (under HWY_ONCE) is one vector operation, in the same order and precision (floats widened to
// double exactly where the plain loop widens them; no fused multiply-adds), so every lane rounds
// as the plain loop does. The row sums stay as they are: nn.LayerNorm's one running double sum
// per row is a serial chain, and the book's four-lane double sums (reduce_kernels.h) are shared
// with var().
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/layer_norm.cpp"
#include "hwy/foreach_target.h"  // before highway.h

#include <cstdint>
#include <type_traits>

#include "core/kernels/dispatch_by_type.h"
#include "core/kernels/simd-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {

namespace {

// x[i, i + count) widened to double (exact), as a vector of D64.
template <class D64, typename T>
HWY_INLINE hn::Vec<D64> load_as_double(D64 d, const T* x, size_t count) {
  if constexpr (std::is_same_v<T, double>) {
    return load_lanes(d, x, count);
  } else {
    return hn::PromoteTo(d, load_lanes(hn::Rebind<T, D64>(), x, count));
  }
}

// v rounded to T (one rounding, as static_cast<T>), stored to x[0, count).
template <class D64, typename T>
HWY_INLINE void store_from_double(D64 d, hn::Vec<D64> v, T* x, size_t count) {
  if constexpr (std::is_same_v<T, double>) {
    store_lanes(d, v, x, count);
  } else {
    const hn::Rebind<T, D64> dt;
    store_lanes(dt, hn::DemoteTo(dt, v), x, count);
  }
}

// y = x * s + shift, then * w (if any), then + b (if any), in T.
template <typename T>
void NormalizeAffine(const T* x, const T* w, const T* b, T* y, int64_t n, T s, T shift) {
  for_each_vector<T>(0, n, [&](int64_t j, auto d, size_t count) {
    auto v = hn::Add(hn::Mul(load_lanes(d, x + j, count), hn::Set(d, s)), hn::Set(d, shift));
    if (w != nullptr) v = hn::Mul(v, load_lanes(d, w + j, count));
    if (b != nullptr) v = hn::Add(v, load_lanes(d, b + j, count));
    store_lanes(d, v, y + j, count);
  });
}

// y = scale * ((x - m) / denom) + shift, in T.
template <typename T>
void NormalizeBook(const T* x, const T* scale, const T* shift, T* y, int64_t n, T m, T denom) {
  for_each_vector<T>(0, n, [&](int64_t j, auto d, size_t count) {
    const auto xhat =
        hn::Div(hn::Sub(load_lanes(d, x + j, count), hn::Set(d, m)), hn::Set(d, denom));
    const auto v =
        hn::Add(hn::Mul(load_lanes(d, scale + j, count), xhat), load_lanes(d, shift + j, count));
    store_lanes(d, v, y + j, count);
  });
}

// dx = s (g - g_mean - xhat g_xhat_mean) in double, rounded to T; xhat = (x - m) s,
// g = dy w (dy without w).
template <typename T>
void DxRow(const T* x, const T* w, const T* dy, T* dx, int64_t n, double m, double s, double g_mean,
           double g_xhat_mean) {
  for_each_vector<double>(0, n, [&](int64_t j, auto d, size_t count) {
    const auto sv = hn::Set(d, s);
    const auto xhat = hn::Mul(hn::Sub(load_as_double(d, x + j, count), hn::Set(d, m)), sv);
    auto g = load_as_double(d, dy + j, count);
    if (w != nullptr) g = hn::Mul(g, load_as_double(d, w + j, count));
    const auto inner =
        hn::Sub(hn::Sub(g, hn::Set(d, g_mean)), hn::Mul(xhat, hn::Set(d, g_xhat_mean)));
    store_from_double(d, hn::Mul(sv, inner), dx + j, count);
  });
}

// One row's terms added to the column sums: dw_sum[j] += dy (xhat), db_sum[j] += dy, in double
// (either sum null: not wanted).
template <typename T>
void AddColumnSums(const T* x, const T* dy, int64_t n, double m, double s, double* dw_sum,
                   double* db_sum) {
  for_each_vector<double>(0, n, [&](int64_t j, auto d, size_t count) {
    const auto g = load_as_double(d, dy + j, count);
    if (dw_sum != nullptr) {
      const auto xhat =
          hn::Mul(hn::Sub(load_as_double(d, x + j, count), hn::Set(d, m)), hn::Set(d, s));
      store_lanes(d, hn::Add(load_lanes(d, dw_sum + j, count), hn::Mul(g, xhat)), dw_sum + j,
                  count);
    }
    if (db_sum != nullptr) {
      store_lanes(d, hn::Add(load_lanes(d, db_sum + j, count), g), db_sum + j, count);
    }
  });
}

}  // namespace

// The entry points of this target, one per type (HWY_EXPORT takes plain functions).
EMBER_ENTRIES_BY_TYPE(NormalizeAffine)
EMBER_ENTRIES_BY_TYPE(NormalizeBook)
EMBER_ENTRIES_BY_TYPE(DxRow)
EMBER_ENTRIES_BY_TYPE(AddColumnSums)

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>
#include <vector>

#include "core/kernels/cascade_sum.h"
#include "core/kernels/layer_norm.h"
#include "core/kernels/parallel_for.h"
#include "core/kernels/reduce_kernels.h"

namespace ember::kernels {

EMBER_EXPORT_BY_TYPE(NormalizeAffine);
EMBER_EXPORT_BY_TYPE(NormalizeBook);
EMBER_EXPORT_BY_TYPE(DxRow);
EMBER_EXPORT_BY_TYPE(AddColumnSums);

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

template <typename T>
void forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t rows, int64_t n,
             double eps, bool vector) {
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
      if (vector) {
        EMBER_DISPATCH_BY_TYPE(T, NormalizeAffine, xr, w, b, yr, n, s, shift);
      } else {
        for (int64_t j = 0; j < n; ++j) {
          T value = xr[j] * s + shift;
          if (w) value = value * w[j];
          if (b) value = value + b[j];
          yr[j] = value;
        }
      }
    }
  });
}

template <typename T>
void book_forward(const T* x, const T* scale, const T* shift, T* y, T* mean, T* denom, int64_t rows,
                  int64_t n, double eps, bool vector) {
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
      if (vector) {
        EMBER_DISPATCH_BY_TYPE(T, NormalizeBook, xr[i], scale, shift, yr, n, m, d);
      } else {
        for (int64_t j = 0; j < n; ++j) yr[j] = scale[j] * ((xr[i][j] - m) / d) + shift[j];
      }
    }
  };
  parallel_ranges(rows, rows * n, [&](int64_t first, int64_t last) {
    int64_t r = first;
    for (; r + 2 <= last; r += 2) some_rows.template operator()<2>(r);
    if (r < last) some_rows.template operator()<1>(r);
  });
}

template <typename T>
void backward(const T* x, const T* w, const T* dy, const T* mean, const T* rstd,
              bool saved_denominator, T* dx, T* dw, T* db, int64_t rows, int64_t n, bool vector) {
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
        if (vector) {
          EMBER_DISPATCH_BY_TYPE(T, DxRow, xr, w, dyr, dxr, n, m, s, g_mean, g_xhat_mean);
        } else {
          for (int64_t j = 0; j < n; ++j) {
            const double xhat = (xr[j] - m) * s;
            const double g = w ? dyr[j] * static_cast<double>(w[j]) : dyr[j];
            dxr[j] = static_cast<T>(s * (g - g_mean - xhat * g_xhat_mean));
          }
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
        if (vector) {
          EMBER_DISPATCH_BY_TYPE(T, AddColumnSums, xr + j0, dyr + j0, j1 - j0, m, s,
                                 dw ? dw_sum.data() : nullptr, db ? db_sum.data() : nullptr);
        } else {
          if (dw) {
            for (int64_t j = j0; j < j1; ++j) dw_sum[j - j0] += dyr[j] * ((xr[j] - m) * s);
          }
          if (db) {
            for (int64_t j = j0; j < j1; ++j) db_sum[j - j0] += dyr[j];
          }
        }
      }
      for (int64_t j = j0; j < j1; ++j) {
        if (dw) dw[j] = static_cast<T>(dw_sum[j - j0]);
        if (db) db[j] = static_cast<T>(db_sum[j - j0]);
      }
    });
  }
}

}  // namespace

template <typename T>
void layer_norm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t rows,
                        int64_t n, double eps) {
  forward(x, w, b, y, mean, rstd, rows, n, eps, /*vector=*/true);
}
template <typename T>
void layer_norm_forward_plain(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd,
                              int64_t rows, int64_t n, double eps) {
  forward(x, w, b, y, mean, rstd, rows, n, eps, /*vector=*/false);
}

template <typename T>
void layer_norm_book_forward(const T* x, const T* scale, const T* shift, T* y, T* mean, T* denom,
                             int64_t rows, int64_t n, double eps) {
  book_forward(x, scale, shift, y, mean, denom, rows, n, eps, /*vector=*/true);
}
template <typename T>
void layer_norm_book_forward_plain(const T* x, const T* scale, const T* shift, T* y, T* mean,
                                   T* denom, int64_t rows, int64_t n, double eps) {
  book_forward(x, scale, shift, y, mean, denom, rows, n, eps, /*vector=*/false);
}

template <typename T>
void layer_norm_backward(const T* x, const T* w, const T* dy, const T* mean, const T* rstd,
                         bool saved_denominator, T* dx, T* dw, T* db, int64_t rows, int64_t n) {
  backward(x, w, dy, mean, rstd, saved_denominator, dx, dw, db, rows, n, /*vector=*/true);
}
template <typename T>
void layer_norm_backward_plain(const T* x, const T* w, const T* dy, const T* mean, const T* rstd,
                               bool saved_denominator, T* dx, T* dw, T* db, int64_t rows,
                               int64_t n) {
  backward(x, w, dy, mean, rstd, saved_denominator, dx, dw, db, rows, n, /*vector=*/false);
}

#define EMBER_LAYER_NORM_INSTANCES(T)                                                              \
  template void layer_norm_forward<T>(const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t,  \
                                      double);                                                     \
  template void layer_norm_book_forward<T>(const T*, const T*, const T*, T*, T*, T*, int64_t,      \
                                           int64_t, double);                                       \
  template void layer_norm_backward<T>(const T*, const T*, const T*, const T*, const T*, bool, T*, \
                                       T*, T*, int64_t, int64_t);                                  \
  template void layer_norm_forward_plain<T>(const T*, const T*, const T*, T*, T*, T*, int64_t,     \
                                            int64_t, double);                                      \
  template void layer_norm_book_forward_plain<T>(const T*, const T*, const T*, T*, T*, T*,         \
                                                 int64_t, int64_t, double);                        \
  template void layer_norm_backward_plain<T>(const T*, const T*, const T*, const T*, const T*,     \
                                             bool, T*, T*, T*, int64_t, int64_t);
EMBER_LAYER_NORM_INSTANCES(float)
EMBER_LAYER_NORM_INSTANCES(double)
#undef EMBER_LAYER_NORM_INSTANCES

}  // namespace ember::kernels
#endif  // HWY_ONCE
