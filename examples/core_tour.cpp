// A first look at the core: build a small expression, run backward, read the gradients.
//
//   x = [[1, 2, 3], [4, 5, 6]] (requires grad), w = [0.5, -1, 2] (requires grad)
//   y = softmax(x * w, dim=-1); loss = (y * y).sum()
//
// It writes core_tour.html, a page that explains the graph (autograd::explore).
// Run with EMBER_LOG=debug to watch the backward pass visit each node.
#include <iostream>

#include "core/ember.h"
#include "examples/common/flags.h"
#include "examples/common/program.h"

using namespace ember;

// main's work; main (at the end) turns an error into one line and exit code 2.
int run(int argc, char** argv) {
  ember::examples::Flags app{
      "core_tour: a first expression, its backward pass and core_tour.html, the page that explains "
      "its graph (no flags)"};
  if (auto code = ember::examples::parse(app, argc, argv)) return *code;
  Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}).requires_grad_();
  Tensor w = tensor({0.5, -1.0, 2.0}).requires_grad_();

  Tensor scores, y, loss;
  {
    autograd::KeepValuesGuard keep;  // the graph keeps every value, for the explorer page
    scores = x * w;                  // w broadcasts over the rows of x
    y = softmax(scores, -1);
    loss = (y * y).sum();
  }

  std::cout << "x:\n" << x << "\n\nw:\n" << w << "\n\n";
  std::cout << "scores = x * w:\n" << scores << "\n\n";
  std::cout << "y = softmax(scores, dim=-1):\n" << y << "\n\n";
  std::cout << "loss = (y * y).sum():\n" << loss << "\n\n";

  // The page that explains this graph: open core_tour.html in a browser, click a node, play
  // the backward pass. (Written before backward, which frees what the graph saved.)
  autograd::ExploreOptions options;
  options.title = "Ember: core_tour's first expression, loss = (softmax(x * w, -1)^2).sum()";
  options.name("x", x).name("w", w).name("scores", scores).name("y", y).name("loss", loss);
  try {
    autograd::explore(loss, "core_tour.html", options);
    std::cout << "wrote core_tour.html (the graph to explore: open it in a browser)\n\n";
  } catch (const Error& e) {
    std::cout << "no core_tour.html: " << e.what() << "\n\n";
  }

  loss.backward();

  std::cout << "d loss / d x:\n" << x.grad() << "\n\n";
  std::cout << "d loss / d w (summed over the broadcast rows):\n" << w.grad() << "\n\n";
  std::cout << "The graph, as Graphviz DOT (render with `dot -Tpng`):\n"
            << autograd::to_dot(loss) << "\n";
  return 0;
}

int main(int argc, char** argv) {
  return ember::examples::run_main("core_tour", [&] { return run(argc, argv); });
}
