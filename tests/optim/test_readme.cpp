// The root README's code, as the README writes it, so that the front door cannot rot: the first
// things you type (the table beside PyTorch, values from PyTorch 1.13 in the comments), "Write
// your own backward" (MySquare), the training loop of "Training a GPT" and the explorer's
// snippet. optim_tests links core, nn and optim, which these snippets use together.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/ember.h"
#include "core/testing_gtest.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

// README, "The first things you type, next to PyTorch".
TEST(Readme, TheFirstThingsYouTypeGivePyTorchsText) {
  ember::manual_seed(123);
  // torch.manual_seed(123); torch.rand(3, 2)
  std::ostringstream a;
  a << rand({3, 2});
  EXPECT_EQ(a.str(),
            "tensor([[0.2961, 0.5166],\n"
            "        [0.2517, 0.6886],\n"
            "        [0.0740, 0.8665]])");
  // s = torch.rand(6, 6); s.masked_fill_(torch.triu(torch.ones(6, 6), 1).bool(), -torch.inf)
  Tensor s = rand({6, 6});
  Tensor mask = triu(ones({6, 6}), 1);
  s.masked_fill_(mask.to_bool(), -INFINITY);
  std::ostringstream b;
  b << s.index({Slice(None, 2), Slice(None, 3)});
  EXPECT_EQ(b.str(),
            "tensor([[0.1366,   -inf,   -inf],\n"
            "        [0.0756, 0.1966,   -inf]])");
  Tensor w = tensor({{0.43, 0.15}, {0.55, 0.87}}).requires_grad_();
  Tensor loss = softmax(matmul(w, w.transpose(0, 1)), -1).sum(-1, true).sum();
  loss.backward();
  EXPECT_EQ(loss.grad_fn()->name(), "SumBackward0");
  EXPECT_EQ(w.grad().sizes(), Shape({2, 2}));
  {
    NoGradGuard no_grad;
    EXPECT_FALSE((w * 2).requires_grad());
  }
  struct Attention : nn::Module {
    std::shared_ptr<nn::Linear> W_query;
    Attention() { W_query = register_module("W_query", std::make_shared<nn::Linear>(3, 2, false)); }
  } model;
  EXPECT_EQ(model.named_parameters().keys(), std::vector<std::string>({"W_query.weight"}));
  optim::AdamW opt(model.parameters(), optim::AdamWOptions(1e-3).weight_decay(0.1));
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].options->get_lr(), 1e-3);
}

// README, "Write your own backward": the snippet as written, with the using-declaration it
// starts with.
using autograd::AutogradContext,
    autograd::tensor_list;                        // libtorch: using namespace torch::autograd;
struct MySquare : autograd::Function<MySquare> {  // struct MySquare : Function<MySquare> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * x;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    Tensor x = ctx->get_saved_variables()[0];
    return {grad_outputs[0] * 2 * x};  // d(x^2)/dx = 2x, in Ember ops: so it is
  }                                    // differentiable again (gradgradcheck)
};

TEST(Readme, MySquareIsInTheGraphAndPassesGradcheck) {
  Tensor x = tensor({0.5, -1.5, 2.0}, kFloat64).requires_grad_();
  Tensor y = MySquare::apply(x);
  EXPECT_EQ(y.grad_fn()->name(), "MySquareBackward");
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return MySquare::apply(in[0]); }, {x});
  y.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), std::vector<double>({1.0, -3.0, 4.0}));
}

// README, "Training a GPT": the loop, on a small GPT for a few steps. The learning rate is the
// warmup's (LinearLR from 0.01 to 1.0 over 100 steps: 3e-4 * (0.01 + 0.99 * step / 100)).
TEST(Readme, TheTrainingLoopRunsWithTheWarmupsLearningRate) {
  manual_seed(123);
  nn::GPTConfig cfg;
  cfg.vocab_size = 32;
  cfg.context_length = 8;
  cfg.emb_dim = 16;
  cfg.n_heads = 2;
  cfg.n_layers = 1;
  auto model = std::make_shared<nn::GPTModel>(cfg);
  Tensor x = randint(0, 32, {2, 8});
  Tensor y = randint(0, 32, {2, 8});
  optim::AdamW opt(model->parameters(), optim::AdamWOptions(3e-4).weight_decay(0.1));
  optim::LinearLR warmup(opt, 0.01, 1.0, 100);
  optim::CosineAnnealingLR cosine(opt, 900);
  optim::SequentialLR sched(opt, {&warmup, &cosine}, {100});
  std::vector<double> losses;
  for (int64_t step = 0; step < 3; ++step) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(model->forward(x).flatten(0, 1), y.flatten());
    loss.backward();
    optim::clip_grad_norm_(model->parameters(), 1.0);
    opt.step();
    sched.step();
    losses.push_back(loss.item<double>());
  }
  EXPECT_NEAR(opt.param_groups()[0].options->get_lr(), 3e-4 * (0.01 + 0.99 * 3 / 100), 1e-12);
  for (double l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_NEAR(losses[0], std::log(32.0), 0.5);  // an untrained model's loss is near log(vocab)
}

// README, "See it in a browser": the explorer's snippet writes a page that names the leaves.
TEST(Readme, TheExplorerSnippetWritesAPageNamingTheParameters) {
  manual_seed(123);
  nn::MultiHeadAttention mha(3, 2, 6, 0.0, 2);
  Tensor x = rand({1, 6, 3});
  Tensor w = rand({1, 6, 2});
  const std::string page = test::temp_path("readme_explorer.html");
  {
    autograd::KeepValuesGuard keep;  // nodes keep their values, for the page
    Tensor loss = (mha.forward(x) * w).sum();
    autograd::ExploreOptions options;
    options.name_all(mha.named_parameters());  // leaves shown as "W_query.weight"
    autograd::explore(loss, page, options);
  }
  std::ifstream in(page);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(page);
  EXPECT_NE(html.find("W_query.weight"), std::string::npos);
  EXPECT_NE(html.find("CausalAttentionBackward0"), std::string::npos);  // the fused op
}

}  // namespace
}  // namespace ember
