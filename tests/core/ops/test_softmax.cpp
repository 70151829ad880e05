// softmax and log_softmax: values against PyTorch 1.13, numerical stability, -inf rows,
// gradients and errors. The Python line that printed each expected number is in a comment.
#include "core/ops/softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/graph/node.h"
#include "core/kernels/reduce_kernels.h"
#include "core/ops/elementwise.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

using test::expect_error;
using test::expect_values;
using test::grad_fn_name;
using test::sample_3x4;

// g = torch.tensor([[1., 0., -1., 2.], [0.5, 0.5, 3., -1.], [2., 1., 0., 0.]])
Tensor upstream_3x4() { return tensor({{1, 0, -1, 2}, {0.5, 0.5, 3, -1}, {2, 1, 0, 0}}); }

// The book's chapter 3 attention scores, float32:
// inputs = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
//                        [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])
// (inputs @ inputs.T).tolist()
Tensor book_attention_scores() {
  return tensor({{0.9994999170303345, 0.9544000625610352, 0.9422000050544739, 0.47530001401901245,
                  0.4575999975204468, 0.6310000419616699},
                 {0.9544000625610352, 1.4950001239776611, 1.4754000902175903, 0.8434000015258789,
                  0.7070000171661377, 1.0865000486373901},
                 {0.9422000050544739, 1.4754000902175903, 1.4570000171661377, 0.8295999765396118,
                  0.715399980545044, 1.0605000257492065},
                 {0.47530001401901245, 0.8434000015258789, 0.8295999765396118, 0.49369996786117554,
                  0.3473999798297882, 0.656499981880188},
                 {0.4575999975204468, 0.7070000171661377, 0.715399980545044, 0.3473999798297882,
                  0.665399968624115, 0.29350000619888306},
                 {0.6310000419616699, 1.0865000486373901, 1.0605000257492065, 0.656499981880188,
                  0.29350000619888306, 0.9450000524520874}});
}

// ---- forward ----

TEST(SoftmaxForward, BookAttentionWeightsMatchPyTorch) {
  // torch.softmax(inputs @ inputs.T, dim=-1).tolist()
  Tensor weights = softmax(book_attention_scores(), -1);
  EXPECT_EQ(weights.shape(), (Shape{6, 6}));
  EXPECT_EQ(weights.dtype(), DType::Float32);
  expect_values(
      weights, {0.2098347246646881,  0.20058144629001617, 0.1981492042541504,  0.12422820925712585,
                0.12204872071743011, 0.14515763521194458, 0.13854756951332092, 0.2378913015127182,
                0.23327402770519257, 0.12399158626794815, 0.10818186402320862, 0.15811361372470856,
                0.1390075981616974,  0.23692145943641663, 0.23260195553302765, 0.12420440465211868,
                0.11080020666122437, 0.15646442770957947, 0.14352688193321228, 0.20739442110061646,
                0.20455202460289001, 0.14619222283363342, 0.12629525363445282, 0.172039195895195,
                0.15261085331439972, 0.19583867490291595, 0.1974906474351883,  0.13668668270111084,
                0.18785890936851501, 0.12951429188251495, 0.13847117125988007, 0.2183637171983719,
                0.21275943517684937, 0.14204756915569305, 0.09880637377500534, 0.18955175578594208},
      2e-7);
  // print(torch.softmax(inputs @ inputs.T, dim=-1))
  EXPECT_EQ(repr(weights),
            "tensor([[0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],\n"
            "        [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],\n"
            "        [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],\n"
            "        [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],\n"
            "        [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],\n"
            "        [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896]])");
  // Every row sums to 1.
  std::vector<double> w = weights.to_vector<double>();
  for (int r = 0; r < 6; ++r) {
    double total = 0;
    for (int c = 0; c < 6; ++c) total += w[r * 6 + c];
    EXPECT_NEAR(total, 1.0, 1e-6);
  }
}

