#include "core/options.h"

#include "core/error.h"
#include "core/random.h"
#include "core/tensor.h"

namespace ember {

namespace {

// The finishing touch of every factory with options: requires_grad.
Tensor finish(Tensor t, const TensorOptions& options, const char* op) {
  if (options.requires_grad()) {
    check(is_floating(t.dtype()), op,
          ": only Tensors of floating point dtype can require gradients, got dtype ",
          dtype_name(t.dtype()));
    t.requires_grad_(true);
  }
  return t;
}

}  // namespace

Tensor empty(const Shape& shape, const TensorOptions& options) {
  return finish(empty(shape, options.dtype()), options, "empty");
}
Tensor zeros(const Shape& shape, const TensorOptions& options) {
  return finish(zeros(shape, options.dtype()), options, "zeros");
}
Tensor ones(const Shape& shape, const TensorOptions& options) {
  return finish(ones(shape, options.dtype()), options, "ones");
}
Tensor full(const Shape& shape, double value, const TensorOptions& options) {
  return finish(full(shape, value, options.dtype()), options, "full");
}
Tensor eye(int64_t n, const TensorOptions& options) {
  return finish(eye(n, options.dtype()), options, "eye");
}
Tensor rand(const Shape& shape, const TensorOptions& options, Generator* gen) {
  return finish(rand(shape, options.dtype(), gen), options, "rand");
}
Tensor randn(const Shape& shape, const TensorOptions& options, Generator* gen) {
  return finish(randn(shape, options.dtype(), gen), options, "randn");
}

Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                   const TensorOptions& options) {
  return finish(from_vector(values, shape, options.dtype()), options, "from_vector");
}

template <typename T>
requires(std::same_as<T, float> || std::same_as<T, int64_t>) Tensor
    from_vector(const std::vector<T>& values, const Shape& shape, const TensorOptions& options) {
  if constexpr (std::same_as<T, float>) {
    // Every float is a double exactly.
    return from_vector(std::vector<double>(values.begin(), values.end()), shape, options);
  } else {
    if (options.dtype() != DType::Int64) {
      // Into a float or bool tensor, each value rounds as PyTorch's int64 -> dtype cast does.
      std::vector<double> as_double(values.begin(), values.end());
      return from_vector(as_double, shape, options);
    }
    check(static_cast<int64_t>(values.size()) == numel_of(shape), "from_vector: ", values.size(),
          " values cannot fill shape ", shape);
    Tensor t = empty(shape, DType::Int64);
    std::copy(values.begin(), values.end(), t.data_ptr<int64_t>());
    return finish(t, options, "from_vector");
  }
}

template Tensor from_vector<float>(const std::vector<float>&, const Shape&, const TensorOptions&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&,
                                     const TensorOptions&);

}  // namespace ember
