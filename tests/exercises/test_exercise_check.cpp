// The exercises' checker (examples/exercises/) diagnoses planted wrong backwards: each is a
// custom Function with the exercise's own forward and a backward with one classic mistake, and
// the report must name the input, the worst element and the mistake.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "examples/exercises/exercises.h"

namespace exercises {
namespace {

using ember::NoGradGuard;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

// Softmax without the row-sum term: dx = y * dy.
struct SoftmaxNoRowSum : ember::autograd::Function<SoftmaxNoRowSum> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) { return Softmax::forward(ctx, x); }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    return {ctx->get_saved_variables()[0] * g[0]};
  }
};

// Attention's backward with a switch for each classic mistake.
template <bool kScale, bool kMasked>
struct PlantedAttention : ember::autograd::Function<PlantedAttention<kScale, kMasked>> {
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v) {
    return CausalAttention::forward(ctx, q, k, v);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    const tensor_list s = ctx->get_saved_variables();
    const double scale = ctx->saved_data["scale"].toDouble();
    // Without the mask: the softmax of the unmasked scores.
    const Tensor a =
        kMasked ? s[3] : ember::softmax(ember::matmul(s[0], s[1].transpose(-2, -1)) * scale, -1);
    const Tensor da = ember::matmul(g[0], s[2].transpose(-2, -1));
    Tensor ds = a * (da - (da * a).sum(-1, true));
    if (kScale) ds = ds * scale;
    return {ember::matmul(ds, s[1]), ember::matmul(ds.transpose(-2, -1), s[0]),
            ember::matmul(s[3].transpose(-2, -1), g[0])};
  }
};

// LayerNorm's dx without the mean path (dgamma and dbeta right).
struct LayerNormNoMeanPath : ember::autograd::Function<LayerNormNoMeanPath> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta) {
    return LayerNorm::forward(ctx, x, gamma, beta);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    const tensor_list s = ctx->get_saved_variables();
    const Tensor dxhat = g[0] * s[2];
    return {s[1] * (dxhat - s[0] * (dxhat * s[0]).mean(-1, true)), (g[0] * s[0]).sum(0),
            g[0].sum(0)};
  }
};

// Cross-entropy without the 1/N of the mean.
struct CrossEntropyNoMean : ember::autograd::Function<CrossEntropyNoMean> {
  static Tensor forward(AutogradContext* ctx, const Tensor& logits, const Tensor& targets) {
    return CrossEntropy::forward(ctx, logits, targets);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    const tensor_list s = ctx->get_saved_variables();
    const Tensor one_hot =
        ember::eq(ember::arange(s[0].size(1)).view({1, -1}), s[1].view({-1, 1})).to(s[0].dtype());
    return {(s[0] - one_hot) * g[0], Tensor()};
  }
};

// A gradient of the wrong shape.
struct SoftmaxWrongShape : ember::autograd::Function<SoftmaxWrongShape> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) { return Softmax::forward(ctx, x); }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0].sum(-1)}; }
};

// Nothing written.
struct SoftmaxUnwritten : ember::autograd::Function<SoftmaxUnwritten> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) { return Softmax::forward(ctx, x); }
  static tensor_list backward(AutogradContext*, tensor_list) { return {Tensor()}; }
};

// Right values, written into the saved output in place: the forward's output changes, and a
// second backward over the same graph finds its saved tensor modified.
struct SoftmaxIntoSavedOutput : ember::autograd::Function<SoftmaxIntoSavedOutput> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) { return Softmax::forward(ctx, x); }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    Tensor y = ctx->get_saved_variables()[0];
    const Tensor row_sum = (g[0] * y).sum(-1, true);
    return {y.mul_(g[0] - row_sum)};
  }
};

// Without the row-sum term, computed in the incoming gradient's own storage.
struct SoftmaxNoRowSumInPlace : ember::autograd::Function<SoftmaxNoRowSumInPlace> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) { return Softmax::forward(ctx, x); }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    Tensor dy = g[0];
    return {dy.mul_(ctx->get_saved_variables()[0])};
  }
};

// A learner's placeholders: a backward that throws a string, a forward that reads past a vector.
struct SoftmaxThrowsAString : ember::autograd::Function<SoftmaxThrowsAString> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) { return Softmax::forward(ctx, x); }
  static tensor_list backward(AutogradContext*, tensor_list) { throw "TODO: write me"; }
};
struct SoftmaxForwardOutOfRange : ember::autograd::Function<SoftmaxForwardOutOfRange> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    const std::vector<int64_t> dims;
    return Softmax::forward(ctx, x).sum(dims.at(0), true);
  }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0]}; }
};

template <typename Attention>
Candidates with_attention() {
  Candidates c;
  c.attention = [](const std::vector<Tensor>& in) { return Attention::apply(in[0], in[1], in[2]); };
  return c;
}

Outcome check_named(const Candidates& candidates, const std::string& name) {
  for (const Exercise& e : all_exercises(candidates)) {
    if (e.name == name) return check(e);
  }
  ADD_FAILURE() << "no exercise " << name;
  return {};
}

TEST(ExerciseCheck, SoftmaxWithoutTheRowSumTermIsNamed) {
  Candidates c;
  c.softmax = [](const std::vector<Tensor>& in) { return SoftmaxNoRowSum::apply(in[0]); };
  const Outcome o = check_named(c, "softmax");
  EXPECT_FALSE(o.passed);
  EXPECT_THAT(o.report, HasSubstr("input 0, x (the attention scores): wrong gradient"));
  EXPECT_THAT(o.report, MatchesRegex("(.|\n)*worst element \\[[0-5], [0-5]\\]: yours "
                                     "-?[0-9.e-]+, expected -?[0-9.e-]+\n(.|\n)*"));
  EXPECT_THAT(o.report, HasSubstr("hint: this is y * dy: the row-sum term is missing"));
}

