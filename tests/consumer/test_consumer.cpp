// A user's GoogleTest test written with Ember's installed test helpers.
#include <ember/core/testing_gtest.h>
#include <ember/ember.h>
#include <gtest/gtest.h>

// A header by its path of before core/ was split into layer folders: a forwarding header (one
// release) includes <ember/core/tensor/tensor.h>.
#include <ember/core/generator.h>
#include <ember/core/tensor.h>

using namespace ember;

TEST(Consumer, LinearMatchesItsFormula) {
  manual_seed(1);
  nn::ModuleHolder<nn::Linear> lin(3, 2);
  Tensor x = rand({4, 3});
  EXPECT_TENSOR_CLOSE(lin(x), matmul(x, lin->weight.t()) + lin->bias);
  EXPECT_TRUE(lin->named_parameters().contains("bias"));
}

TEST(Consumer, GradcheckOfAComposite) {
  Tensor w = rand({3, 2}, TensorOptions().dtype(kFloat64).requires_grad(true));
  Tensor x = rand({4, 3}, TensorOptions().dtype(kFloat64));
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& in) { return softmax(matmul(x, in[0]), -1).sum(0); }, {w});
}

// A user's own op: a custom Function (libtorch's spelling), its backward checked by gradcheck.
struct ScaledTanh : autograd::Function<ScaledTanh> {
  static constexpr const char* formula = "y = k tanh(x):  dy/dx = k (1 - tanh(x)^2)";
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, double k) {
    Tensor t = tanh(x);
    ctx->save_for_backward({t});
    ctx->saved_data["k"] = k;
    return t * k;
  }
  static autograd::tensor_list backward(autograd::AutogradContext* ctx,
                                        autograd::tensor_list grad_outputs) {
    Tensor t = ctx->get_saved_variables()[0];
    const double k = ctx->saved_data["k"].toDouble();
    return {grad_outputs[0] * k * (1.0 - t * t), Tensor()};
  }
};

TEST(Consumer, GradcheckOfACustomFunction) {
  Tensor x = rand({3, 2}, TensorOptions().dtype(kFloat64).requires_grad(true));
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return ScaledTanh::apply(in[0], 1.5); },
                   {x});
  EXPECT_EQ(ScaledTanh::apply(x, 2.0).grad_fn()->name(), "ScaledTanhBackward");
}

// ember::testing, not testing:: (GoogleTest's) once `using namespace ember;` is in effect.
TEST(Consumer, AssertCloseReports) {
  try {
    ember::testing::assert_close(tensor({1.0, 2.5}), tensor({1.0, 2.0}));
    FAIL() << "assert_close did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Mismatched elements: 1 / 2 (50.0%)"), std::string::npos);
  }
}