TEST(SoftmaxForward, LastDimAndOtherDims) {
  Tensor a = sample_3x4();
  // torch.softmax(a, 1).tolist()
  expect_values(softmax(a, 1), {0.08517910540103912, 0.019006026908755302, 0.768742561340332,
                                0.1270722895860672, 0.17438407242298126, 0.08659657090902328,
                                0.03185709938406944, 0.7071622610092163, 0.018079325556755066,
                                0.32857629656791687, 0.16316616535186768, 0.4901782274246216});
  // torch.softmax(a, 0).tolist()
  const std::vector<double> by_column = {
      0.3006795644760132,   0.07082553952932358, 0.8731275796890259,   0.11271712929010391,
      0.6691746711730957,   0.35080114006996155, 0.039333704859018326, 0.6818988919258118,
      0.030145788565278053, 0.5783733129501343,  0.08753876388072968,  0.20538397133350372};
  expect_values(softmax(a, 0), by_column);
  expect_values(softmax(a, -2), by_column);
  // A transposed (non-contiguous) input: softmax over its rows is softmax over a's columns.
  Tensor transposed = softmax(a.t(), 1);
  EXPECT_EQ(transposed.shape(), (Shape{4, 3}));
  EXPECT_TRUE(transposed.is_contiguous());
  expect_values(transposed.t(), by_column);
}

TEST(SoftmaxForward, MiddleDimOfA3dTensor) {
  // x = torch.arange(24.).reshape(2, 3, 4) / 10; torch.softmax(x, 1).tolist()
  Tensor x = arange(0, 24, 1, DType::Float32).reshape({2, 3, 4}) / 10.0;
  Tensor y = softmax(x, 1);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  expect_values(
      y, {0.21198272705078125, 0.21198274195194244, 0.21198272705078125, 0.21198272705078125,
          0.316241055727005,   0.316241055727005,   0.316241055727005,   0.316241055727005,
          0.47177624702453613, 0.47177624702453613, 0.47177624702453613, 0.47177624702453613,
          0.21198274195194244, 0.21198271214962006, 0.21198271214962006, 0.21198274195194244,
          0.316241055727005,   0.3162410855293274,  0.3162410259246826,  0.316241055727005,
          0.47177624702453613, 0.47177618741989136, 0.47177624702453613, 0.47177624702453613},
      2e-7);
}

TEST(SoftmaxForward, LogSoftmaxValues) {
  Tensor a = sample_3x4();
  // torch.log_softmax(a, 1).tolist()
  expect_values(log_softmax(a, 1),
                {-2.462999105453491, -3.962999105453491, -0.26299914717674255, -2.0629990100860596,
                 -1.746495008468628, -2.4464950561523438, -3.4464950561523438, -0.3464950919151306,
                 -4.012986183166504, -1.1129862070083618, -1.812986135482788, -0.7129862308502197});
  // torch.log_softmax(a, 0).tolist()
  expect_values(log_softmax(a, 0), {-1.2017101049423218, -2.647535562515259, -0.1356736123561859,
                                    -2.1828739643096924, -0.4017101228237152, -1.0475356578826904,
                                    -3.235673427581787, -0.38287392258644104, -3.5017099380493164,
                                    -0.5475357174873352, -2.435673475265503, -1.5828739404678345});
}

TEST(SoftmaxForward, LargeValuesDoNotOverflow) {
  // torch.softmax(torch.tensor([1000., 1001.]), 0).tolist() -> [0.2689414322376251,
  // 0.7310585975646973]
  expect_values(softmax(tensor({1000, 1001}), 0), {0.2689414322376251, 0.7310585975646973}, 1e-7);
  // torch.log_softmax(torch.tensor([1000., 1001.]), 0).tolist()
  expect_values(log_softmax(tensor({1000, 1001}), 0), {-1.31326162815094, -0.31326165795326233},
                1e-7);
  expect_values(softmax(tensor({{1000, 1001}, {-1000, -1001}}), 1),
                {0.2689414322376251, 0.7310585975646973, 0.7310585975646973, 0.2689414322376251},
                1e-7);
  expect_values(softmax(tensor({1e30, 1e30}).to(DType::Float64), 0), {0.5, 0.5}, 0);
}

