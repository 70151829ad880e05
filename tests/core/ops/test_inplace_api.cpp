// In-place arithmetic with libtorch's signatures and Tensor::var/std: values and
// gradients from PyTorch 1.13 (tests/fixtures/adversarial.txt), gradcheck of every new op, and
// the autograd rules of in-place ops (version counter, leaves, history).
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/ember.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

// PyTorch's tensors for these tests (scripts/fixtures/gen_adversarial.py).
const test::Fixture& adv() { return test::fixture_file("adversarial.txt"); }

using test::error_of;
using test::expect_error;
using Inputs = std::vector<Tensor>;

// The in-place calls of gen_adversarial.py, one per case: y is a non-leaf copy of x.
using InPlace = std::function<void(Tensor& y, const Tensor& a, const Tensor& b, const Tensor& w,
                                   const Tensor& row)>;
const std::map<std::string, InPlace>& cases() {
  static const std::map<std::string, InPlace> all = {
      {"add_alpha", [](Tensor& y, auto& a, auto&, auto&, auto&) { y.add_(a, 0.37); }},
      {"add_row_alpha", [](Tensor& y, auto&, auto&, auto&, auto& r) { y.add_(r, -2.5); }},
      {"add_scalar", [](Tensor& y, auto&, auto&, auto&, auto&) { y.add_(0.1); }},
      {"sub_alpha", [](Tensor& y, auto& a, auto&, auto&, auto&) { y.sub_(a, 0.37); }},
      {"sub_scalar", [](Tensor& y, auto&, auto&, auto&, auto&) { y.sub_(0.3); }},
      {"mul", [](Tensor& y, auto& a, auto&, auto&, auto&) { y.mul_(a); }},
      {"mul_scalar", [](Tensor& y, auto&, auto&, auto&, auto&) { y.mul_(0.7); }},
      {"div", [](Tensor& y, auto&, auto& b, auto&, auto&) { y.div_(b); }},
      {"div_scalar", [](Tensor& y, auto&, auto&, auto&, auto&) { y.div_(3.0); }},
      {"addcmul", [](Tensor& y, auto& a, auto& b, auto&, auto&) { y.addcmul_(a, b, -0.3); }},
      {"addcmul_1", [](Tensor& y, auto& a, auto& b, auto&, auto&) { y.addcmul_(a, b); }},
      {"addcdiv", [](Tensor& y, auto& a, auto& b, auto&, auto&) { y.addcdiv_(a, b, 0.7); }},
      {"addcdiv_1", [](Tensor& y, auto& a, auto& b, auto&, auto&) { y.addcdiv_(a, b); }},
      {"lerp_03", [](Tensor& y, auto& a, auto&, auto&, auto&) { y.lerp_(a, 0.3); }},
      {"lerp_07", [](Tensor& y, auto& a, auto&, auto&, auto&) { y.lerp_(a, 0.7); }},
      {"lerp_tensor", [](Tensor& y, auto& a, auto&, auto& w, auto&) { y.lerp_(a, w); }},
      {"clamp", [](Tensor& y, auto&, auto&, auto&, auto&) { y.clamp_(-0.5, 0.6); }},
      {"clamp_min", [](Tensor& y, auto&, auto&, auto&, auto&) { y.clamp_(0.1); }},
      {"clamp_max", [](Tensor& y, auto&, auto&, auto&, auto&) { y.clamp_(None, -0.2); }},
      {"sqrt", [](Tensor& y, auto&, auto&, auto&, auto&) { y = y.abs(), y.sqrt_(); }},
  };
  return all;
}

