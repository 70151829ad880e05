// Custom Functions (core/autograd/function.h): a user's forward and backward, libtorch's
// spelling, in Ember's graph. Values against Ember's own ops (the same formula composed of
// primitives), gradcheck and gradgradcheck in float64, and every error with PyTorch's text.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/autograd/anomaly.h"
#include "core/autograd/engine.h"
#include "core/autograd/explore.h"
#include "core/autograd/function.h"
#include "core/graph/profiler.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/softmax.h"
#include "core/tensor/random.h"
#include "core/tensor/tensor.h"
#include "core/testing_gtest.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using autograd::AutogradContext;
using autograd::tensor_list;
using test::error_of;
using ::testing::HasSubstr;

Tensor f64(const Shape& shape) { return randn(shape, DType::Float64).requires_grad_(); }

// y = x^2, its backward in Ember ops (so it is differentiable again).
struct MySquare : autograd::Function<MySquare> {
  static constexpr const char* formula = "y = x^2:  dy/dx = 2x";
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * x;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    Tensor x = ctx->get_saved_variables()[0];
    return {grad_outputs[0] * 2.0 * x};
  }
};

TEST(CustomFunction, ValuesAndGradientsAreTheFormulas) {
  manual_seed(0);
  Tensor x = f64({2, 3});
  Tensor y = MySquare::apply(x);
  EXPECT_TENSOR_CLOSE(y, x.detach() * x.detach());
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->name(), "MySquareBackward");
  EXPECT_STREQ(y.grad_fn()->formula(), "y = x^2:  dy/dx = 2x");
  y.sum().backward();
  EXPECT_TENSOR_CLOSE(x.grad(), x.detach() * 2.0);
}

TEST(CustomFunction, GradcheckAndGradgradcheck) {
  manual_seed(1);
  Tensor x = f64({3, 4});
  auto fn = [](const std::vector<Tensor>& in) { return MySquare::apply(in[0]); };
  EXPECT_GRADCHECK(fn, {x});
  EXPECT_GRADGRADCHECK(fn, {x});
}

TEST(CustomFunction, UnrecordedUnderNoGradOrWithoutGradInputs) {
  Tensor x = tensor({1.0, 2.0});
  EXPECT_FALSE(MySquare::apply(x).requires_grad());
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  NoGradGuard no_grad;
  Tensor y = MySquare::apply(w);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_FALSE(y.grad_fn());
}

// Tensors and non-tensors as arguments; saved_data; needs_input_grad; one gradient per argument.
struct ScaledMul : autograd::Function<ScaledMul> {
  static Tensor forward(AutogradContext* ctx, const Tensor& a, const Tensor& b, double scale,
                        const std::string& note) {
    ctx->save_for_backward({a, b});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["note"] = note;
    ctx->saved_data["shape"] = a.shape();
    ctx->saved_data["needs"] = ctx->needs_input_grad(0) && !ctx->needs_input_grad(1);
    return a * b * scale;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const tensor_list saved = ctx->get_saved_variables();
    const double scale = ctx->saved_data["scale"].toDouble();
    EXPECT_EQ(ctx->saved_data["note"].toStringRef(), "hello");
    EXPECT_EQ(ctx->saved_data["shape"].toIntVector(), a_shape);
    needs_seen = ctx->saved_data["needs"].toBool();
    Tensor ga = ctx->needs_input_grad(0) ? grad_outputs[0] * saved[1] * scale : Tensor();
    Tensor gb = ctx->needs_input_grad(1) ? grad_outputs[0] * saved[0] * scale : Tensor();
    return {ga, gb, Tensor(), Tensor()};
  }
  static inline std::vector<int64_t> a_shape;
  static inline bool needs_seen = false;
};