TEST(SoftmaxForward, MinusInfinity) {
  // torch.softmax(torch.tensor([[-inf, -inf], [0., -inf]]), 1) -> [[nan, nan], [1., 0.]]
  Tensor masked = tensor({{-kInf, -kInf}, {0.0, -kInf}});
  Tensor y = softmax(masked, 1);
  expect_values(y, {NAN, NAN, 1.0, 0.0}, 0);
  EXPECT_FALSE(std::signbit(y.at({1, 1})));
  // torch.log_softmax(...) -> [[nan, nan], [0., -inf]]
  expect_values(log_softmax(masked, 1), {NAN, NAN, 0.0, -kInf}, 0);
  // The causal-mask case: -inf in the middle of a row.
  // torch.softmax(torch.tensor([[0., -inf, 1.]]), 1).tolist() -> [[0.2689, 0.0, 0.7311]]
  expect_values(softmax(tensor({{0.0, -kInf, 1.0}}), 1),
                {0.2689414322376251, 0.0, 0.7310585975646973}, 1e-7);
  expect_values(log_softmax(tensor({{0.0, -kInf, 1.0}}), 1),
                {-1.31326162815094, -kInf, -0.31326165795326233}, 1e-7);
  // Along dim 0 (the strided kernel path) the same rules hold.
  expect_values(softmax(masked, 0), {0.0, NAN, 1.0, NAN}, 0);
}

TEST(SoftmaxForward, ZeroDimEmptyAndFloat64) {
  // torch.tensor(3.).softmax(0) -> tensor(1.); torch.tensor(3.).log_softmax(0) -> tensor(0.)
  EXPECT_EQ(softmax(scalar_tensor(3.0), 0).item(), 1.0);
  EXPECT_EQ(log_softmax(scalar_tensor(3.0), -1).item(), 0.0);
  EXPECT_EQ(softmax(zeros({0, 3}), 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(softmax(zeros({2, 0}), 1).shape(), (Shape{2, 0}));
  EXPECT_EQ(log_softmax(zeros({2, 0}), 0).shape(), (Shape{2, 0}));
  Tensor y = softmax(tensor({1, 2, 3}, DType::Float64), 0);
  EXPECT_EQ(y.dtype(), DType::Float64);
  const double total = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  expect_values(y, {std::exp(1.0) / total, std::exp(2.0) / total, std::exp(3.0) / total}, 1e-15);
}

TEST(SoftmaxForward, TensorMethod) {
  Tensor a = sample_3x4();
  EXPECT_TRUE(equal(a.softmax(-1), softmax(a, 1)));
}

TEST(SoftmaxForward, KernelAloneOnARawBuffer) {
  // Two rows of three, softmax along the rows (inner == 1) and along the columns (inner == 3).
  const std::vector<float> in = {0, 1, 2, 2, 1, 0};
  std::vector<float> out(6);
  kernels::softmax(in.data(), out.data(), kernels::ReduceShape{2, 3, 1}, /*log=*/false);
  const float e0 = 1.0f, e1 = std::exp(1.0f), e2 = std::exp(2.0f), total = e0 + e1 + e2;
  EXPECT_NEAR(out[0], e0 / total, 1e-7);
  EXPECT_NEAR(out[2], e2 / total, 1e-7);
  EXPECT_NEAR(out[3], e2 / total, 1e-7);
  kernels::softmax(in.data(), out.data(), kernels::ReduceShape{1, 2, 3}, /*log=*/true);
  EXPECT_NEAR(out[1], 0.0f - std::log(2.0f), 1e-7);  // column 1 holds [1, 1]
  EXPECT_NEAR(out[0], 0.0f - (2.0f + std::log(1.0f + std::exp(-2.0f))), 1e-6);
}

// Along a dim that is not the last (inner > 1: rows with a stride), the kernel runs exp through
// the vectorised exp_row: the same bits as the scalar steps max, std::exp(x - max), a running
// sum in float, then * (1 / sum) or (x - max) - log(sum), -inf and a row of -inf included.
TEST(SoftmaxForward, StridedRowsHaveTheBitsOfTheScalarSteps) {
  const int64_t outer = 3, n = 37, inner = 21;  // inner: more than one vector, with a tail
  std::vector<float> in(static_cast<std::size_t>(outer * n * inner));
  for (std::size_t k = 0; k < in.size(); ++k) {
    in[k] = static_cast<float>(std::sin(0.37 * static_cast<double>(k)) * 9.0);
  }
  in[5] = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j)
    in[static_cast<std::size_t>(j * inner + 7)] = in[5];  // a -inf row
  for (bool log : {false, true}) {
    std::vector<float> out(in.size());
    kernels::softmax(in.data(), out.data(), kernels::ReduceShape{outer, n, inner}, log);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t j) { return static_cast<std::size_t>((o * n + j) * inner + i); };
        float max = -std::numeric_limits<float>::infinity(), total = 0;
        for (int64_t j = 0; j < n; ++j) max = in[at(j)] > max ? in[at(j)] : max;
        for (int64_t j = 0; j < n; ++j) total += std::exp(in[at(j)] - max);
        for (int64_t j = 0; j < n; ++j) {
          const float expected = log ? (in[at(j)] - max) - std::log(total)
                                     : std::exp(in[at(j)] - max) * (1.0f / total);
          if (std::isnan(expected)) {
            EXPECT_TRUE(std::isnan(out[at(j)])) << o << " " << j << " " << i;
          } else {
            EXPECT_EQ(out[at(j)], expected) << log << " " << o << " " << j << " " << i;
          }
        }
      }
    }
  }
}

