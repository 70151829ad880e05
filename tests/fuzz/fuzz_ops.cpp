// fuzz_ops: libFuzzer decodes its bytes into a short program of tensor ops and runs it.
//
// A program is a sequence of instructions over a small stack of tensors: factories with fuzzed
// shapes and dtypes, views with fuzzed dims/steps/indices, elementwise ops, reductions, matrix
// products, selection (sort, topk, gather, index_select, multinomial, ...), the nn ops and losses
// (linear, embedding, layer_norm, dropout, attention, cross_entropy, ...), in-place ops,
// requires_grad, backward, autograd::grad with create_graph and the autograd::functional
// derivatives: every op of core/ops/ and every loss is reachable, forward and backward, with
// fuzzed shapes, dims, dtypes, indices and values. Every ember::Error is an expected answer to a
// bad input and is swallowed; any other exception escapes (libFuzzer reports it), as does any
// crash or sanitizer report.
//
// Sizes are fuzzed too, including huge and negative ones, but a request whose byte count fits
// in int64 is kept under kMaxElements so the fuzzer tests Ember's checks, not the machine's RAM;
// so is the output of an op that an empty input can make big (a reduction, a matrix product,
// index_select, embedding, a loss per position: see reduced_shape).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "core/ember.h"
#include "core/ops/attention.h"
#include "core/ops/nn_ops.h"
#include "nn/loss.h"

namespace {

using namespace ember;

constexpr int64_t kMaxElements = 1 << 12;
constexpr std::size_t kMaxStack = 8;
constexpr int kMaxInstructions = 48;

class Reader {
 public:
  Reader(const uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool flag() { return byte() & 1; }
  // Mostly small values, sometimes one of the values that break arithmetic.
  int64_t integer() {
    static constexpr int64_t kSpecial[] = {-1,
                                           -2,
                                           0,
                                           int64_t{1} << 31,
                                           int64_t{1} << 32,
                                           int64_t{1} << 61,
                                           int64_t{1} << 62,
                                           std::numeric_limits<int64_t>::max(),
                                           std::numeric_limits<int64_t>::min(),
                                           -(int64_t{1} << 62)};
    uint8_t b = byte();
    if (b < 224) return static_cast<int64_t>(b % 8) - 2;  // -2 .. 5
    return kSpecial[b % (sizeof(kSpecial) / sizeof(kSpecial[0]))];
  }
  int64_t size_value() {
    uint8_t b = byte();
    if (b < 240) return b % 6;  // 0 .. 5
    return integer();
  }
  double real() {
    static constexpr double kValues[] = {0.0,  1.0,    -1.0, 0.5,      2.0,       -3.25,
                                         1e30, -1e300, NAN,  INFINITY, -INFINITY, 1e-40};
    return kValues[byte() % (sizeof(kValues) / sizeof(kValues[0]))];
  }
  // A number beside a tensor: an integer (which keeps an integer tensor's dtype) or a real.
  Scalar scalar() {
    if (flag()) return integer();
    return real();
  }
  std::optional<Scalar> maybe_scalar() {
    if (flag()) return std::nullopt;
    return scalar();
  }
  DType dtype() {
    static constexpr DType kTypes[] = {DType::Float32, DType::Float64, DType::Float32, DType::Int64,
                                       DType::Bool};
    return kTypes[byte() % 5];
  }
  Shape shape() {
    Shape s(byte() % 5);
    for (auto& d : s) d = size_value();
    return s;
  }

 private:
  const uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// Would a contiguous tensor of this shape be small, or fail Ember's own checks? (Not one that
// passes them and then asks the allocator for gigabytes.)
bool affordable(const Shape& shape) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0) return true;  // Ember refuses it
    overflow = __builtin_mul_overflow(n, d, &n) || overflow;
  }
  for (int64_t d : shape) {
    if (d == 0) return true;
  }
  int64_t bytes = 0;
  if (overflow || __builtin_mul_overflow(n, int64_t{8}, &bytes)) return true;  // refused too
  return n <= kMaxElements;
}

// Most ops give at most as many elements as their inputs have (or as their broadcast has, which
// `elementwise` and `linalg` keep small), so an empty input gives an empty output. Reductions and
// matrix products do not: an empty tensor may have any size in its other dims, and reducing or
// contracting over its zero-sized dim keeps them (sum(1) of a [2^32, 0] tensor is 2^32 zeros, as in
// PyTorch; mean(1) fills 16 GB with nan). So before those ops run, the shape they will give is
// checked with affordable(), as a factory's shape is. Dims Ember refuses need no check.