TEST(CustomFunction, NonTensorArgumentsSavedDataAndNeedsInputGrad) {
  manual_seed(2);
  Tensor a = f64({2, 3});
  Tensor b = randn({2, 3}, DType::Float64);  // needs no gradient
  ScaledMul::a_shape = {2, 3};
  Tensor y = ScaledMul::apply(a, b, 0.5, std::string("hello"));
  y.sum().backward();
  EXPECT_TRUE(ScaledMul::needs_seen);
  EXPECT_TENSOR_CLOSE(a.grad(), b * 0.5);
  EXPECT_FALSE(b.grad().defined());
  Tensor b2 = f64({2, 3});
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        return ScaledMul::apply(in[0], in[1], 3.0, std::string("hello"));
      },
      {a, b2});
  EXPECT_GRADGRADCHECK(
      [](const std::vector<Tensor>& in) {
        return ScaledMul::apply(in[0], in[1], 3.0, std::string("hello"));
      },
      {a, b2});
}

// a * b, recording needs_input_grad in forward and in backward.
struct RecordingMul : autograd::Function<RecordingMul> {
  static Tensor forward(AutogradContext* ctx, const Tensor& a, const Tensor& b) {
    ctx->save_for_backward({a, b});
    at_forward = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    return a * b;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const tensor_list saved = ctx->get_saved_variables();
    at_backward = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    return {ctx->needs_input_grad(0) ? grad_outputs[0] * saved[1] : Tensor(),
            ctx->needs_input_grad(1) ? grad_outputs[0] * saved[0] : Tensor()};
  }
  static inline std::vector<bool> at_forward, at_backward;
};

TEST(CustomFunction, NeedsInputGradInBackwardIsWhatTheRunningPassNeedsAsLibtorch) {
  // libtorch's ctx->needs_input_grad(i) is grad_fn->task_should_compute_output(i): during
  // autograd::grad it is false for an input that does not lead to grad's inputs.
  using Needs = std::vector<bool>;
  manual_seed(3);
  Tensor x0 = f64({3}), x1 = f64({3});
  Tensor y = RecordingMul::apply(x0, x1).sum();
  EXPECT_EQ(RecordingMul::at_forward, (Needs{true, true}));
  y.backward({}, /*retain_graph=*/true);  // every leaf
  EXPECT_EQ(RecordingMul::at_backward, (Needs{true, true}));
  EXPECT_TENSOR_CLOSE(x0.grad(), x1);
  EXPECT_TENSOR_CLOSE(x1.grad(), x0);

  const tensor_list g0 = autograd::grad({y}, {x0}, {}, /*retain_graph=*/true);
  EXPECT_EQ(RecordingMul::at_backward, (Needs{true, false}));
  EXPECT_TENSOR_CLOSE(g0[0], x1);
  const tensor_list g1 = autograd::grad({y}, {x1}, {}, /*retain_graph=*/true);
  EXPECT_EQ(RecordingMul::at_backward, (Needs{false, true}));
  EXPECT_TENSOR_CLOSE(g1[0], x0);
  (void)autograd::grad({y}, {x1, x0});
  EXPECT_EQ(RecordingMul::at_backward, (Needs{true, true}));

  // An input that leads to x0 through other ops is needed; one that does not is not.
  Tensor z = f64({3});
  Tensor through = RecordingMul::apply(x0, x0 * 3).sum();
  (void)autograd::grad({through}, {x0});
  EXPECT_EQ(RecordingMul::at_backward, (Needs{true, true}));
  Tensor beside = RecordingMul::apply(x0, z * 3).sum();
  const tensor_list gb = autograd::grad({beside}, {x0});
  EXPECT_EQ(RecordingMul::at_backward, (Needs{true, false}));
  EXPECT_TENSOR_CLOSE(gb[0], z * 3);
}

TEST(CustomFunction, IValueNamesWhatItHolds) {
  autograd::IValue v(2.5);
  EXPECT_TRUE(v.isDouble());
  EXPECT_THAT(error_of([&] { (void)v.toInt(); }), HasSubstr("IValue: expected Int but got Double"));
  EXPECT_EQ(autograd::IValue(int64_t{3}).toInt(), 3);
  EXPECT_TRUE(autograd::IValue(tensor({1.0})).isTensor());
  EXPECT_TRUE(autograd::IValue().isNone());
}