void run_case(const std::string& tag, const std::string& name, const InPlace& op) {
  SCOPED_TRACE(tag + "/" + name);
  const std::string in = "inplace_" + tag + "/in/";
  std::vector<Tensor> xs;
  for (const char* n : {"x", "a", "b", "w", "row"})
    xs.push_back(adv().tensor(in + n).requires_grad_());
  Tensor y = xs[0] * 1;  // a non-leaf, so the in-place op is recorded
  op(y, xs[1], xs[2], xs[3], xs[4]);
  const std::string out = "inplace_" + tag + "/" + name + "/";
  adv().expect_exact(y, out + "out");
  Tensor weights = arange(0, 12, 1, xs[0].dtype()).reshape({3, 4}) * (2.0 / 11) - 1.0;
  (y * weights).sum().backward();  // torch.linspace(-1, 1, 12) (to the last bit or so)
  const char* names[] = {"x", "a", "b", "w", "row"};
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const std::string key = out + "grad_" + names[k];
    if (adv().has(key)) {
      // Gradients go through more roundings than the forward: compared to 2 ulp-ish.
      adv().expect_near(xs[k].grad(), key, tag == "f32" ? 1e-6 : 1e-14, 1e-7);
    } else {
      EXPECT_FALSE(xs[k].grad().defined()) << key << " should get no gradient";
    }
  }
}

TEST(InPlaceApi, ValuesAndGradientsMatchPyTorchFloat32) {
  for (const auto& [name, op] : cases()) run_case("f32", name, op);
}

TEST(InPlaceApi, ValuesAndGradientsMatchPyTorchFloat64) {
  for (const auto& [name, op] : cases()) run_case("f64", name, op);
}

TEST(InPlaceApi, VarAndStdValuesAndGradientsMatchPyTorch) {
  const std::map<std::string, std::function<Tensor(const Tensor&)>> ops = {
      {"var_dim1", [](const Tensor& t) { return var(t, 1); }},
      {"var_dims02_biased_keep",
       [](const Tensor& t) {
         return var(t, {0, 2}, false, true);
       }},
      {"var_all_biased", [](const Tensor& t) { return var(t, false); }},
      {"var_correction2", [](const Tensor& t) { return var(t, {1}, Correction(2)); }},
      {"std_all", [](const Tensor& t) { return std(t); }},
      {"std_dim1", [](const Tensor& t) { return t.std(1); }},
      {"std_dim_neg1_keep", [](const Tensor& t) { return t.std(-1, true, true); }},
      {"std_dims02_biased",
       [](const Tensor& t) {
         return std(t, {0, 2}, false);
       }},
  };
  for (const auto& [name, fn] : ops) {
    SCOPED_TRACE(name);
    Tensor x = adv().tensor("var/in/x").requires_grad_();
    Tensor y = fn(x);
    adv().expect_exact(y, "var/" + name + "/out");
    const auto n = static_cast<double>(y.numel());
    Tensor g = n == 1
                   ? full(y.shape(), -1.0)
                   : (arange(0, n, 1, DType::Float32) * (3.0 / (n - 1)) - 1.0).reshape(y.shape());
    y.backward(g);
    adv().expect_near(x.grad(), "var/" + name + "/grad", 1e-5, 1e-7);
  }
}

