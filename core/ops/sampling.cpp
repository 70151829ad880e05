#include "core/ops/sampling.h"

#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "core/base/grad_mode.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/sort.h"

namespace ember {

namespace {

// at::uniform_real_distribution<double>(0, 1): 53 random bits of one random64().
double uniform_double(Generator& g) {
  const uint64_t bits = g.random64() & ((uint64_t{1} << 53) - 1);
  return static_cast<double>(bits) * std::ldexp(1.0, -53);
}

}  // namespace

Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& options,
               Generator* gen) {
  check(low < high, "randint: random_ expects 'from' to be less than 'to', but got from=", low,
        " >= to=", high);
  check(options.dtype() != DType::Bool || (low >= 0 && high <= 2),
        "randint: for a bool tensor, expected 0 <= low < high <= 2, got [", low, ", ", high, ")");
  // A fresh contiguous tensor: memory order is row-major order. (Its size and allocation errors
  // name randint.)
  OpScope scope("randint");
  Tensor drawn = empty(shape, DType::Int64);
  random_fill::randint(drawn.data_ptr<int64_t>(), drawn.numel(), low, high,
                       generator_or_default(gen));
  if (options.dtype() == DType::Int64 && !options.requires_grad()) return drawn;
  return from_vector(drawn.to_vector<int64_t>(), shape, options);
}

Tensor randint(int64_t high, const Shape& shape, const TensorOptions& options, Generator* gen) {
  return randint(0, high, shape, options, gen);
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* gen) {
  OpScope scope("multinomial");  // size errors (num_samples rows too many for memory) name it
  detail::check_defined(probs, "multinomial");
  check(is_floating(probs.dtype()),
        "multinomial only supports floating-point dtypes for input, got: ",
        dtype_name(probs.dtype()));
  check(probs.dim() == 1 || probs.dim() == 2, "multinomial: prob_dist must be 1 or 2 dim, got ",
        probs.dim(), " dims (shape ", probs.shape(), ")");
  const int64_t n_categories = probs.size(-1);
  check(num_samples > 0, "multinomial: cannot sample n_sample <= 0 samples (got ", num_samples,
        ")");
  check(replacement || num_samples <= n_categories,
        "multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
        "(n_sample = ",
        num_samples, ", prob_dist shape ", probs.shape(), ")");
  check(n_categories <= (int64_t{1} << 24),
        "multinomial: number of categories cannot exceed 2^24 (got ", n_categories, ")");
  NoGradGuard no_grad;
  const Tensor p = probs.detach();
  const int64_t n_dist = p.dim() == 2 ? p.size(0) : 1;
  Shape out_shape = p.dim() == 2 ? Shape{n_dist, num_samples} : Shape{num_samples};
  Generator& g = generator_or_default(gen);

  if (!replacement) {
    // PyTorch's fast path (the Gumbel-max trick): argmax / topk of p / q with q ~ Exp(1).
    // (PyTorch 1.13 takes it without replacement only; one sample with replacement goes
    // through the cumulative distribution below.)
    const std::vector<double> v = p.contiguous().to_vector<double>();
    for (double x : v) {
      check(std::isfinite(x) && x >= 0,
            "multinomial: probability tensor contains either `inf`, `nan` or element < 0");
    }
    for (int64_t r = 0; r < n_dist; ++r) {
      double sum = 0;
      for (int64_t j = 0; j < n_categories; ++j) sum += v[r * n_categories + j];
      check(sum > 0, "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
    }
    // exponential_(1): -1 / lambda * log(1 - u) in double, then cast to the dtype.
    std::vector<double> q(v.size());
    {
      // One lock for all the draws, as every fill takes (core/base/generator.h).
      std::lock_guard<std::mutex> lock(g.mutex());
      for (double& x : q) x = -1.0 / 1.0 * std::log(1.0 - uniform_double(g));
    }
    Tensor qt = from_vector(q, p.shape(), p.dtype());
    Tensor ratio = p / qt;
    if (num_samples == 1) return argmax(ratio, -1, /*keepdim=*/true);
    return topk(ratio, num_samples, -1).indices;
  }

  // With replacement.
  Tensor out = empty(out_shape, DType::Int64);
  int64_t* result = out.data_ptr<int64_t>();
  dispatch_floating(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor contiguous = p.contiguous();
    // One lock for all the draws, as every fill takes (core/base/generator.h).
    std::lock_guard<std::mutex> lock(g.mutex());
    const T* data = contiguous.data_ptr<T>();
    std::vector<T> cum(static_cast<std::size_t>(n_categories));
    for (int64_t r = 0; r < n_dist; ++r) {
      T sum = 0;
      for (int64_t j = 0; j < n_categories; ++j) {
        const T val = data[r * n_categories + j];
        check(val >= 0,
              "multinomial: invalid multinomial distribution (encountering probability entry < "
              "0)");
        check(std::isfinite(val),
              "multinomial: invalid multinomial distribution (encountering probability entry = "
              "infinity or NaN)");
        sum += val;
        cum[j] = sum;
      }
      check(sum > 0, "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
      for (T& c : cum) c /= sum;
      cum[n_categories - 1] = 1;  // the last bucket ends at exactly 1
      for (int64_t s = 0; s < num_samples; ++s) {
        const double u = uniform_double(g);
        int64_t left = 0, right = n_categories;
        while (right - left > 0) {  // the first bucket whose cumulative probability is >= u
          const int64_t mid = left + (right - left) / 2;
          if (cum[mid] < u) {
            left = mid + 1;
          } else {
            right = mid;
          }
        }
        result[r * num_samples + s] = left;
      }
    }
  });
  return out;
}

}  // namespace ember