// Several outputs: y1 = x^2, y2 = x^3.
struct SquareAndCube : autograd::Function<SquareAndCube> {
  static tensor_list forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return {x * x, x * x * x};
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    Tensor x = ctx->get_saved_variables()[0];
    return {g[0] * 2.0 * x + g[1] * 3.0 * x * x};
  }
};

TEST(CustomFunction, SeveralOutputs) {
  manual_seed(3);
  Tensor x = f64({4});
  tensor_list ys = SquareAndCube::apply(x);
  ASSERT_EQ(ys.size(), 2u);
  EXPECT_EQ(ys[0].grad_fn()->name(), "SquareAndCubeBackward");
  EXPECT_EQ(ys[1].grad_fn()->name(), "SquareAndCubeBackward");
  Tensor xd = x.detach();
  (ys[0].sum() + ys[1].sum() * 2.0).backward();
  EXPECT_TENSOR_CLOSE(x.grad(), xd * 2.0 + xd * xd * 6.0);
  // Only one output used: the other's gradient is materialized as zeros.
  x.set_grad(Tensor());
  SquareAndCube::apply(x)[1].sum().backward();
  EXPECT_TENSOR_CLOSE(x.grad(), xd * xd * 3.0);
  auto both = [](const std::vector<Tensor>& in) {
    tensor_list out = SquareAndCube::apply(in[0]);
    return out[0] * 0.5 + out[1];
  };
  EXPECT_GRADCHECK(both, {x});
  EXPECT_GRADGRADCHECK(both, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return SquareAndCube::apply(in[0])[0]; },
                   {x});
}

// A pass that an error aborts after one output of a Function delivered its gradient leaves
// nothing behind: the next pass sums its own gradients only. The throwing hook sits on either
// output in turn, so that in one of the two graphs the other output has delivered first.
TEST(CustomFunction, AnAbortedPassLeavesNoGradientForTheNext) {
  for (int throwing : {0, 1}) {
    Tensor x = ones({2}, DType::Float64).requires_grad_();
    tensor_list ys = SquareAndCube::apply(x);
    bool thrown = false;
    ys[throwing].register_hook([&thrown](const Tensor& g) {
      if (!thrown) {
        thrown = true;
        fail("the hook's error, once");
      }
      return g;
    });
    Tensor loss = (ys[0] + ys[1]).sum();
    EXPECT_THROW(loss.backward({}, /*retain_graph=*/true), Error);
    loss.backward({}, /*retain_graph=*/true);
    test::expect_values(x.grad(), {5, 5});  // 2x + 3x^2 at 1, once
  }
}

// set_materialize_grads(false): the unused output's gradient arrives undefined.
struct SeesUndefined : autograd::Function<SeesUndefined> {
  static tensor_list forward(AutogradContext* ctx, const Tensor& x) {
    ctx->set_materialize_grads(false);
    return {x * 2.0, x * 3.0};
  }
  static tensor_list backward(AutogradContext*, tensor_list g) {
    defined = {g[0].defined(), g[1].defined()};
    Tensor out;
    if (g[0].defined()) out = g[0] * 2.0;
    if (g[1].defined()) out = out.defined() ? out + g[1] * 3.0 : g[1] * 3.0;
    return {out};
  }
  static inline std::vector<bool> defined;
};

TEST(CustomFunction, MaterializeGradsOff) {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  SeesUndefined::apply(x)[1].sum().backward();
  EXPECT_EQ(SeesUndefined::defined, (std::vector<bool>{false, true}));
  test::expect_values(x.grad(), {3.0, 3.0});
}

