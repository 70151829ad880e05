// Second-order autograd at the book's size: the gradient of a gradient.
//
// Every backward formula in Ember is written with Ember's own ops, so a backward run with
// create_graph records a graph of its own, and the gradient it returns can be differentiated
// again. This program uses that four ways, on the chapter-3 MultiHeadAttention (d_in 3, d_out 2,
// 2 heads, torch.manual_seed(123)) and the book's six tokens "Your journey starts with one step":
//
// 1. The Hessian of a loss with respect to W_query: 6 weights, a 6x6 matrix of second
//    derivatives d^2 loss / dw_i dw_j, printed and drawn as a heatmap (hessian_wq.svg). It is
//    computed twice: row by row (differentiate each element of the create_graph gradient), and
//    by autograd::functional::hessian; both equal PyTorch's (tests/fixtures/second_order.txt).
// 2. A Newton step against a gradient step on a small convex problem (softmax regression of
//    each token's successor from its embedding): Newton's w - H^-1 g lands near the minimum in
//    one step where a gradient step only starts down the slope.
// 3. A gradient penalty, || d loss / d x ||^2 (WGAN-GP, input-gradient regularisation): the
//    penalty is a function of a gradient, so training on it needs the gradient's gradient.
// 4. Anomaly mode catching a NaN in a backward: the distance between the context vectors of
//    two identical batch rows is sqrt(0), whose derivative is infinite; the error names the
//    node, its inputs' shapes, the module and the label where the forward ran.
//
// Usage: second_order [output directory for hessian_wq.svg (default: .)]
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "core/autograd/anomaly.h"
#include "core/autograd/functional.h"
#include "core/ember.h"
#include "examples/common/flags.h"
#include "examples/common/program.h"
#include "examples/common/svg.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/loss.h"

using namespace ember;
namespace F = ember::nn::functional;

