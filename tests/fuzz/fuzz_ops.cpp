// fuzz_ops: libFuzzer decodes its bytes into a short program of tensor ops and runs it.
//
// A program is a sequence of instructions over a small stack of tensors: factories with fuzzed
// shapes and dtypes, views with fuzzed dims/steps/indices, elementwise ops, reductions, matmul,
// softmax, in-place ops, requires_grad and backward. Every ember::Error is an expected answer to
// a bad input and is swallowed; any other exception escapes (libFuzzer reports it), as does any
// crash or sanitizer report.
//
// Sizes are fuzzed too, including huge and negative ones, but a request whose byte count fits
// in int64 is kept under kMaxElements so the fuzzer tests Ember's checks, not the machine's RAM;
// so is the output of a reduction or a matrix product, which an empty input can make big (see
// reduced_shape).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "core/ember.h"

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
    switch (r.byte() % 8) {
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
        double start = static_cast<double>(r.integer()), end = static_cast<double>(r.integer());
        double step = r.flag() ? r.real() : static_cast<double>(r.integer());
        double n = std::ceil((end - start) / step);
        if (std::isfinite(n) && n > kMaxElements && n < 1e18) return;
        push(arange(start, end, step, dtype));
        break;
      }
      case 6: {
        int64_t n = r.size_value();
        if (n > 64) return;
        push(eye(n, dtype));
        break;
      }
      default:
        push(scalar_tensor(r.real(), dtype));
        break;
    }
  }

  void view(Reader& r) {
    Tensor t = pick(r);
    int64_t a = r.integer(), b = r.integer(), c = r.integer();
    switch (r.byte() % 16) {
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
    switch (r.byte() % 24) {
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
      default:
        push(triu(x, r.integer()));
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
    switch (r.byte() % 10) {
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
      default:
        push(log_softmax(x, d));
        break;
    }
  }

  void linalg(Reader& r) {
    Tensor x = pick(r), y = pick(r);
    if (x.defined() && y.defined() && small(x) && small(y) && x.numel() * y.numel() > (1 << 16))
      return;
    const int op = r.byte() % 5;
    // The products' outputs (not cat's, nor dot's scalar) may be bigger than their inputs.
    if (op < 3 && x.defined() && y.defined() && !affordable(product_shape(x.shape(), y.shape())))
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
      default:
        push(cat({x, y}, r.integer()));
        break;
    }
  }

  void in_place(Reader& r) {
    Tensor x = pick(r), y = pick(r);
    double s = r.real();
    switch (r.byte() % 7) {
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
      default:
        x.set({r.integer(), r.integer()}, s);
        break;
    }
  }

  void autograd_step(Reader& r) {
    Tensor x = pick(r);
    switch (r.byte() % 6) {
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
      default:
        x.retain_grad();
        break;
    }
  }

  void inspect(Reader& r) {
    Tensor x = pick(r);
    switch (r.byte() % 6) {
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
      default:
        (void)autograd::to_dot(x);
        break;
    }
  }

  void step(Reader& r) {
    switch (r.byte() % 9) {
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