// An output marked non-differentiable: no grad_fn, and zeros for it in backward.
struct WithMask : autograd::Function<WithMask> {
  static tensor_list forward(AutogradContext* ctx, const Tensor& x) {
    Tensor mask = gt(x, 0.0).to(DType::Float64);
    ctx->mark_non_differentiable({mask});
    ctx->save_for_backward({mask});
    return {x * mask, mask};
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    EXPECT_EQ(g[1].sum().item<double>(), 0.0);
    return {g[0] * ctx->get_saved_variables()[0]};
  }
};

TEST(CustomFunction, MarkNonDifferentiable) {
  Tensor x = tensor({-1.0, 2.0, 3.0}).requires_grad_();
  tensor_list out = WithMask::apply(x);
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[1].requires_grad());
  out[0].sum().backward();
  test::expect_values(x.grad(), {0.0, 1.0, 1.0});
}

// An in-place op: the input modified in place takes this node as its history.
struct AddOneInPlace : autograd::Function<AddOneInPlace> {
  static Tensor forward(AutogradContext* ctx, Tensor x) {
    x.add_(1.0);
    ctx->mark_dirty({x});
    return x;
  }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0]}; }
};

TEST(CustomFunction, MarkDirty) {
  Tensor a = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = a * 3.0;
  Tensor out = AddOneInPlace::apply(y);
  EXPECT_TRUE(out.is_same(y));
  EXPECT_EQ(y.grad_fn()->name(), "AddOneInPlaceBackward");
  test::expect_values(y, {4.0, 7.0});
  (y * y).sum().backward();
  test::expect_values(a.grad(), {24.0, 42.0});  // d(3a+1)^2/da = 6(3a+1)
  Tensor leaf = tensor({1.0}).requires_grad_();
  EXPECT_THAT(error_of([&] { AddOneInPlace::apply(leaf); }),
              HasSubstr("a leaf Variable that requires grad is being used in an in-place "
                        "operation."));
}

// An input returned as it is comes back as a view of it: an in-place write to the view, or to
// the input while the view is in use, would change values behind the custom backward. PyTorch
// forbids both ("Output 0 of PassthroughBackward is a view and is being modified inplace").
struct Passthrough : autograd::Function<Passthrough> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0] * 2.0}; }
};

TEST(CustomFunction, AnInputReturnedAsItIsIsAViewNoOneMayModifyInPlace) {
  Tensor w = tensor({1.0, 2.0}, DType::Float64).requires_grad_();
  Tensor y = Passthrough::apply(w);
  EXPECT_FALSE(y.is_same(w));
  EXPECT_THAT(error_of([&] { y.mul_(3.0); }),
              HasSubstr("mul_: in-place modification of a view of a tensor that requires grad"));
  test::expect_values(w, {1.0, 2.0});  // the leaf keeps its values

  Tensor a = w * 1.0;
  Tensor z = Passthrough::apply(a);
  a.mul_(3.0);  // z's history is now a's old one
  EXPECT_THAT(error_of([&] { (z * 1.0).sum().backward(); }),
              HasSubstr("mul: an input of shape [2] is a view taken before an in-place "
                        "operation that autograd recorded on its base"));
  EXPECT_FALSE(w.grad().defined());

  (Passthrough::apply(w) * 1.0).sum().backward();  // used as it is: through the custom backward
  test::expect_values(w.grad(), {2.0, 2.0});
}

// A tensor saved and then modified in place by forward itself (marked dirty) is saved as forward
// leaves it, as in libtorch, which saves when forward returns: no version error in backward.
struct DoubleInPlaceSaving : autograd::Function<DoubleInPlaceSaving> {
  static Tensor forward(AutogradContext* ctx, Tensor x) {
    ctx->save_for_backward({x});
    x.mul_(2.0);
    ctx->mark_dirty({x});
    return x;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    seen = ctx->get_saved_variables()[0].to_vector<double>();
    return {g[0] * 2.0};
  }
  static inline std::vector<double> seen;
};
// save_for_backward called in backward: libtorch ignores it; here it is an Error.
struct SavesInBackward : autograd::Function<SavesInBackward> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * x;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    Tensor x = ctx->get_saved_variables()[0];
    ctx->save_for_backward({x * 100.0});
    return {g[0] * 2.0 * x};
  }
};

