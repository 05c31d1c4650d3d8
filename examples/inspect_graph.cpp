// examples/inspect_graph.cpp — looking inside one training step of a tiny MLP.
//
// Three tools of autograd/ show what backward() does, on the smallest model that has every part
// of a real step (parameters, an activation, a loss):
//   graph_text / graph_dot (autograd/graph_print.h)  the graph the loss was computed by, one line
//                                                    per node, and the same as a Graphviz file;
//   retain_grad() (autograd/variable.h)              keeps the gradient of an activation, which
//                                                    backward() would otherwise drop;
//   register_hook (autograd/grad_hooks.h)            a function called with a gradient as
//                                                    backward() passes it on.
//
// Model: x [N=4, 3] -> fc1 (3 -> 8) -> relu -> hidden [4, 8] -> fc2 (8 -> 3) -> logits [4, 3];
// loss = cross-entropy of the logits against targets [4]. Then one SGD step (lr 0.5) and the loss
// again, which must be lower.
//
// The program checks what it shows and exits with status 1 if a check fails (ctest runs it):
//   - each row of dloss/dlogits, as the hook saw it, is (softmax - onehot) / N and sums to 0;
//   - relu passes the retained dloss/dhidden on where hidden > 0 only, so those masked rows,
//     summed over N, must equal fc1.bias.grad();
//   - the SGD step must lower the loss.
//
//   build/inspect_graph                       # prints the graph and the gradients
//   build/inspect_graph --dot step.dot        # also writes the graph: dot -Tsvg step.dot -o step.svg
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "autograd/graph_print.h"
#include "autograd/no_grad.h"
#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/linear.h"
#include "nn/module.h"

using namespace moelab;

namespace {

// x: [N, 3] -> logits: [N, 3]; hidden, the relu output [N, 8], is handed back for inspection.
class TinyMLP : public Module {
 public:
  explicit TinyMLP(Generator& gen)
      : fc1(register_module("fc1", std::make_shared<Linear>(3, 8, gen))),
        fc2(register_module("fc2", std::make_shared<Linear>(8, 3, gen))) {}
  Variable forward(const Variable& x, Variable& hidden) const {
    hidden = relu(fc1->forward(x));
    return fc2->forward(hidden);
  }
  std::shared_ptr<Linear> fc1, fc2;
};

double norm(const Tensor& t) {
  double s = 0;
  for (double v : t.to(DType::Float64).to_vector<double>()) s += v * v;
  return std::sqrt(s);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Prints the autograd graph of one training step of a tiny MLP, and its gradients"};
  std::string dot_path;
  std::uint64_t seed = 0;
  app.add_option("--dot", dot_path, "also write the graph as Graphviz dot to this file");
  app.add_option("--seed", seed, "random seed of the data and the weights");
  CLI11_PARSE(app, argc, argv);

  Generator gen(seed);
  TinyMLP model(gen);
  const Variable x(normal({4, 3}, 0.0, 1.0, gen));                         // [N, 3], a constant
  const Tensor targets = from_vector(std::vector<std::int32_t>{0, 2, 1, 2}, {4});  // [N]

  Variable hidden;
  Variable logits = model.forward(x, hidden);
  Variable loss = cross_entropy(logits, targets);

  std::printf("The graph of the loss: one line per node, every node after its inputs.\n");
  std::printf("(const: no gradient needed; leaf: a parameter; the rest: ops, with their inputs' numbers)\n\n");
  const GraphNames names = model.named_parameters();
  std::printf("%s\n", graph_text(loss, names).c_str());
  if (!dot_path.empty()) {
    std::ofstream out(dot_path);
    out << graph_dot(loss, names);
    if (!out) {
      std::fprintf(stderr, "could not write %s\n", dot_path.c_str());
      return 1;
    }
    std::printf("Wrote %s (render: dot -Tsvg %s -o graph.svg)\n\n", dot_path.c_str(), dot_path.c_str());
  }

  // Before backward(): keep the hidden activation's gradient, and watch the logits' gradient pass.
  hidden.retain_grad();
  Tensor dlogits;
  logits.register_hook([&dlogits](const Tensor& g) {
    dlogits = g.clone();
    return Tensor();  // an undefined Tensor: leave the gradient as it is
  });
  const double loss_before = loss.data().item<float>();
  loss.backward();

  bool ok = true;
  std::printf("loss %.6f\n\ndloss/dlogits [4, 3], seen by the hook (each row: (softmax - onehot) / N, sums to 0):\n",
              loss_before);
  const std::vector<float> dl = dlogits.to_vector<float>();
  for (int i = 0; i < 4; ++i) {
    const float* row = &dl[static_cast<std::size_t>(i) * 3];
    const double row_sum = double(row[0]) + row[1] + row[2];
    std::printf("  % .5f % .5f % .5f   sum % .1e\n", row[0], row[1], row[2], row_sum);
    ok = ok && std::abs(row_sum) < 1e-6;
  }

  // relu passes dloss/dhidden to fc1's output where hidden > 0, so fc1.bias.grad() is the column
  // sums of that masked gradient.
  const Tensor dfc1 = kernels::relu_backward(hidden.data(), hidden.grad());  // [4, 8]
  const double bias_gap =
      norm(kernels::sub(kernels::sum(dfc1, 0), model.fc1->bias().grad()));
  std::printf("\ndloss/dhidden %s, kept by retain_grad(); norm %.5f\n", hidden.grad().shape().str().c_str(),
              norm(hidden.grad()));
  std::printf("fc1.bias.grad() equals the column sums of relu'(hidden) * dloss/dhidden: difference %.1e\n", bias_gap);
  ok = ok && bias_gap < 1e-6;

  std::printf("\ngradient norms:\n");
  for (const auto& [name, p] : model.named_parameters())
    std::printf("  %-10s %-7s %.5f\n", name.c_str(), p.shape().str().c_str(), norm(p.grad()));

  // One SGD step, then the loss again (no graph needed for the check).
  for (Variable p : model.parameters()) {
    // p -= 0.5 * grad, written into the parameter's own storage (every handle of it sees the update).
    kernels::copy(p.data(), kernels::sub(p.data(), kernels::mul(p.grad(), 0.5)));
    p.zero_grad();
  }
  double loss_after;
  {
    NoGradGuard no_grad;
    Variable unused;
    loss_after = cross_entropy(model.forward(x, unused), targets).data().item<float>();
  }
  std::printf("\nafter one SGD step (lr 0.5): loss %.6f -> %.6f\n", loss_before, loss_after);
  ok = ok && loss_after < loss_before;
  std::printf("%s\n", ok ? "all checks passed" : "CHECK FAILED");
  return ok ? 0 : 1;
}
