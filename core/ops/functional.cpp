#include "core/ops/functional.h"

#include "core/ops/elementwise.h"
#include "core/random.h"

namespace ember {

// PyTorch's CPU dropout (_dropout_impl): noise ~ Bernoulli(1 - p), one double uniform per
// element (u < 1 - p keeps it), scaled by 1 / (1 - p) computed in the tensor's dtype; the
// result is x * noise, so its grad_fn is MulBackward0 and the gradient is masked the same way.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  detail::check_defined(x, "dropout");
  check(p >= 0 && p <= 1, "dropout: dropout probability has to be between 0 and 1, but got ", p);
  check(is_floating(x.dtype()), "dropout: expected a floating point tensor, got ",
        dtype_name(x.dtype()));
  if (p == 0 || !training || x.numel() == 0) return x;
  if (p == 1) return x * zeros({}, x.dtype());
  return x * dropout_noise(x.shape(), x.dtype(), p, gen);
}

Tensor dropout_noise(const Shape& shape, DType dtype, double p, Generator* gen) {
  check(p >= 0 && p <= 1, "dropout: dropout probability has to be between 0 and 1, but got ", p);
  check(is_floating(dtype), "dropout: expected a floating point dtype, got ", dtype_name(dtype));
  if (p == 1) return zeros(shape, dtype);
  Tensor noise = detail::empty_for_overwrite(shape, dtype);  // bernoulli_ writes every element
  bernoulli_(noise, 1 - p, gen);
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T scale = T(1) / static_cast<T>(1 - p);  // noise.div_(1 - p) in PyTorch
    T* n = noise.data_ptr<T>();
    const int64_t size = noise.numel();  // once: numel() is a call the loop cannot hoist
    for (int64_t i = 0; i < size; ++i) n[i] = n[i] * scale;
  });
  return noise;
}

}  // namespace ember