TEST(CustomFunction, TensorsAreSavedWhenForwardReturns) {
  Tensor w = tensor({1.0, 2.0}, DType::Float64).requires_grad_();
  Tensor y = DoubleInPlaceSaving::apply(w * 1.0);
  y.sum().backward();
  EXPECT_EQ(DoubleInPlaceSaving::seen, (std::vector<double>{2.0, 4.0}));
  test::expect_values(w.grad(), {2.0, 2.0});
  // Modified after forward returned: the version error, as before.
  Tensor y2 = DoubleInPlaceSaving::apply(w * 1.0);
  y2.add_(1.0);
  EXPECT_THAT(error_of([&] { y2.sum().backward(); }),
              HasSubstr("which is output 0 of DoubleInPlaceSavingBackward, is at version "));

  Tensor l = SavesInBackward::apply(w).sum();
  EXPECT_THAT(error_of([&] { l.backward({}, /*retain_graph=*/true); }),
              HasSubstr("SavesInBackwardBackward: save_for_backward is called after forward "
                        "returned"));
}

// An output kept in saved_data (PyTorch's ctx.y = y) would hold the node that is its own grad_fn:
// the graph would never be freed. It is refused; save_for_backward keeps it without owning it.
struct KeepsOutputInSavedData : autograd::Function<KeepsOutputInSavedData> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    Tensor y = x.exp();
    ctx->saved_data["y"] = y;
    ctx->saved_data["x"] = x;  // an input: no cycle
    return y;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    return {g[0] * ctx->saved_data.at("y").toTensor()};
  }
};

TEST(CustomFunction, AnOutputKeptInSavedDataIsRefused) {
  Tensor x = tensor({0.5, 1.5}, DType::Float64).requires_grad_();
  EXPECT_THAT(error_of([&] { KeepsOutputInSavedData::apply(x); }),
              HasSubstr("KeepsOutputInSavedDataBackward: saved_data[\"y\"] is output 0 of the "
                        "Function, which would then own its own graph"));
  // Not recorded: no graph, no cycle.
  NoGradGuard no_grad;
  test::expect_values(KeepsOutputInSavedData::apply(x), {std::exp(0.5), std::exp(1.5)});
}

// The name a struct gives its node, and anomaly mode, the profiler and explore using it.
struct Attention : autograd::Function<Attention> {
  static std::string name() { return "MyAttentionBackward"; }
  static constexpr const char* formula = "A = softmax(s):  ds = A * (dA - sum(dA * A))";
  static Tensor forward(AutogradContext* ctx, const Tensor& s) {
    Tensor a = softmax(s, -1);
    ctx->save_for_backward({a});
    return a;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    Tensor a = ctx->get_saved_variables()[0];
    return {a * (g[0] - (g[0] * a).sum(-1, true))};
  }
};

TEST(CustomFunction, TheNodeHasTheUsersNameEverywhere) {
  manual_seed(4);
  Tensor s = f64({2, 3});
  Tensor a = Attention::apply(s);
  EXPECT_EQ(a.grad_fn()->name(), "MyAttentionBackward");
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return Attention::apply(in[0]); }, {s});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return Attention::apply(in[0]); }, {s});
  // explore: its name and formula.
  const auto data = nlohmann::json::parse(autograd::explore_data((a * a).sum()));
  bool found = false;
  for (const auto& n : data.at("nodes")) {
    if (n.at("name") == "MyAttentionBackward") {
      found = true;
      EXPECT_EQ(n.at("formula"), "A = softmax(s):  ds = A * (dA - sum(dA * A))");
    }
  }
  EXPECT_TRUE(found);
  // The profiler: the forward by the struct's name, the backward by the node's.
  std::vector<std::string> names;
  {
    autograd::profiler::Profile prof;
    Attention::apply(s).sum().backward();
    for (const auto& e : prof.events()) names.push_back(e.name);
  }
  EXPECT_THAT(names, ::testing::Contains("MyAttention"));
  EXPECT_THAT(names, ::testing::Contains("MyAttentionBackward"));
}

