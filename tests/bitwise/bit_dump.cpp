// bit_dump: the bit patterns of a set of ops and of the chapter-3 modules (forward and every
// parameter's gradient), one line per tensor. scripts/test runs it from the release and the asan
// build and requires identical output: every preset computes the same numbers (a build flag must
// never change a result; the project compiles with -ffp-contract=off, so -O3 cannot fuse what -O1
// does not).
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "core/base/bit_cast.h"
#include "core/ember.h"
#include "core/ops/nn_ops.h"
#include "nn/attention.h"
#include "nn/layers.h"

namespace {

using namespace ember;

void dump(const std::string& name, const Tensor& t) {
  std::cout << name << " " << dtype_name(t.dtype()) << " " << shape_str(t.shape());
  char buf[24];
  if (t.dtype() == DType::Float64) {
    for (double v : t.to_vector<double>()) {
      std::snprintf(buf, sizeof buf, " %016llx",
                    static_cast<unsigned long long>(ember::bit_cast<uint64_t>(v)));
      std::cout << buf;
    }
  } else {
    for (float v : t.to(DType::Float32).to_vector<float>()) {
      std::snprintf(buf, sizeof buf, " %08x", ember::bit_cast<uint32_t>(v));
      std::cout << buf;
    }
  }
  std::cout << "\n";
}

void dump_module(const std::string& name, nn::Module& m, const Tensor& x) {
  Tensor y = m.forward(x);
  dump(name + ".forward", y);
  (y * y).sum().backward();
  for (const auto& [pname, p] : m.named_parameters()) dump(name + ".grad." + pname, p.grad());
}

}  // namespace

int main() {
  manual_seed(123);
  const Tensor a = randn({5, 7}), b = randn({7, 6}), c = rand({2, 3, 8}, DType::Float64);
  dump("layer_norm_const", layer_norm(full({1, 4}, 3.0), {4}));
  // Tensors drawn for one call are drawn in statements of their own, in a fixed order: C++
  // leaves the order of a call's arguments unspecified (GCC's x86-64 code draws the last argument
  // first, its arm64 code the first), and the output must be the same on every CPU. The order is
  // x86-64's, which this program's output has always had.
  const Tensor norm_bias = randn({7});
  const Tensor norm_weight = rand({7});
  dump("layer_norm", layer_norm(a, {7}, norm_weight, norm_bias));
  dump("layer_norm_f64", layer_norm(c, {8}));
  dump("matmul", matmul(a, b));
  dump("matmul_f64", matmul(c, c.transpose(1, 2)));
  const Tensor linear_bias = randn({4});
  const Tensor linear_weight = randn({4, 7});
  dump("linear", linear(a, linear_weight, linear_bias));
  dump("softmax", softmax(a, -1));
  dump("log_softmax", log_softmax(c, 1));
  dump("gelu", gelu(a));
  dump("gelu_tanh", gelu(a, "tanh"));
  dump("exp_log_tanh_sigmoid", sigmoid(tanh(log(exp(a) + 1.0))));
  dump("sqrt_pow", sqrt(abs(a)).pow(3.0));
  dump("sum_mean_var", stack({a.sum(), a.mean(), var(a), var(a, Correction(0)), a.sum(0).sum()}));
  dump("sum_large", randn({100000}).sum());
  dump("mul_add_div", (a * 1.7 + 0.3) / (a.abs() + 2.0));

  // The chapter's modules, seeded like the book, with a backward of sum(y^2).
  manual_seed(789);
  Tensor inputs = rand({2, 6, 3});
  {
    manual_seed(123);
    nn::SelfAttentionV1 m(3, 2);
    dump_module("SelfAttentionV1", m, inputs[0]);
  }
  {
    manual_seed(789);
    nn::SelfAttentionV2 m(3, 2);
    dump_module("SelfAttentionV2", m, inputs[0]);
  }
  {
    manual_seed(123);
    nn::CausalAttention m(3, 2, 6, 0.5);  // dropout in training mode: the generator too
    dump_module("CausalAttention", m, inputs);
  }
  {
    manual_seed(123);
    nn::MultiHeadAttentionWrapper m(3, 2, 6, 0.0, 2);
    dump_module("MultiHeadAttentionWrapper", m, inputs);
  }
  {
    manual_seed(123);
    nn::MultiHeadAttention m(3, 4, 6, 0.0, 2);
    dump_module("MultiHeadAttention", m, inputs);
  }
  return 0;
}