TEST(ExerciseCheck, AttentionWithoutTheScaleIsNamedForQueriesAndKeys) {
  for (const char* name : {"attention", "multihead_attention"}) {
    const Outcome o = check_named(with_attention<PlantedAttention<false, true>>(), name);
    EXPECT_FALSE(o.passed);
    EXPECT_THAT(o.report, HasSubstr("input 0, q (queries): wrong gradient"));
    EXPECT_THAT(o.report, HasSubstr("input 1, k (keys): wrong gradient"));
    EXPECT_THAT(o.report, HasSubstr("input 2, v (values): right"));
    EXPECT_THAT(o.report, HasSubstr("hint: the 1/sqrt(d_k) is missing"));
  }
}

TEST(ExerciseCheck, AttentionIgnoringTheMaskIsNamed) {
  const Outcome o = check_named(with_attention<PlantedAttention<true, false>>(), "attention");
  EXPECT_FALSE(o.passed);
  EXPECT_THAT(o.report, HasSubstr("hint: the masked positions are getting gradient"));
}

TEST(ExerciseCheck, TheSameBackwardWithTheMaskAndScalePasses) {
  const Outcome o = check_named(with_attention<PlantedAttention<true, true>>(), "attention");
  EXPECT_TRUE(o.passed) << o.report;
  EXPECT_THAT(o.report, HasSubstr("gradcheck (float64, central differences): passed"));
}

TEST(ExerciseCheck, LayerNormWithoutTheMeanPathIsNamed) {
  Candidates c;
  c.layer_norm = [](const std::vector<Tensor>& in) {
    return LayerNormNoMeanPath::apply(in[0], in[1], in[2]);
  };
  const Outcome o = check_named(c, "layer_norm");
  EXPECT_FALSE(o.passed);
  EXPECT_THAT(o.report, HasSubstr("input 0, x: wrong gradient"));
  EXPECT_THAT(o.report, HasSubstr("hint: the mean path is missing"));
  EXPECT_THAT(o.report, HasSubstr("input 1, gamma (scale): right"));
}

TEST(ExerciseCheck, CrossEntropyWithoutTheMeanIsNamed) {
  Candidates c;
  c.cross_entropy = [](const std::vector<Tensor>& in) {
    return CrossEntropyNoMean::apply(in[0], in[1]);
  };
  const Outcome o = check_named(c, "cross_entropy");
  EXPECT_FALSE(o.passed);
  EXPECT_THAT(o.report, HasSubstr("hint: the 1/N of the mean is missing"));
}

TEST(ExerciseCheck, AWrongShapeAndAnUnwrittenBackwardAreReported) {
  Candidates c;
  c.softmax = [](const std::vector<Tensor>& in) { return SoftmaxWrongShape::apply(in[0]); };
  Outcome o = check_named(c, "softmax");
  EXPECT_FALSE(o.passed);
  EXPECT_THAT(o.report, HasSubstr("Function SoftmaxWrongShapeBackward returned an invalid "
                                  "gradient at index 0 - got [6] but expected shape compatible "
                                  "with [6, 6]"));
  c.softmax = [](const std::vector<Tensor>& in) { return SoftmaxUnwritten::apply(in[0]); };
  o = check_named(c, "softmax");
  EXPECT_FALSE(o.passed);
  EXPECT_THAT(o.report, HasSubstr("not written yet: backward returns no gradient (the TODO in "
                                  "examples/exercises/softmax.cpp)"));
  EXPECT_THAT(o.report, Not(HasSubstr("worst element")));
}

TEST(ExerciseCheck, AnExceptionOfAnyTypeIsReportedNotFatal) {
  Candidates c;
  c.softmax = [](const std::vector<Tensor>& in) { return SoftmaxThrowsAString::apply(in[0]); };
  Outcome o = check_named(c, "softmax");
  EXPECT_FALSE(o.passed);
  EXPECT_THAT(o.report,
              HasSubstr("your backward raised an error:\n    SoftmaxThrowsAStringBackward: "
                        "the backward of the custom Function threw an exception of "
                        "type char const* (not a std::exception)"));
  c.softmax = [](const std::vector<Tensor>& in) { return SoftmaxForwardOutOfRange::apply(in[0]); };
  o = check_named(c, "softmax");
  EXPECT_FALSE(o.passed);
  EXPECT_THAT(o.report,
              HasSubstr("SoftmaxForwardOutOfRange: the forward of the custom Function threw: "));
}

TEST(ExerciseCheck, ABackwardWritingInPlaceIsReportedNotFatal) {
  Candidates c;
  c.softmax = [](const std::vector<Tensor>& in) { return SoftmaxIntoSavedOutput::apply(in[0]); };
  Outcome o = check_named(c, "softmax");
  EXPECT_FALSE(o.passed);
  EXPECT_THAT(o.report, HasSubstr("one of the variables needed for gradient computation has been "
                                  "modified by an inplace operation"));
  // The mistake is named although the backward wrote into the upstream gradient it was given.
  c.softmax = [](const std::vector<Tensor>& in) { return SoftmaxNoRowSumInPlace::apply(in[0]); };
  o = check_named(c, "softmax");
  EXPECT_FALSE(o.passed);
  EXPECT_THAT(o.report, HasSubstr("hint: this is y * dy: the row-sum term is missing"));
}

}  // namespace
}  // namespace exercises
