// A user's program: a two-layer network fitted to y = 2x - 1 with Ember's core, nn and
// optim, included as one header. Exits non-zero if the loss does not go down.
#include <ember/ember.h>
#include <cstdio>
#include <memory>

using namespace ember;

int main() {
  manual_seed(0);
  auto model =
      nn::make_sequential({std::make_shared<nn::Linear>(1, 8), std::make_shared<nn::ReLU>(),
                           std::make_shared<nn::Linear>(8, 1)});
  nn::ModuleHolder<nn::Sequential> net(model);
  Tensor x = rand({32, 1}, TensorOptions().dtype(kFloat32));
  Tensor y = x * 2.0 - 1.0;
  optim::SGD optimizer(net->parameters(), optim::SGDOptions(0.1));
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    Tensor loss = (net(x) - y).pow(2.0).mean();
    if (step == 0) first = loss.item();
    last = loss.item();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
  std::printf("loss %.6f -> %.6f (%zu parameters: %s, ...)\n", first, last,
              net->named_parameters().size(), net->named_parameters().keys()[0].c_str());
  return last < first * 0.5 ? 0 : 1;
}