TEST(SoftmaxForward, Errors) {
  // torch.arange(6).softmax(0) -> "softmax_lastdim_kernel_impl" not implemented for 'Long'
  expect_error([] { softmax(arange(6), 0); },
               "softmax: expected a floating point tensor, got int64 (input shape [6])");
  expect_error([] { log_softmax(ones({2}, DType::Bool), 0); },
               "log_softmax: expected a floating point tensor, got bool");
  expect_error(
      [] {
        softmax(ones({2, 3}), 2);
      },
      "softmax: dimension out of range (expected to be in range of [-2, 1], but got 2)");
  expect_error([] { log_softmax(ones({2, 3}), -3); }, "log_softmax: dimension out of range");
}

// ---- backward ----

TEST(SoftmaxBackward, MatchesPyTorch) {
  // x = a.clone().requires_grad_(); torch.softmax(x, 1).backward(g); x.grad.tolist()
  Tensor x = sample_3x4().requires_grad_();
  Tensor y = softmax(x, 1);
  EXPECT_EQ(grad_fn_name(y), "SoftmaxBackward0");
  y.backward(upstream_3x4());
  expect_values(x.grad(), {0.12175662815570831, 0.008161546662449837, -0.43862995505332947,
                           0.30871179699897766, 0.1710883378982544, 0.0849599540233612,
                           0.11089776456356049, -0.3669460117816925, 0.029564490541815758,
                           0.20873303711414337, -0.05951240286231041, -0.17878513038158417});
  // torch.softmax(x, 0).backward(g)
  Tensor z = sample_3x4().requires_grad_();
  softmax(z, 0).backward(upstream_3x4());
  expect_values(z.grad(), {0.09153933823108673, -0.053386442363262177, -0.21380582451820374,
                           0.27688565850257874, -0.1308627873659134, -0.08902416378259659,
                           0.14770303666591644, -0.3706361651420593, 0.039323415607213974,
                           0.14241062104701996, 0.06610284000635147, 0.09375052154064178});
}

TEST(SoftmaxBackward, SumOfSoftmaxHasZeroGradient) {
  // sum_j y_j = 1 whatever x is, so its gradient is 0 (up to rounding).
  Tensor x = sample_3x4().requires_grad_();
  softmax(x, 1).sum().backward();
  expect_values(x.grad(), std::vector<double>(12, 0.0), 1e-7);
}