namespace {

// The book's six token embeddings (float32 values, as in the book, widened to float64).
Tensor book_batch() {
  Tensor inputs = tensor({{0.43, 0.15, 0.89},            // Your     (x^1)
                          {0.55, 0.87, 0.66},            // journey  (x^2)
                          {0.57, 0.85, 0.64},            // starts   (x^3)
                          {0.22, 0.58, 0.33},            // with     (x^4)
                          {0.77, 0.25, 0.10},            // one      (x^5)
                          {0.05, 0.80, 0.55}});          // step     (x^6)
  return stack({inputs, inputs}, 0).to(DType::Float64);  // the book's batch of two
}

// A fixed regression target for the context vectors: ((i * 7 + 13) % 17) / 8 - 1 (the same
// pattern as the PyTorch fixtures' P(shape, seed=1)).
Tensor target_of(const Shape& shape) {
  std::vector<double> v(static_cast<std::size_t>(numel_of(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7 + 13) % 17) / 8 - 1;
  return from_vector(v, shape, DType::Float64);
}

std::shared_ptr<nn::MultiHeadAttention> book_mha() {
  manual_seed(123);
  auto mha = std::make_shared<nn::MultiHeadAttention>(3, 2, 6, 0.0, 2);
  mha->to(DType::Float64);
  return mha;
}

void print_matrix(const std::string& title, const Tensor& m, const std::vector<std::string>& rows) {
  std::cout << title << "\n";
  const std::vector<double> v = m.contiguous().to_vector<double>();
  const int64_t n = m.size(0), k = m.size(1);
  for (int64_t i = 0; i < n; ++i) {
    std::printf("  %-9s", rows[static_cast<std::size_t>(i)].c_str());
    for (int64_t j = 0; j < k; ++j) std::printf(" %12.4e", v[static_cast<std::size_t>(i * k + j)]);
    std::printf("\n");
  }
}

// ---- 1. the Hessian of the loss with respect to W_query ----

Tensor hessian_of_wq(const std::string& out_dir) {
  std::cout << "==== 1. Hessian of the loss w.r.t. W_query.weight ====\n";
  auto mha = book_mha();
  const Tensor batch = book_batch();
  const Tensor target = target_of({2, 6, 2});
  Tensor& wq = mha->W_query->weight;  // [2, 3]: d_out x d_in

  // By hand: g = d loss / d W_q with create_graph, then one backward per element of g.
  Tensor loss = F::mse_loss(mha->forward(batch), target);
  Tensor g = autograd::grad({loss}, {wq}, {}, std::nullopt, /*create_graph=*/true)[0];
  std::cout << "loss = " << loss.item() << "\n";
  print_matrix("d loss / d W_query.weight:", g.detach(), {"row 0", "row 1"});
  const Tensor flat = g.reshape({6});
  std::vector<Tensor> rows;
  for (int64_t k = 0; k < 6; ++k) {
    rows.push_back(
        autograd::grad({flat.select(0, k)}, {wq}, {}, /*retain_graph=*/true)[0].reshape({6}));
  }
  const Tensor by_rows = stack(rows, 0);

  // The same with autograd::functional::hessian, on a function of the weight alone.
  auto loss_of = [&](const Tensor& w) {
    const Tensor saved = wq;
    wq = w;  // Linear reads its member: the forward uses w
    Tensor l = F::mse_loss(mha->forward(batch), target);
    wq = saved;
    return l;
  };
  const Tensor h = autograd::functional::hessian(loss_of, wq).reshape({6, 6});

  const std::vector<std::string> names = {"Wq[0,0]", "Wq[0,1]", "Wq[0,2]",
                                          "Wq[1,0]", "Wq[1,1]", "Wq[1,2]"};
  print_matrix("d^2 loss / dWq dWq (rows: one element of the gradient, differentiated):", by_rows,
               names);
  const double asym = max(abs(h - h.t())).item();
  const double diff = max(abs(h - by_rows)).item();
  std::printf(
      "functional::hessian vs row by row: max |diff| = %.3g; symmetric: max |H - H^T| = "
      "%.3g\n",
      diff, asym);

  // The heatmap, in units of 1e-6 (the second derivatives are small: the weights and the
  // book's embeddings are), on a colour range symmetric around 0.
  std::vector<double> values = h.contiguous().to_vector<double>();
  double big = 0;
  for (double& v : values) {
    v *= 1e6;
    big = std::max(big, std::abs(v));
  }
  examples::svg::HeatmapGrid grid;
  grid.title = "Hessian of the loss w.r.t. W_query";
  grid.subtitle = "chapter-3 MHA, 2 heads; row 0 of Wq feeds head 0, row 1 head 1";
  grid.panels.push_back({"d^2 loss / dWq_i dWq_j", values, 6, 6, names, names});
  grid.vmin = -big;
  grid.vmax = big;
  grid.scale_label = "second derivative (x 1e-6)";
  grid.show_values = 1;
  grid.cell = 56;
  const std::string path = out_dir + "/hessian_wq.svg";
  examples::svg::write_file(path, examples::svg::heatmap_grid(grid));
  std::cout << "wrote " << path << "\n";
  return h;
}

// ---- 2. Newton against gradient descent ----

// Solves A x = b (A n x n, small) by Gaussian elimination with partial pivoting.
std::vector<double> solve(std::vector<double> a, std::vector<double> b) {
  const std::size_t n = b.size();
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t p = c;
    for (std::size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r * n + c]) > std::abs(a[p * n + c])) p = r;
    }
    for (std::size_t k = 0; k < n; ++k) std::swap(a[c * n + k], a[p * n + k]);
    std::swap(b[c], b[p]);
    for (std::size_t r = c + 1; r < n; ++r) {
      const double f = a[r * n + c] / a[c * n + c];
      for (std::size_t k = c; k < n; ++k) a[r * n + k] -= f * a[c * n + k];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(n);
  for (std::size_t i = n; i-- > 0;) {
    double s = b[i];
    for (std::size_t k = i + 1; k < n; ++k) s -= a[i * n + k] * x[k];
    x[i] = s / a[i * n + i];
  }
  return x;
}

void newton_vs_gradient() {
  std::cout << "\n==== 2. One Newton step against one gradient step ====\n";
  // Softmax regression: predict each token's successor (Your -> journey, ..., step -> Your)
  // from its embedding: logits = x W^T, W of shape [6 classes, 3]; cross-entropy plus a small
  // L2 term 0.01 |W|^2 (a convex loss with a positive definite Hessian).
  const Tensor x = book_batch().select(0, 0);  // [6, 3]
  const Tensor targets = tensor({1, 2, 3, 4, 5, 0}, DType::Int64);
  auto loss_of = [&](const Tensor& w) {
    return F::cross_entropy(matmul(x, w.t()), targets) + 0.01 * (w * w).sum();
  };
  const Tensor w0 = zeros({6, 3}, DType::Float64);
  const double lr = 1.0;
  Tensor w_grad = w0.clone(), w_newton = w0.clone();
  std::printf("%-6s %-22s %-22s\n", "step", "gradient (lr 1.0)", "Newton");
  std::printf("%-6d %-22.10f %-22.10f\n", 0, loss_of(w0).item(), loss_of(w0).item());
  for (int step = 1; step <= 3; ++step) {
    // Gradient descent: w - lr g.
    auto [l, g] = autograd::functional::vjp(loss_of, w_grad);
    w_grad = w_grad - lr * g;
    // Newton: w - H^-1 g, with H from autograd::functional::hessian (18 x 18).
    Tensor gn = autograd::functional::vjp(loss_of, w_newton).second.reshape({18});
    Tensor h = autograd::functional::hessian(loss_of, w_newton).reshape({18, 18});
    std::vector<double> d = solve(h.to_vector<double>(), gn.to_vector<double>());
    w_newton = w_newton - from_vector(d, {6, 3}, DType::Float64);
    std::printf("%-6d %-22.10f %-22.10f\n", step, loss_of(w_grad).item(), loss_of(w_newton).item());
  }
  // The Hessian-vector product needs no Hessian: hvp(f, w, v) = H v from two backwards.
  const Tensor v = ones({6, 3}, DType::Float64);
  const Tensor hv = autograd::functional::hvp(loss_of, w0, v).second;
  const Tensor hv_full =
      matmul(autograd::functional::hessian(loss_of, w0).reshape({18, 18}), v.reshape({18}));
  std::printf("hvp(f, w0, 1) vs hessian(f, w0) @ 1: max |diff| = %.3g\n",
              max(abs(hv.reshape({18}) - hv_full)).item());
}