// A node name with DOT's special characters: to_dot quotes it (a quote and a backslash escaped,
// a newline as \n, '&' as an entity), so its text stays one DOT string.
struct Quoted : autograd::Function<Quoted> {
  static std::string name() { return "My\"Fn\\\nA&B"; }
  static Tensor forward(AutogradContext*, const Tensor& x) { return x * 2.0; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0] * 2.0}; }
};

TEST(CustomFunction, ToDotQuotesTheUsersName) {
  Tensor x = tensor({1.0}).requires_grad_();
  const std::string dot = autograd::to_dot(Quoted::apply(x).sum());
  EXPECT_THAT(dot, HasSubstr("[label=\"My\\\"Fn\\\\\\nA&amp;B\\nout [1]\"]"));
  EXPECT_THAT(dot, ::testing::Not(HasSubstr("My\"Fn")));
}

// A backward that throws.
struct Throws : autograd::Function<Throws> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x * 2.0; }
  static tensor_list backward(AutogradContext*, tensor_list) {
    throw std::runtime_error("my formula is not derived yet");
  }
};

TEST(CustomFunction, ABackwardThatThrowsIsAnErrorNamingTheFunction) {
  Tensor x = tensor({1.0}).requires_grad_();
  try {
    Throws::apply(x).sum().backward();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("ThrowsBackward: the backward of the custom Function threw: "
                                    "my formula is not derived yet"));
  }
  // Anomaly mode adds where the forward ran.
  autograd::DetectAnomalyGuard anomaly;
  Tensor y = Throws::apply(x);
  EXPECT_THAT(error_of([&] { y.sum().backward(); }),
              HasSubstr("(in the backward of ThrowsBackward"));
}

// A forward and a backward that throw what is not an ember::Error: a std::exception, an int, a
// string literal (a learner's `throw "not written yet"`).
struct ForwardOutOfRange : autograd::Function<ForwardOutOfRange> {
  static Tensor forward(AutogradContext*, const Tensor& x) {
    return x * static_cast<double>(std::vector<int>{}.at(3));
  }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0]}; }
};
struct BackwardThrowsAnInt : autograd::Function<BackwardThrowsAnInt> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x * 2.0; }
  static tensor_list backward(AutogradContext*, tensor_list) { throw 42; }
};
struct ForwardThrowsAString : autograd::Function<ForwardThrowsAString> {
  static Tensor forward(AutogradContext*, const Tensor&) { throw "not written yet"; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0]}; }
};

TEST(CustomFunction, AnyExceptionOfForwardOrBackwardIsAnErrorNamingTheFunction) {
  Tensor x = tensor({1.0}).requires_grad_();
  EXPECT_THAT(error_of([&] { ForwardOutOfRange::apply(x); }),
              HasSubstr("ForwardOutOfRange: the forward of the custom Function threw: vector"));
  EXPECT_EQ(error_of([&] { ForwardThrowsAString::apply(x); }),
            "ForwardThrowsAString: the forward of the custom Function threw an exception of type "
            "char const* (not a std::exception)");
  EXPECT_EQ(error_of([&] { BackwardThrowsAnInt::apply(x).sum().backward(); }),
            "BackwardThrowsAnIntBackward: the backward of the custom Function threw an exception "
            "of type int (not a std::exception)");
  // Grad mode is back on after the forward's exception.
  EXPECT_TRUE(GradMode::is_enabled());
  // The client's own exception stays inside the Error, of its own type.
  const auto nested_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      try {
        std::rethrow_if_nested(e);
      } catch (const std::out_of_range&) {
        return "out_of_range";
      } catch (int value) {
        return "int " + std::to_string(value);
      }
      return "nothing nested";
    }
    return "no Error";
  };
  EXPECT_EQ(nested_of([&] { ForwardOutOfRange::apply(x); }), "out_of_range");
  EXPECT_EQ(nested_of([&] { BackwardThrowsAnInt::apply(x).sum().backward(); }), "int 42");
}

