#include "core/ops/functional.h"

#include "core/base/generator.h"
#include "core/ops/elementwise.h"
#include "core/tensor/random.h"

namespace ember {

// PyTorch's CPU dropout (_dropout_impl): noise ~ Bernoulli(1 - p), one double uniform per
// element (u < 1 - p keeps it), scaled by 1 / (1 - p) computed in the tensor's dtype; the
// result is x * noise, so its grad_fn is MulBackward0 and the gradient is masked the same way.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  detail::check_defined(x, "dropout");
  OpScope scope("dropout");
  check(p >= 0 && p <= 1, "dropout: dropout probability has to be between 0 and 1, but got ", p);
  // As PyTorch's: any dtype passes through when nothing is dropped, and p == 1 multiplies by a
  // zero of x's dtype; only the float noise of 0 < p < 1 needs a floating point x (PyTorch's
  // in-place scaling of an int64 or bool x refuses the float result).
  if (p == 0 || !training || x.numel() == 0) return x;
  if (p == 1) return x * zeros({}, x.dtype());
  check(is_floating(x.dtype()),
        "dropout: result type Float can't be cast to the desired output "
        "type ",
        dtype_name(x.dtype()), " (dropout with 0 < p < 1 takes a floating point tensor)");
  return x * dropout_noise(x.shape(), x.dtype(), p, gen);
}

Tensor dropout_noise(const Shape& shape, DType dtype, double p, Generator* gen) {
  check(p >= 0 && p <= 1, "dropout: dropout probability has to be between 0 and 1, but got ", p);
  check(is_floating(dtype), "dropout: expected a floating point dtype, got ", dtype_name(dtype));
  if (p == 1) return zeros(shape, dtype);
  Tensor noise = detail::empty_for_overwrite(shape, dtype);  // every element is written
  if (p == 0) {  // bernoulli_(1) still draws, as PyTorch's would
    bernoulli_(noise, 1.0, gen);
    return noise;
  }
  // bernoulli_(1 - p) and the scaling by 1 / (1 - p) in T, in one pass (random_fill).
  Generator& g = generator_or_default(gen);
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    random_fill::dropout_noise(noise.data_ptr<T>(), noise.numel(), p, g);
  });
  return noise;
}

}  // namespace ember