// ---- 3. A gradient penalty ----

void gradient_penalty() {
  std::cout << "\n==== 3. Gradient penalty || d loss / d x ||^2 ====\n";
  auto mha = book_mha();
  const Tensor x = book_batch().requires_grad_(true);
  const Tensor loss = F::mse_loss(mha->forward(x), target_of({2, 6, 2}));
  // create_graph: the gradient is itself a function of the weights, recorded in a graph ...
  const Tensor gx = autograd::grad({loss}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  const Tensor penalty = (gx * gx).sum();
  // ... so the penalty can be differentiated with respect to every parameter.
  penalty.backward();
  std::printf("loss = %.10f, penalty = %.10f\n", loss.item(), penalty.item());
  for (const auto& [name, p] : mha->named_parameters()) {
    std::printf("  d penalty / d %-16s norm %.10f\n", name.c_str(),
                std::sqrt((p.grad() * p.grad()).sum().item()));
  }
}

// ---- 4. Anomaly mode ----

// The distance between the context vectors of the two rows of the batch.
class PairDistance : public nn::Module {
 public:
  Tensor forward(const Tensor& ctx) override {
    Tensor diff = ctx.select(0, 0) - ctx.select(0, 1);
    return sqrt((diff * diff).sum());  // d sqrt(s)/ds = 1 / (2 sqrt(s)): infinite at s = 0
  }
};

void anomaly() {
  std::cout << "\n==== 4. Anomaly mode: where did the NaN come from? ====\n";
  auto mha = book_mha();
  auto distance = std::make_shared<PairDistance>();
  auto model = std::make_shared<nn::Sequential>(mha, distance);
  // Without anomaly mode: the gradient is silently NaN (both batch rows are the same tokens).
  {
    Tensor d = (*model)(book_batch());
    d.backward();
    std::printf("distance = %g; d distance / d W_query[0,0] = %g (no error)\n", d.item(),
                mha->W_query->weight.grad().to_vector<double>()[0]);
    mha->zero_grad();
  }
  autograd::DetectAnomalyGuard anomaly_mode;
  Tensor d;
  {
    autograd::RecordFunction label("distance between the two batch rows");
    d = (*model)(book_batch());
  }
  try {
    d.backward();
    std::cout << "no anomaly caught (unexpected)\n";
  } catch (const Error& e) {
    std::cout << "caught: " << e.what() << "\n";
  }
}

}  // namespace

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  std::string out_dir = ".";
  ember::examples::Flags app{
      "second_order: Hessians, Newton's step, a gradient penalty and anomaly mode, on the "
      "chapter-3 attention"};
  ember::examples::text_option(app, "dir", out_dir, "where hessian_wq.svg goes", "a directory name")
      .capture_default_str();
  if (auto code = ember::examples::parse(app, argc, argv)) return *code;
  check(std::filesystem::is_directory(out_dir), "'", out_dir,
        "' is not a directory (the argument: where hessian_wq.svg goes)");
  int failed = 0;
  // Each part on its own: an error in one is printed, and the others still run.
  for (const auto& part : std::vector<std::function<void()>>{
           [&] { hessian_of_wq(out_dir); }, newton_vs_gradient, gradient_penalty, anomaly}) {
    try {
      part();
    } catch (const Error& e) {
      std::cout << std::flush;
      std::cerr << "error: " << e.what() << "\n";
      ++failed;
    }
  }
  return failed == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  return ember::examples::run_main("second_order", [&] { return run(argc, argv); });
}
