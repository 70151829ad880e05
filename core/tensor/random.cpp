#include "core/tensor/random.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>

#include "core/kernels/iterate.h"

namespace ember {

namespace {

// Storage offsets of t's elements, in increasing memory order (PyTorch's order for fills).
std::vector<int64_t> memory_order_offsets(const Tensor& t) {
  std::vector<int64_t> offsets;
  offsets.reserve(t.numel());
  Shape strides = t.strides();
  kernels::for_each_row<1>(t.shape(), {&strides}, [&](auto off, int64_t n, auto step) {
    for (int64_t i = 0; i < n; ++i) offsets.push_back(t.offset() + off[0] + i * step[0]);
  });
  std::sort(offsets.begin(), offsets.end());
  return offsets;
}

// Runs fill(buffer, n) on t's elements in memory order: directly for contiguous tensors,
// through a gathered buffer otherwise.
template <typename T, typename Fill>
void fill_in_memory_order(Tensor& t, Fill fill) {
  if (t.is_contiguous()) {
    fill(t.data_ptr<T>(), t.numel());
    return;
  }
  std::vector<int64_t> offsets = memory_order_offsets(t);
  std::unique_ptr<T[]> buffer(new T[offsets.size()]);  // not std::vector<bool>: no data()
  fill(buffer.get(), static_cast<int64_t>(offsets.size()));
  T* base = static_cast<T*>(t.storage()->data());
  for (std::size_t i = 0; i < offsets.size(); ++i) base[offsets[i]] = buffer[i];
}

void check_fillable(const Tensor& t, const char* op) {
  detail::check_defined(t, op);
  check(is_floating(t.dtype()), op, ": expected a floating point tensor, got ",
        dtype_name(t.dtype()));
  detail::check_inplace(t, op);
}

}  // namespace

Tensor& uniform_(Tensor& t, double from, double to, Generator* gen) {
  check_fillable(t, "uniform_");
  dispatch_floating(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // PyTorch's bounds: from and to finite in T, and to - from too (a range of inf or nan
    // would fill inf and nan).
    constexpr double kMax = static_cast<double>(std::numeric_limits<T>::max());
    check(from >= -kMax && from <= kMax, "uniform_: from=", from, " is out of bounds for ",
          dtype_name(t.dtype()));
    check(to >= -kMax && to <= kMax, "uniform_: to=", to, " is out of bounds for ",
          dtype_name(t.dtype()));
    check(from <= to, "uniform_: expects to return a [from, to) range, but found from=", from,
          " > to=", to);
    check(to - from <= kMax, "uniform_: expects to - from <= the largest ", dtype_name(t.dtype()),
          ", but found to=", to, " and from=", from,
          " which result in to - from to exceed the limit");
    fill_in_memory_order<T>(t, [&](T* data, int64_t n) {
      random_fill::uniform(data, n, from, to, generator_or_default(gen));
    });
  });
  return t;
}

Tensor& normal_(Tensor& t, double mean, double stddev, Generator* gen) {
  check_fillable(t, "normal_");
  check(stddev >= 0, "normal_: expects std >= 0.0, but found std ", stddev);
  const bool contiguous = t.is_contiguous();
  dispatch_floating(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    fill_in_memory_order<T>(t, [&](T* data, int64_t n) {
      random_fill::normal(data, n, mean, stddev, contiguous, generator_or_default(gen));
    });
  });
  return t;
}

Tensor& bernoulli_(Tensor& t, double p, Generator* gen) {
  check(p >= 0 && p <= 1, "bernoulli_: expects p to be in [0, 1], but got p=", p);
  detail::check_inplace(t, "bernoulli_");
  switch (t.dtype()) {
    case DType::Float32:
      fill_in_memory_order<float>(t, [&](float* d, int64_t n) {
        random_fill::bernoulli(d, n, p, generator_or_default(gen));
      });
      break;
    case DType::Float64:
      fill_in_memory_order<double>(t, [&](double* d, int64_t n) {
        random_fill::bernoulli(d, n, p, generator_or_default(gen));
      });
      break;
    case DType::Bool:
      fill_in_memory_order<bool>(t, [&](bool* d, int64_t n) {
        random_fill::bernoulli(d, n, p, generator_or_default(gen));
      });
      break;
    case DType::Int64:
      // torch.zeros(n, dtype=torch.long).bernoulli_(p): 0s and 1s, the same draws as bool's.
      fill_in_memory_order<int64_t>(t, [&](int64_t* d, int64_t n) {
        std::unique_ptr<bool[]> draws(new bool[static_cast<std::size_t>(n)]);
        random_fill::bernoulli(draws.get(), n, p, generator_or_default(gen));
        for (int64_t i = 0; i < n; ++i) d[i] = draws[i] ? 1 : 0;
      });
      break;
  }
  return t;
}

Tensor rand(const Shape& shape, DType dtype, Generator* gen) {
  OpScope scope("rand");
  Tensor t = empty(shape, dtype);
  return uniform_(t, 0.0, 1.0, gen);
}

Tensor randn(const Shape& shape, DType dtype, Generator* gen) {
  OpScope scope("randn");
  Tensor t = empty(shape, dtype);
  return normal_(t, 0.0, 1.0, gen);
}

Tensor rand_like(const Tensor& t, Generator* gen) {
  detail::check_defined(t, "rand_like");
  OpScope scope("rand_like");
  return rand(t.shape(), t.dtype(), gen);
}
Tensor randn_like(const Tensor& t, Generator* gen) {
  detail::check_defined(t, "randn_like");
  OpScope scope("randn_like");
  return randn(t.shape(), t.dtype(), gen);
}

}  // namespace ember
