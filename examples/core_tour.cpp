// A first look at the core: build a small expression, run backward, read the gradients.
//
//   x = [[1, 2, 3], [4, 5, 6]] (requires grad), w = [0.5, -1, 2] (requires grad)
//   y = softmax(x * w, dim=-1); loss = (y * y).sum()
//
// Run with EMBER_LOG=debug to watch the backward pass visit each node.
#include <iostream>

#include "core/ember.h"

using namespace ember;

int main() {
  Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}).requires_grad_();
  Tensor w = tensor({0.5, -1.0, 2.0}).requires_grad_();

  Tensor scores = x * w;  // w broadcasts over the rows of x
  Tensor y = softmax(scores, -1);
  Tensor loss = (y * y).sum();

  std::cout << "x:\n" << x << "\n\nw:\n" << w << "\n\n";
  std::cout << "scores = x * w:\n" << scores << "\n\n";
  std::cout << "y = softmax(scores, dim=-1):\n" << y << "\n\n";
  std::cout << "loss = (y * y).sum():\n" << loss << "\n\n";

  loss.backward();

  std::cout << "d loss / d x:\n" << x.grad() << "\n\n";
  std::cout << "d loss / d w (summed over the broadcast rows):\n" << w.grad() << "\n\n";
  std::cout << "The graph, as Graphviz DOT (render with `dot -Tpng`):\n"
            << autograd::to_dot(loss) << "\n";
  return 0;
}