TEST(SoftmaxBackward, LogSoftmaxMatchesPyTorch) {
  // torch.log_softmax(x, 1).backward(g); x.grad.tolist()
  Tensor x = sample_3x4().requires_grad_();
  Tensor y = log_softmax(x, 1);
  EXPECT_EQ(grad_fn_name(y), "LogSoftmaxBackward0");
  y.backward(upstream_3x4());
  expect_values(x.grad(),
                {0.8296418190002441, -0.038012053817510605, -2.537485122680664, 1.7458553314208984,
                 -0.023152261972427368, 0.24021029472351074, 2.904428720474243, -3.1214866638183594,
                 1.945762038230896, 0.01427111029624939, -0.489498496055603, -1.4705346822738647});
  // torch.log_softmax(x, 0).backward(g)
  Tensor z = sample_3x4().requires_grad_();
  log_softmax(z, 0).backward(upstream_3x4());
  expect_values(z.grad(), {-0.05237847566604614, -0.10623832046985626, -2.7462551593780518,
                           1.8872828483581543, -1.842111349105835, -0.026201754808425903,
                           2.921332597732544, -1.681898832321167, 1.8944897651672363,
                           0.13244003057479858, -0.17507754266262054, -0.20538398623466492});
}

TEST(SoftmaxBackward, MinusInfinity) {
  // x = torch.tensor([[0., -inf, 1.]], requires_grad=True)
  // torch.softmax(x, 1).backward(torch.tensor([[1., 2., 3.]])) -> [[-0.3932, -0.0, 0.3932]]
  Tensor x = tensor({{0.0, -kInf, 1.0}}).requires_grad_();
  softmax(x, 1).backward(tensor({{1, 2, 3}}));
  expect_values(x.grad(), {-0.3932238817214966, 0.0, 0.3932238519191742}, 1e-7);
  // torch.log_softmax(x, 1).backward(...) -> [[-0.6136, 2.0000, -1.3864]]
  Tensor z = tensor({{0.0, -kInf, 1.0}}).requires_grad_();
  log_softmax(z, 1).backward(tensor({{1, 2, 3}}));
  expect_values(z.grad(), {1 - 6 * 0.2689414322376251, 2.0, 3 - 6 * 0.7310585975646973}, 1e-6);
  // A row of -inf: its output is nan, and so is its gradient; the other row is unaffected.
  // torch.softmax(torch.tensor([[-inf, -inf], [0., -inf]]), 1).backward(ones) -> [[nan, nan], [0.,
  // 0.]]
  Tensor w = tensor({{-kInf, -kInf}, {0.0, -kInf}}).requires_grad_();
  softmax(w, 1).backward(ones({2, 2}));
  expect_values(w.grad(), {NAN, NAN, 0.0, 0.0}, 0);
}

// softmax_backward_rows against PyTorch's _softmax_backward_data and _log_softmax_backward_data
// on rows of 1 to 257 values over many binades, float32 (8 lanes) and float64 (4 lanes), bit
// for bit (tests/fixtures/softmax_bits.txt):
//  - "lane_sum": log_softmax's, given output y = 0, returns dx_j = g_j - sum(g), and with
//    g_0 = 0, dx_0 = -sum(g): the order in which the kernels add a row (vec_lane_sum), exp
//    playing no part (exp(0) = 1);
//  - "softmax_backward": softmax's, sum_j g_j y_j with PyTorch's fused multiply-adds
//    (vec_lane_dot), any y.
template <typename T>
void expect_backward_rows(const std::string& prefix, bool log) {
  const test::Fixture& f = test::fixture_file("softmax_bits.txt");
  for (int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 50, 257}) {
    const std::string name = prefix + std::to_string(n);
    const Tensor g = f.tensor(name + "/grad").contiguous();
    const Tensor y = log ? zeros(g.shape(), g.dtype()) : f.tensor(name + "/y").contiguous();
    Tensor dx = empty(g.shape(), g.dtype());
    kernels::softmax_backward_rows(g.data_ptr<T>(), y.data_ptr<T>(), dx.data_ptr<T>(), g.size(0), n,
                                   log);
    test::expect_exact(dx, f, name + "/dx");
  }
}

TEST(SoftmaxBits, RowsAreAddedInPyTorchsOrder) {
  expect_backward_rows<float>("lane_sum/f32_", /*log=*/true);
  expect_backward_rows<double>("lane_sum/f64_", /*log=*/true);
}

TEST(SoftmaxBits, BackwardIsPyTorchsKernel) {
  expect_backward_rows<float>("softmax_backward/f32_", /*log=*/false);
  expect_backward_rows<double>("softmax_backward/f64_", /*log=*/false);
}

}  // namespace
}  // namespace ember