TEST(InPlaceApi, GradcheckOfTheNewOps) {
  auto p = [](const Shape& s, int seed) { return test::pattern(s, seed).requires_grad_(); };
  auto positive = [](const Shape& s, int seed) {
    return (test::pattern(s, seed).abs() + 0.5).detach().requires_grad_();
  };
  struct Case {
    std::string name;
    Inputs inputs;
    std::function<Tensor(const Inputs&)> fn;
  };
  const std::vector<Case> all = {
      {"add_alpha",
       {p({3, 4}, 1), p({4}, 2)},
       [](const Inputs& x) { return add(x[0], x[1], 0.37); }},
      {"sub_alpha",
       {p({3, 4}, 1), p({3, 1}, 2)},
       [](const Inputs& x) { return sub(x[0], x[1], -2); }},
      {"addcmul",
       {p({3, 4}, 1), p({3, 4}, 2), p({4}, 3)},
       [](const Inputs& x) { return addcmul(x[0], x[1], x[2], -0.3); }},
      {"addcdiv",
       {p({3, 4}, 1), p({3, 4}, 2), positive({3, 4}, 3)},
       [](const Inputs& x) { return addcdiv(x[0], x[1], x[2], 0.7); }},
      {"lerp_scalar_low",
       {p({3, 4}, 1), p({3, 4}, 2)},
       [](const Inputs& x) { return lerp(x[0], x[1], 0.3); }},
      {"lerp_scalar_high",
       {p({3, 4}, 1), p({3, 4}, 2)},
       [](const Inputs& x) { return lerp(x[0], x[1], 0.8); }},
      {"lerp_tensor",
       {p({3, 4}, 1), p({3, 4}, 2), p({3, 4}, 3)},
       [](const Inputs& x) { return lerp(x[0], x[1], x[2]); }},
      // Bounds between the pattern's values (multiples of 1/8), away from the kinks.
      {"clamp", {p({3, 4}, 1)}, [](const Inputs& x) { return clamp(x[0], -0.3, 0.45); }},
      {"clamp_min", {p({3, 4}, 1)}, [](const Inputs& x) { return x[0].clamp(0.06); }},
      {"std_dim", {p({3, 4}, 1)}, [](const Inputs& x) { return std(x[0], 1); }},
      {"std_all", {p({3, 4}, 1)}, [](const Inputs& x) { return std(x[0]); }},
      {"std_keep_biased",
       {p({2, 3, 4}, 1)},
       [](const Inputs& x) {
         return std(x[0], {0, 2}, false, true);
       }},
      {"in_place_chain",
       {p({3, 4}, 1), p({3, 4}, 2), positive({3, 4}, 3)},
       [](const Inputs& x) {
         Tensor y = x[0] * 1.0;
         y.addcmul_(x[1], x[2], 0.5).addcdiv_(x[1], x[2]).lerp_(x[1], 0.25).mul_(x[2]);
         y.sub_(x[1], 3).div_(x[2]).clamp_(-2.0, 2.0);
         return y;
       }},
      {"sqrt_",
       {positive({3, 4}, 1)},
       [](const Inputs& x) {
         Tensor y = x[0] * 1.0;
         return y.sqrt_();
       }},
  };
  for (const Case& c : all) {
    SCOPED_TRACE(c.name);
    autograd::GradcheckResult r = autograd::gradcheck(c.fn, c.inputs);
    EXPECT_TRUE(r.ok) << r.report;
  }
}

TEST(InPlaceApi, AutogradRulesOfInPlaceOps) {
  // A leaf that requires grad: refused, as PyTorch.
  Tensor leaf = ones({3}).requires_grad_();
  for (auto& op : std::vector<std::function<void()>>{
           [&] { leaf.add_(1.0); }, [&] { leaf.sub_(ones({3})); }, [&] { leaf.div_(2.0); },
           [&] { leaf.addcmul_(ones({3}), ones({3})); }, [&] { leaf.lerp_(ones({3}), 0.5); },
           [&] { leaf.clamp_(0.0, 1.0); }, [&] { leaf.sqrt_(); }}) {
    expect_error(op, "a leaf Variable that requires grad is being used in an in-place operation");
  }
  // Under NoGradGuard (an optimizer step) it is fine, and bumps the version.
  {
    NoGradGuard no_grad;
    const int64_t v = leaf.version();
    leaf.add_(ones({3}), -0.5).mul_(4).addcdiv_(ones({3}), full({3}, 2.0), -2).sqrt_();
    EXPECT_GT(leaf.version(), v);
    EXPECT_FALSE(leaf.grad_fn());
  }
  EXPECT_EQ(leaf.to_vector<double>(), (std::vector<double>{1.0, 1.0, 1.0}));
  // A saved tensor modified in place: backward says so.
  Tensor x = full({3}, 4.0).requires_grad_();
  Tensor y = x * 1.0;
  Tensor z = y.sqrt();  // saves its output...
  z.mul_(2.0);          // ...which is changed here
  expect_error([&] { z.sum().backward(); }, "modified by an inplace operation");
  // The history is rebased: grad_fn names as PyTorch's (composites end in their last op).
  Tensor a = ones({2}).requires_grad_();
  Tensor b = a * 1.0;
  b.add_(ones({2}), 2);
  EXPECT_EQ(test::grad_fn_name(b), "AddBackward0");
  b.sub_(ones({2}));
  EXPECT_EQ(test::grad_fn_name(b), "SubBackward0");
  b.clamp_(0.0);
  EXPECT_EQ(test::grad_fn_name(b), "ClampBackward1");
  b.div_(full({2}, 4.0));
  EXPECT_EQ(test::grad_fn_name(b), "DivBackward0");
  b.sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0.25, 0.25}));
}