// Anomaly mode names the forward of a custom Function by the struct's name, as the profiler.
struct NaNGrad : autograd::Function<NaNGrad> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x * 2.0; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0] * std::nan("")}; }
};
struct NaNGradOfTwo : autograd::Function<NaNGradOfTwo> {
  static tensor_list forward(AutogradContext*, const Tensor& x) { return {x * 2.0, x * 3.0}; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0] * std::nan("")}; }
};

TEST(CustomFunction, AnomalyModeNamesTheForwardAsTheStruct) {
  autograd::DetectAnomalyGuard anomaly;
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  const std::string one = error_of([&] { NaNGrad::apply(x).sum().backward(); });
  EXPECT_THAT(one, HasSubstr("Function 'NaNGradBackward' returned nan values in its 0th output "
                             "(the gradient for input 0 of NaNGrad, of shape [2])"));
  EXPECT_THAT(one, HasSubstr("forward: NaNGrad(inputs of shapes [2]) -> [2]"));
  const tensor_list two = NaNGradOfTwo::apply(x);
  EXPECT_THAT(error_of([&] { (two[0] + two[1]).sum().backward(); }),
              HasSubstr("forward: NaNGradOfTwo(inputs of shapes [2])"));
}

// A backward that runs backward through its own graph starts a pass inside a pass without end.
Tensor runaway_output;
struct RunsItsOwnGraph : autograd::Function<RunsItsOwnGraph> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x * 2.0; }
  static tensor_list backward(AutogradContext*, tensor_list g) {
    runaway_output.backward(Tensor(), true);
    return {g[0] * 2.0};
  }
};
// One that runs backward through another graph, inside it, is a legitimate nested pass.
struct RunsAnotherGraph : autograd::Function<RunsAnotherGraph> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * x;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_();
    const bool mode = GradMode::is_enabled();
    GradMode::set_enabled(true);
    (x * x).sum().backward();
    GradMode::set_enabled(mode);
    return {g[0] * x.grad()};
  }
};

TEST(CustomFunction, ABackwardRunningItsOwnGraphAgainIsAnErrorNotAStackOverflow) {
  Tensor x = tensor({1.0, 3.0}).requires_grad_();
  runaway_output = RunsItsOwnGraph::apply(x).sum();
  EXPECT_THAT(error_of([&] { runaway_output.backward(); }),
              HasSubstr("backward: 100 backward passes are running nested in each other on this "
                        "thread"));
  runaway_output = Tensor();
  // The count is back to zero: passes, nested or not, run again.
  RunsAnotherGraph::apply(x).sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2.0f, 6.0f}));
}

// Wrong number of gradients, a gradient for a non-tensor, a wrong shape.
struct TooMany : autograd::Function<TooMany> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x * 2.0; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0], g[0]}; }
};
struct GradForANumber : autograd::Function<GradForANumber> {
  static Tensor forward(AutogradContext*, const Tensor& x, double k) { return x * k; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0], g[0]}; }
};
struct WrongShape : autograd::Function<WrongShape> {
  static Tensor forward(AutogradContext*, const Tensor& w, const Tensor& x) { return x * w; }
  static tensor_list backward(AutogradContext*, tensor_list g) {
    return {g[0].sum(0), g[0].sum(0)};  // right for w [3], wrong for x [2, 3]
  }
};