// The shape of a reduction of `shape` over `dims` (each in [-dim, dim), a 0-d tensor's -1 and 0),
// or nothing when a dim is out of range.
std::optional<Shape> reduced_shape(const Shape& shape, const std::vector<int64_t>& dims,
                                   bool keep) {
  const auto n = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t d : dims) {
    const int64_t rank = std::max<int64_t>(n, 1);
    if (d < -rank || d >= rank) return std::nullopt;
    if (n > 0) reduced[static_cast<std::size_t>(d < 0 ? d + n : d)] = true;
  }
  Shape out;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (!reduced[i]) {
      out.push_back(shape[i]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  return out;
}

// The shape of x @ y as matmul gives it (mm and bmm too, for the shapes they take): the broadcast
// batch dims, then x's rows (unless x is 1-d) and y's columns (unless y is 1-d). Batch dims that
// cannot broadcast, which Ember refuses, are taken as the larger.
Shape product_shape(const Shape& x, const Shape& y) {
  if (x.empty() || y.empty()) return {};  // refused
  const std::size_t bx = x.size() - std::min<std::size_t>(x.size(), 2);
  const std::size_t by = y.size() - std::min<std::size_t>(y.size(), 2);
  const std::size_t batch = std::max(bx, by);
  Shape out(batch);
  for (std::size_t i = 0; i < batch; ++i) {
    const int64_t dx = i < batch - bx ? 1 : x[i - (batch - bx)];
    const int64_t dy = i < batch - by ? 1 : y[i - (batch - by)];
    out[i] = dx == 1 ? dy : dy == 1 ? dx : std::max(dx, dy);
  }
  if (x.size() >= 2) out.push_back(x[x.size() - 2]);
  if (y.size() >= 2) out.push_back(y.back());
  return out;
}

bool small(const Tensor& t) {
  try {
    return t.numel() <= kMaxElements;
  } catch (const Error&) {
    return false;  // an overflowing expand(): keep it out of the stack
  }
}

struct Machine {
  std::vector<Tensor> stack;

  Tensor pick(Reader& r) {
    if (stack.empty()) return Tensor();  // ops on an undefined tensor must be Errors too
    uint8_t b = r.byte();
    if (b == 255) return Tensor();
    return stack[b % stack.size()];
  }
  void push(const Tensor& t) {
    if (!t.defined() || !small(t)) return;
    if (stack.size() < kMaxStack) {
      stack.push_back(t);
    } else {
      stack[stack.size() - 1] = t;
    }
  }

  void factory(Reader& r) {
    Shape shape = r.shape();
    DType dtype = r.dtype();
    if (!affordable(shape)) return;
    switch (r.byte() % 12) {
      case 0:
        push(zeros(shape, dtype));
        break;
      case 1:
        push(ones(shape, dtype));
        break;
      case 2:
        push(full(shape, r.real(), dtype));
        break;
      case 3:
        push(rand(shape, dtype));
        break;
      case 4:
        push(randn(shape, dtype));
        break;
      case 5: {
        const int64_t start = r.integer(), end = r.integer();
        const Scalar step = r.scalar();
        const double n =
            std::ceil((static_cast<double>(end) - static_cast<double>(start)) / step.to_double());
        if (std::isfinite(n) && n > kMaxElements && n < 1e18) return;
        if (r.flag()) {  // integer bounds, as arange(0, 5, 2): int64 unless the step is a real
          push(arange(start, end, step));
        } else {
          push(arange(static_cast<double>(start), static_cast<double>(end), step, dtype));
        }
        break;
      }
      case 6: {
        int64_t n = r.size_value();
        if (n > 64) return;
        push(eye(n, dtype));
        break;
      }
      case 7:
        push(randint(r.integer(), r.integer(), shape, dtype));
        break;
      case 8:
        push(dropout_noise(shape, dtype, r.real()));
        break;
      case 9: {
        std::vector<double> values(r.byte() % 8, r.real());
        push(from_vector(values, shape, dtype));
        break;
      }
      case 10: {  // the *_like factories take the shape and dtype of a tensor on the stack
        Tensor t = pick(r);
        switch (r.byte() % 5) {
          case 0:
            push(full_like(t, r.scalar()));
            break;
          case 1:
            push(empty_like(t));
            break;
          case 2:
            push(rand_like(t));
            break;
          case 3:
            push(randn_like(t));
            break;
          default:
            push(zeros_like(t));
            break;
        }
        break;
      }
      default:
        push(scalar_tensor(r.scalar(), dtype));
        break;
    }
  }

  void view(Reader& r) {
    Tensor t = pick(r);
    int64_t a = r.integer(), b = r.integer(), c = r.integer();
    switch (r.byte() % 20) {
      case 0:
        push(t.view(r.shape()));
        break;
      case 1:
        push(t.reshape(r.shape()));
        break;
      case 2:
        push(t.transpose(a, b));
        break;
      case 3: {
        std::vector<int64_t> dims(r.byte() % 5);
        for (auto& d : dims) d = r.integer();
        push(t.permute(dims));
        break;
      }
      case 4:
        push(t.unsqueeze(a));
        break;
      case 5:
        push(r.flag() ? t.squeeze() : t.squeeze(a));
        break;
      case 6:
        push(t.select(a, b));
        break;
      case 7:
        push(t.slice(a, r.flag() ? std::optional<int64_t>(b) : std::nullopt,
                     r.flag() ? std::optional<int64_t>(c) : std::nullopt, r.integer()));
        break;
      case 8:
        push(t.narrow(a, b, c));
        break;
      case 9: {
        Shape s = r.shape();
        Tensor e = t.expand(s);
        if (affordable(e.shape())) push(e);
        break;
      }
      case 10:
        push(t.flatten(a, b));
        break;
      case 11:
        push(t.t());
        break;
      case 12: {
        std::vector<TensorIndex> idx;
        for (int i = r.byte() % 4; i > 0; --i) {
          if (r.flag()) {
            idx.emplace_back(r.integer());
          } else {
            idx.emplace_back(Slice(r.integer(), r.integer(), r.integer()));
          }
        }
        push(t.index(idx));
        break;
      }
      case 13: {
        auto parts = r.flag() ? t.split(a, b) : t.chunk(a, b);
        if (!parts.empty()) push(parts[static_cast<std::size_t>(c & 0xff) % parts.size()]);
        break;
      }
      case 14:
        push(t.contiguous());
        break;
      case 15:
        push(r.flag() ? t.clone() : t.detach());
        break;
      case 16: {
        Tensor other = pick(r);
        if (other.defined() && !affordable(other.shape())) return;
        push(t.expand_as(other));
        break;
      }
      case 17:
        push(unsafe_view(t, r.shape()));
        break;
      case 18:
        push(t.mT());
        break;
      default:
        push(t.to(r.dtype()));
        break;
    }
  }

  void elementwise(Reader& r) {
    Tensor x = pick(r), y = pick(r);
    // Broadcasting multiplies sizes: keep outputs small.
    if (x.defined() && y.defined() && small(x) && small(y) && x.numel() * y.numel() > (1 << 16))
      return;
    double s = r.real();
    switch (r.byte() % 32) {
      case 0:
        push(x + y);
        break;
      case 1:
        push(x - y);
        break;
      case 2:
        push(x * y);
        break;
      case 3:
        push(x / y);
        break;
      case 4:
        push(x + s);
        break;
      case 5:
        push(s - x);
        break;
      case 6:
        push(x * s);
        break;
      case 7:
        push(s / x);
        break;
      case 8:
        push(exp(x));
        break;
      case 9:
        push(log(x));
        break;
      case 10:
        push(sqrt(x));
        break;
      case 11:
        push(abs(x));
        break;
      case 12:
        push(-x);
        break;
      case 13:
        push(relu(x));
        break;
      case 14:
        push(tanh(x));
        break;
      case 15:
        push(sigmoid(x));
        break;
      case 16:
        push(gelu(x, r.flag() ? "tanh" : "none"));
        break;
      case 17:
        push(pow(x, s));
        break;
      case 18:
        push(maximum(x, y));
        break;
      case 19:
        push(where(x, y, x));
        break;
      case 20:
        push(masked_fill(x, y, s));
        break;
      case 21:
        push(lt(x, y));
        break;
      case 22:
        push(eq(x, s));
        break;
      case 23:
        push(triu(x, r.integer()));
        break;
      case 24:
        push(tril(x, r.integer()));
        break;
      case 25:
        push(minimum(x, y));
        break;
      case 26: {
        const Scalar t = r.scalar();
        switch (r.byte() % 5) {
          case 0:
            push(ne(x, y));
            break;
          case 1:
            push(le(x, t));
            break;
          case 2:
            push(gt(x, y));
            break;
          case 3:
            push(ge(x, t));
            break;
          default:
            push(lt(x, t));
            break;
        }
        break;
      }
      case 27: {
        const std::optional<Scalar> lo = r.maybe_scalar(), hi = r.maybe_scalar();
        push(clamp(x, lo, hi));
        break;
      }
      case 28: {  // integer scalars: int64 arithmetic on int64 tensors, true division
        const Scalar t = r.integer();
        switch (r.byte() % 5) {
          case 0:
            push(x + t);
            break;
          case 1:
            push(x * t);
            break;
          case 2:
            push(x / t);
            break;
          case 3:
            push(pow(x, t));
            break;
          default:
            push(sub(x, y, r.scalar()));  // x - alpha * y
            break;
        }
        break;
      }
      case 29: {
        Tensor z = pick(r);
        if (x.defined() && y.defined() && z.defined() && small(z) &&
            x.numel() * y.numel() * z.numel() > (1 << 16))
          return;
        switch (r.byte() % 4) {
          case 0:
            push(addcmul(x, y, z, s));
            break;
          case 1:
            push(addcdiv(x, y, z, s));
            break;
          case 2:
            push(lerp(x, y, z));
            break;
          default:
            push(lerp(x, y, s));
            break;
        }
        break;
      }
      case 30:
        push(gpt_gelu(x));
        break;
      default:
        push(add(x, y, r.scalar()));  // x + alpha * y
        break;
    }
  }

  // May a reduction of x over dims run? (See reduced_shape.)
  static bool affordable_reduction(const Tensor& x, const std::vector<int64_t>& dims, bool keep) {
    if (!x.defined()) return true;  // refused
    const std::optional<Shape> out = reduced_shape(x.shape(), dims, keep);
    return !out || affordable(*out);
  }

  void reduction(Reader& r) {
    Tensor x = pick(r);
    int64_t d = r.integer();
    bool keep = r.flag();
    switch (r.byte() % 15) {
      case 0:
        push(x.sum());
        break;
      case 1: {
        const int64_t e = r.integer();
        if (!affordable_reduction(x, {d, e}, keep)) return;
        push(sum(x, {d, e}, keep));
        break;
      }
      case 2:
        push(x.mean());
        break;
      case 3:
        if (!affordable_reduction(x, {d}, keep)) return;
        push(x.mean(d, keep));
        break;
      case 4:
        push(max(x));
        break;
      case 5:
        if (!affordable_reduction(x, {d}, keep)) return;
        push(min(x, d, keep).values);
        break;
      case 6: {
        const Correction correction(r.integer());
        if (!affordable_reduction(x, {d}, keep)) return;
        push(var(x, {d}, correction, keep));
        break;
      }
      case 7:
        if (!affordable_reduction(x, {d}, keep)) return;
        push(x.argmax(d, keep));
        break;
      case 8:
        push(softmax(x, d));
        break;
      case 9:
        push(log_softmax(x, d));
        break;
      case 10: {
        if (!affordable_reduction(x, {d}, keep)) return;
        ValuesIndices m = max(x, d, keep);
        push(r.flag() ? m.values : m.indices);
        break;
      }
      case 11:
        push(r.flag() ? argmax(x) : min(x));
        break;
      case 12:
        push(r.flag() ? var(x) : ember::std(x, Correction(r.integer())));
        break;
      case 13: {
        const int64_t e = r.integer();
        const bool unbiased = r.flag();
        if (!affordable_reduction(x, {d, e}, keep)) return;
        push(r.flag() ? ember::std(x, {d, e}, unbiased, keep) : mean(x, {d, e}, keep));
        break;
      }
      default: {
        const bool unbiased = r.flag();
        if (!affordable_reduction(x, {d}, keep)) return;
        push(r.flag() ? x.var(d, unbiased, keep) : x.std(d, unbiased, keep));
        break;
      }
    }
  }

  void linalg(Reader& r) {
    Tensor x = pick(r), y = pick(r);
    if (x.defined() && y.defined() && small(x) && small(y) && x.numel() * y.numel() > (1 << 16))
      return;
    const int op = r.byte() % 9;
    // The products' outputs (not cat's, nor dot's scalar) may be bigger than their inputs.
    if (op < 3 && x.defined() && y.defined() && !affordable(product_shape(x.shape(), y.shape())))
      return;
    if ((op == 5 || op == 6) && x.defined() && y.defined() &&
        !affordable(product_shape(x.shape(), y.shape())))
      return;
    switch (op) {
      case 0:
        push(matmul(x, y));
        break;
      case 1:
        push(mm(x, y));
        break;
      case 2:
        push(bmm(x, y));
        break;
      case 3:
        push(dot(x, y));
        break;
      case 4:
        push(cat({x, y}, r.integer()));
        break;
      case 5:
        push(mv(x, y));
        break;
      case 6: {
        Tensor bias = pick(r);
        push(addmm(bias, x, y));
        break;
      }
      case 7: {  // x @ weight^T + bias, weight y of shape [out, in]
        if (x.defined() && y.defined() && y.dim() == 2 &&
            !affordable(product_shape(x.shape(), {y.size(1), y.size(0)})))
          return;
        push(linear(x, y, r.flag() ? pick(r) : Tensor()));
        break;
      }
      default: {
        std::vector<Tensor> parts(r.byte() % 4, x);
        if (!parts.empty()) parts.back() = y;
        push(r.flag() ? ember::stack(parts, r.integer()) : cat(parts, r.integer()));
        break;
      }
    }
  }

  void in_place(Reader& r) {
    Tensor x = pick(r), y = pick(r);
    double s = r.real();
    switch (r.byte() % 18) {
      case 0:
        x.add_(y);
        break;
      case 1:
        x.mul_(s);
        break;
      case 2:
        x.copy_(y);
        break;
      case 3:
        x.fill_(s);
        break;
      case 4:
        x.masked_fill_(y, s);
        break;
      case 5:
        x.zero_();
        break;
      case 6:
        x.set({r.integer(), r.integer()}, r.scalar());
        break;
      case 7:
        x.sub_(y, r.scalar());
        break;
      case 8:
        x.mul_(y);
        break;
      case 9:
        x.div_(y);
        break;
      case 10:
        x.div_(r.scalar());
        break;
      case 11:
        x.add_(r.scalar(), r.scalar());
        break;
      case 12: {
        Tensor z = pick(r);
        switch (r.byte() % 4) {
          case 0:
            x.addcmul_(y, z, s);
            break;
          case 1:
            x.addcdiv_(y, z, s);
            break;
          case 2:
            x.lerp_(y, z);
            break;
          default:
            x.lerp_(y, s);
            break;
        }
        break;
      }
      case 13: {
        const std::optional<Scalar> lo = r.maybe_scalar(), hi = r.maybe_scalar();
        x.clamp_(lo, hi);
        break;
      }
      case 14:
        x.sqrt_();
        break;
      case 15:
        uniform_(x, s, r.real());
        break;
      case 16:
        normal_(x, s, r.real());
        break;
      default:
        bernoulli_(x, s);
        break;
    }
  }

  void autograd_step(Reader& r) {
    Tensor x = pick(r);
    switch (r.byte() % 11) {
      case 0:
        x.requires_grad_(r.flag());
        break;
      case 1:
        x.sum().backward();
        break;
      case 2:
        x.backward(ones_like(x), r.flag());
        break;
      case 3: {
        Tensor y = pick(r);
        autograd::grad({x}, {y, y}, {}, r.flag(), /*create_graph=*/false, r.flag());
        break;
      }
      case 4:
        push(x.grad());
        break;
      case 5:
        x.retain_grad();
        break;
      case 6: {  // a gradient with a graph of its own, differentiated again
        Tensor y = pick(r);
        const bool retain = r.flag();
        std::vector<Tensor> g = autograd::grad({x}, {y}, {}, retain, /*create_graph=*/true,
                                               /*allow_unused=*/r.flag());
        if (!g.empty() && g[0].defined()) {
          push(g[0]);
          if (r.flag()) g[0].sum().backward();
        }
        break;
      }
      case 7:
        x.backward(r.flag() ? Tensor() : ones_like(x), r.flag(), /*create_graph=*/true);
        break;
      case 8:
        x.set_grad(pick(r));
        break;
      case 9:
        functional_derivative(r, x);
        break;
      default:
        // The next instruction under no_grad (in-place writes to leaves, ops that record no
        // graph); not nested.
        if (GradMode::is_enabled()) {
          NoGradGuard no_grad;
          step(r);
        }
        break;
    }
  }

  // autograd::functional on one of a few functions (elementwise, a softmax, a reduction to one
  // element). A Jacobian has f(x).numel() * x.numel() elements: x is kept tiny.
  void functional_derivative(Reader& r, const Tensor& x) {
    if (x.defined() && x.numel() > 16) return;
    const int which = r.byte() % 4;
    const int64_t d = r.integer();
    autograd::functional::Function f = [which, d](const Tensor& t) {
      switch (which) {
        case 0:
          return exp(t) * t;
        case 1:
          return softmax(t, d);
        case 2:
          return (tanh(t) * t).sum();
        default:
          return t.pow(3).mean();
      }
    };
    Tensor v = pick(r);
    const bool create_graph = r.flag(), strict = r.flag();
    switch (r.byte() % 6) {
      case 0:
        push(autograd::functional::jacobian(f, x, create_graph, strict));
        break;
      case 1:
        push(autograd::functional::hessian(f, x, create_graph, strict));
        break;
      case 2:
        push(autograd::functional::vjp(f, x, v, create_graph, strict).second);
        break;
      case 3:
        push(autograd::functional::jvp(f, x, v, create_graph, strict).second);
        break;
      case 4:
        push(autograd::functional::vhp(f, x, v, create_graph, strict).second);
        break;
      default:
        push(autograd::functional::hvp(f, x, v, create_graph, strict).second);
        break;
    }
  }

  // Sorting, selection by index and sampling. Index tensors come from the stack (int64
  // factories, randint, argmax, sort's indices, ...), with whatever values they hold.
  void selection(Reader& r) {
    Tensor x = pick(r);
    const int64_t d = r.integer();
    switch (r.byte() % 10) {
      case 0: {
        ValuesIndices s = sort(x, d, r.flag(), r.flag());
        push(r.flag() ? s.values : s.indices);
        break;
      }
      case 1:
        push(argsort(x, d, r.flag()));
        break;
      case 2: {
        const int64_t k = r.integer();
        const bool largest = r.flag();
        ValuesIndices s = topk(x, k, d, largest, r.flag());
        push(r.flag() ? s.values : s.indices);
        break;
      }
      case 3:
        push(nonzero(x));
        break;
      case 4: {
        std::vector<Tensor> indices = where(x);
        if (!indices.empty()) push(indices[static_cast<std::size_t>(d & 0xff) % indices.size()]);
        break;
      }
      case 5:
        push(gather(x, d, pick(r)));  // the output has the index's shape
        break;
      case 6: {
        Tensor index = pick(r);
        // The output is x with dim d as long as the index: x may be empty with huge other dims.
        if (x.defined() && index.defined() && d >= -x.dim() && d < x.dim()) {
          Shape out = x.shape();
          out[static_cast<std::size_t>(d < 0 ? d + x.dim() : d)] = index.numel();
          if (!affordable(out)) return;
        }
        push(index_select(x, d, index));
        break;
      }
      case 7: {
        const int64_t samples = r.integer();
        const int64_t rows = x.defined() && x.dim() == 2 ? x.size(0) : 1;
        if (!affordable({rows, samples})) return;
        push(multinomial(x, samples, r.flag()));
        break;
      }
      case 8: {  // embedding: rows of the weight x [num_embeddings, embedding_dim]
        Tensor indices = pick(r);
        if (x.defined() && indices.defined() && x.dim() == 2) {
          Shape out = indices.shape();
          out.push_back(x.size(1));
          if (!affordable(out)) return;
        }
        push(embedding(x, indices));
        break;
      }
      default:
        push(randint(d, x.defined() ? x.shape() : Shape{}));
        break;
    }
  }

  // The nn ops and the losses: normalisation, dropout, attention, cross_entropy and company.
  void nn_op(Reader& r) {
    namespace F = nn::functional;
    Tensor x = pick(r), y = pick(r);
    const double s = r.real();
    const int op = r.byte() % 9;
    // cross_entropy's and nll_loss's per-position losses (reduction none) have x's shape without
    // its class dim, which an empty x ([2^40, 0]) may make big.
    if ((op == 4 || op == 5) && x.defined() && x.dim() >= 2) {
      Shape positions = x.shape();
      positions.erase(positions.begin() + 1);
      if (!affordable(positions)) return;
    }
    switch (op) {
      case 0: {
        // Mostly x's own trailing dims (a valid normalized_shape), sometimes any shape.
        Shape normalized = r.shape();
        if (x.defined() && r.flag()) {
          const std::size_t k = std::min<std::size_t>(normalized.size(), x.shape().size());
          normalized.assign(x.shape().end() - static_cast<std::ptrdiff_t>(k), x.shape().end());
        }
        Tensor bias = r.flag() ? pick(r) : Tensor();
        push(layer_norm(x, normalized, r.flag() ? y : Tensor(), bias, r.flag() ? s : 1e-5));
        break;
      }
      case 1:
        push(gpt_layer_norm(x, y, pick(r), r.flag() ? s : 1e-5));
        break;
      case 2:
        push(dropout(x, s, r.flag()));
        break;
      case 3: {
        Tensor v = pick(r);
        if (x.defined() && v.defined() && x.dim() == 4 && v.dim() == 4 &&
            !affordable({x.size(0), x.size(1), x.size(2), v.size(3)}))
          return;
        push(causal_attention(x, y, v, r.flag() ? s : 0.0, r.flag()));
        break;
      }
      case 4: {
        F::CrossEntropyFuncOptions options;
        if (r.flag()) options.weight(pick(r));
        options.ignore_index(r.integer()).reduction(loss_reduction(r));
        if (r.flag()) options.label_smoothing(s);
        push(F::cross_entropy(x, y, options));
        break;
      }
      case 5: {
        F::NLLLossFuncOptions options;
        if (r.flag()) options.weight(pick(r));
        options.ignore_index(r.integer()).reduction(loss_reduction(r));
        push(F::nll_loss(x, y, options));
        break;
      }
      case 6:
        if (x.defined() && y.defined() && x.numel() * y.numel() > (1 << 16)) return;
        push(r.flag() ? F::mse_loss(x, y, loss_reduction(r)) : F::l1_loss(x, y, loss_reduction(r)));
        break;
      case 7: {
        F::BinaryCrossEntropyFuncOptions options;
        if (r.flag()) options.weight(pick(r));
        options.reduction(loss_reduction(r));
        push(F::binary_cross_entropy(x, y, options));
        break;
      }
      default: {
        F::BinaryCrossEntropyWithLogitsFuncOptions options;
        if (r.flag()) options.weight(pick(r));
        if (r.flag()) options.pos_weight(pick(r));
        options.reduction(loss_reduction(r));
        push(F::binary_cross_entropy_with_logits(x, y, options));
        break;
      }
    }
  }

  static nn::Reduction loss_reduction(Reader& r) {
    static constexpr nn::Reduction kReductions[] = {nn::kNone, nn::kMean, nn::kSum};
    return kReductions[r.byte() % 3];
  }

  void inspect(Reader& r) {
    Tensor x = pick(r);
    switch (r.byte() % 8) {
      case 0:
        (void)x.item();
        break;
      case 1:
        (void)x.at({r.integer()});
        break;
      case 2:
        (void)repr(x);
        break;
      case 3:
        (void)x.size(r.integer());
        break;
      case 4:
        (void)x.stride(r.integer());
        break;
      case 5:
        (void)autograd::to_dot(x);
        break;
      case 6:
        (void)equal(x, pick(r));
        break;
      default:
        (void)allclose(x, pick(r), r.real(), r.real(), r.flag());
        break;
    }
  }

  void step(Reader& r) {
    switch (r.byte() % 11) {
      case 0:
      case 1:
        factory(r);
        break;
      case 2:
        view(r);
        break;
      case 3:
        elementwise(r);
        break;
      case 4:
        reduction(r);
        break;
      case 5:
        linalg(r);
        break;
      case 6:
        in_place(r);
        break;
      case 7:
        autograd_step(r);
        break;
      case 8:
        selection(r);
        break;
      case 9:
        nn_op(r);
        break;
      default:
        inspect(r);
        break;
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  Reader r(data, size);
  Machine m;
  for (int i = 0; i < kMaxInstructions && !r.done(); ++i) {
    try {
      m.step(r);
    } catch (const ember::Error&) {
      // An expected answer to a bad program.
    }
  }
  return 0;
}