// A view taken before an in-place op that autograd records on its base still carries the
// base's old history: PyTorch regenerates it, Ember refuses it with an Error (never a silently
// wrong gradient). A view taken after the op, or a detached alias, is fine.
TEST(InPlaceApi, ViewsOlderThanTheirBasesHistoryAreRefused) {
  const std::string stale = "is a view taken before an in-place operation that autograd recorded";
  Tensor x = from_vector({1.0, 2.0, 3.0}, {3}).requires_grad_();
  {
    Tensor y = x * 1.0;
    Tensor v = y.slice(0, 0, 2);
    y.mul_(2.0);
    expect_error([&] { (v * v).sum(); }, "mul: an input of shape [2] " + stale);
    Tensor w = y.slice(0, 0, 2);  // taken again: the new history
    (w * w).sum().backward();
    EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{8, 16, 0}));  // PyTorch's
  }
  {
    Tensor y = x * 1.0;
    Tensor v = y.view({3});
    Tensor vv = v.slice(0, 1, 3);  // a view of the (still current) view
    y.add_(x);
    expect_error([&] { v.sum(); }, stale);
    expect_error([&] { vv.sum(); }, stale);
    {
      NoGradGuard no_grad;  // without a graph the values are all that counts
      EXPECT_EQ(v.sum().item<double>(), 12.0);
      EXPECT_EQ(vv.slice(0, 0, 1).sum().item<double>(), 4.0);  // a view of it: stale too
    }
    expect_error([&] { vv.slice(0, 0, 1).sum(); }, stale);
    Tensor d = y.detach();  // an alias outside the graph: not a view of its history
    EXPECT_EQ(d.sum().item<double>(), 12.0);
  }
  {
    // A base that did not require grad until the in-place op: its earlier view would be a
    // constant where PyTorch differentiates through it.
    Tensor base = zeros({3});
    Tensor v = base.slice(0, 0, 2);
    base.add_(x);
    expect_error([&] { (v * v).sum(); }, stale);
  }
  {
    // A view modified in place without a graph, then its base: no history changes hands.
    Tensor base = zeros({3});
    Tensor v = base.slice(0, 0, 2);
    base.add_(1.0);
    EXPECT_EQ((v * x.slice(0, 0, 2)).sum().item<double>(), 3.0);
  }
}

// PyTorch's rule: a view made under NoGradGuard of a tensor that requires grad cannot be
// modified in place with grad mode on (it would change the base behind autograd's back).
TEST(InPlaceApi, ANoGradViewIsNotWrittenWithGradModeOn) {
  Tensor x = ones({2}).requires_grad_();
  Tensor v;
  {
    NoGradGuard no_grad;
    v = x.slice(0, 0, 1);
  }
  expect_error([&] { v.add_(1.0); },
               "add_: a view was created in no_grad mode and is being modified inplace with "
               "grad mode enabled");
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{1, 1}));
  {
    NoGradGuard no_grad;  // both inside the block: fine
    v.add_(1.0);
  }
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{2, 1}));
}

TEST(InPlaceApi, UndefinedAndMismatchedArguments) {
  Tensor t = zeros({2, 3});
  expect_error([&] { t.add_(Tensor()); }, "add_: expected a defined tensor, got an undefined one");
  expect_error([&] { Tensor().mul_(2.0); }, "mul_: expected a defined tensor");
  expect_error([&] { t.add_(ones({3, 2})); }, "add");
  expect_error(
      [&] {
        t.mul_(ones({2, 1, 3}));
      },
      "mul_: result of shape [2, 2, 3] does not fit the in-place destination of shape [2, 3]");
  expect_error(
      [&] {
        t.lerp_(ones({2, 3}, DType::Float64), 0.5);
      },
      "lerp: expected dtype float32 for `end` but got dtype float64");
  expect_error([&] { t.clamp_(None, None); }, "clamp: at least one of 'min' or 'max'");
  // A destination broadcast against a bigger input is refused (its shape would change).
  Tensor row = zeros({3});
  expect_error([&] { row.add_(ones({2, 3})); }, "does not fit the in-place destination");
  EXPECT_EQ(row.to_vector<double>(), (std::vector<double>{0, 0, 0}));
}

}  // namespace
}  // namespace ember