TEST(CustomFunction, WrongGradientsAreErrorsWithPyTorchsText) {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  EXPECT_THAT(error_of([&] { TooMany::apply(x).sum().backward(); }),
              HasSubstr("function TooManyBackward returned an incorrect number of gradients "
                        "(expected 1, got 2)"));
  EXPECT_THAT(error_of([&] { GradForANumber::apply(x, 2.0).sum().backward(); }),
              HasSubstr("function GradForANumberBackward returned a gradient different that is "
                        "defined at position 2, but the corresponding forward input was not a "
                        "Variable"));
  Tensor w = tensor({1.0, 2.0, 3.0}).requires_grad_();
  Tensor x23 = ones({2, 3}, DType::Float64).requires_grad_();
  EXPECT_THAT(error_of([&] { WrongShape::apply(w, x23).sum().backward(); }),
              HasSubstr("Function WrongShapeBackward returned an invalid gradient at index 1 - "
                        "got [3] but expected shape compatible with [2, 3]"));
}

TEST(CustomFunction, ASavedTensorModifiedInPlaceIsEmbersVersionError) {
  // The custom node's error is the one Ember's own op (log, which saves its input) raises.
  Tensor a = tensor({1.0, 2.0}, DType::Float64).requires_grad_();
  Tensor x = a * 1.0;
  Tensor y = MySquare::apply(x);
  Tensor z = log(x);
  x.add_(1.0);
  const std::string custom = error_of([&] { y.sum().backward(); });
  std::string ember = error_of([&] { z.sum().backward(); });
  EXPECT_THAT(custom, HasSubstr("one of the variables needed for gradient computation has been "
                                "modified by an inplace operation: [float64 [2]], which is "
                                "output 0 of MySquareBackward, is at version "));
  ASSERT_NE(ember.find("LogBackward0"), std::string::npos) << ember;
  ember.replace(ember.find("LogBackward0"), 12, "MySquareBackward");
  EXPECT_EQ(custom, ember);
}

TEST(CustomFunction, BackwardTwiceNeedsRetainGraph) {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = MySquare::apply(x).sum();
  y.backward();
  EXPECT_THAT(error_of([&] { y.backward(); }),
              HasSubstr("trying to backward through the graph a second time"));
  Tensor z = MySquare::apply(x).sum();
  z.backward({}, /*retain_graph=*/true);
  EXPECT_EQ(error_of([&] { z.backward(); }), "");
}

// A backward written with raw loops declares it: differentiating it twice is PyTorch's error.
struct RawCube : autograd::Function<RawCube> {
  static constexpr bool once_differentiable = true;
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * x * x;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    const Tensor x = ctx->get_saved_variables()[0].contiguous();
    const Tensor go = g[0].contiguous();
    Tensor out = zeros(x.shape(), DType::Float64);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double v = x.data_ptr<double>()[i];
      out.data_ptr<double>()[i] = go.data_ptr<double>()[i] * 3.0 * v * v;
    }
    return {out};
  }
};
// The same loops without the declaration: Ember's safety net still raises.
struct UndeclaredRawCube : autograd::Function<UndeclaredRawCube> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) { return RawCube::forward(ctx, x); }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    return RawCube::backward(ctx, std::move(g));
  }
};

TEST(CustomFunction, OnceDifferentiableRaisesWhenDifferentiatedTwice) {
  manual_seed(5);
  Tensor x = f64({3});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return RawCube::apply(in[0]); }, {x});
  Tensor g = autograd::grad({RawCube::apply(x).sum()}, {x}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(g.requires_grad());
  EXPECT_THAT(error_of([&] { g.sum().backward(); }),
              HasSubstr("trying to differentiate twice a function that was marked with "
                        "@once_differentiable: RawCubeBackward"));
  Tensor x2 = f64({3});
  Tensor y = UndeclaredRawCube::apply(x2);
  Tensor g2 = autograd::grad({(y * y).sum()}, {x2}, {}, std::nullopt, true)[0];
  EXPECT_THAT(error_of([&] { g2.sum().backward(); }),
              HasSubstr("the derivative for 'undeclared_raw_cube' is not implemented: "
                        "UndeclaredRawCubeBackward"));
}

}  // namespace
}  // namespace ember
