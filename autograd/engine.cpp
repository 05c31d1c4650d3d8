// autograd/engine.cpp — reverse-mode differentiation over the recorded graph.
//
// The graph is a DAG of Nodes (autograd/node.h): each op output's Node points at its inputs. To
// differentiate `output` we need every Node's full gradient before we call its grad_fn, i.e. after
// all of its users have contributed. So:
//   1. Order. An iterative depth-first search from the output lists Nodes in post-order (each
//      Node after all of its inputs): a topological order. An explicit stack of (node, next input)
//      frames replaces recursion, so a chain of 100k ops needs no 100k stack frames.
//   2. Propagate. Walk that order backwards (users before inputs). Each Node's incoming gradients
//      have already been summed (a Variable used twice, as in x * x, receives two contributions).
//      Its gradient hooks run on that sum, in registration order, and may replace it
//      (autograd/grad_hooks.h); then its grad_fn runs exactly once and hands one gradient to each
//      input. Leaves add what reaches them into leaf.grad (gradients accumulate across backward()
//      calls until zero_grad()), and so do op outputs that called retain_grad(). Leaves without
//      requires_grad have no Node and are never visited.
//   3. Free. Every non-leaf Node walked drops its inputs, grad_fn and hooks (the saved
//      activations go with them) and is marked released; a later backward() that reaches it
//      throws, since its history is gone. Leaves keep their grad and hooks, retained op outputs
//      their grad.
// Each grad_fn's result is checked (count, shapes, dtypes), so a wrong op fails loudly here,
// naming the op, instead of corrupting a gradient further down.
#include "autograd/engine.h"

#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "autograd/grad_hooks.h"
#include "autograd/node.h"
#include "core/kernels.h"

namespace moelab {
namespace {

// Nodes reachable from `root`, each after all of its inputs (post-order), by iterative DFS.
std::vector<std::shared_ptr<Node>> topological_order(const std::shared_ptr<Node>& root) {
  struct Frame {
    std::shared_ptr<Node> node;
    std::size_t next_input = 0;
  };
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<const Node*> seen{root.get()};
  std::vector<Frame> stack{{root, 0}};
  while (!stack.empty()) {
    Frame& top = stack.back();
    MOELAB_CHECK(!top.node->released, "backward", "the graph through '", top.node->name,
                 "' was already freed by an earlier backward(); run the forward pass again to rebuild it");
    if (top.next_input < top.node->inputs.size()) {
      const std::shared_ptr<Node>& child = top.node->inputs[top.next_input++].node();
      if (child && seen.insert(child.get()).second) stack.push_back({child, 0});  // `top` is invalid from here
    } else {
      order.push_back(std::move(top.node));
      stack.pop_back();
    }
  }
  return order;
}

void check_gradient(const Tensor& grad, const Tensor& value, const Node& node, std::size_t input) {
  MOELAB_CHECK(grad.shape() == value.shape() && grad.dtype() == value.dtype() && grad.device() == value.device(),
               "backward", "op '", node.name, "' returned gradient ", grad.str(), " for input ", input, " which is ",
               value.str());
}

}  // namespace

void run_backward(const Variable& output, const Tensor& grad_output) {
  check_defined(output.data(), "backward", "the output");
  MOELAB_CHECK(output.requires_grad(), "backward",
               "this Variable does not require a gradient (no input of it requires one, or it was computed under "
               "NoGradGuard)");
  check_defined(grad_output, "backward", "grad_output");
  MOELAB_CHECK(grad_output.shape() == output.shape() && grad_output.dtype() == output.dtype() &&
                   grad_output.device() == output.device(),
               "backward", "grad_output ", grad_output.str(), " does not match the output ", output.data().str());

  const std::vector<std::shared_ptr<Node>> order = topological_order(output.node());

  // Gradients waiting for each node (the sum of what its users sent so far).
  std::unordered_map<const Node*, Tensor> pending;
  pending[output.node().get()] = grad_output;

  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node& node = **it;
    auto found = pending.find(&node);
    if (found == pending.end()) continue;  // no gradient reached this node
    Tensor grad = std::move(found->second);
    pending.erase(found);
    if (!node.hooks.empty()) grad = detail::run_grad_hooks(node, std::move(grad));

    if (node.is_leaf || node.retains_grad) {
      // The first contribution is cloned where it may alias another node's gradient, the caller's
      // seed or a hook's copy, since optimizers modify grad() in place; a leaf's contribution that
      // nothing else holds (a product's fresh result, as a weight's gradient is) is kept as it is:
      // memmove fell from 2.2% to 1.0% of perf's samples of the 64-expert training step (2.2M
      // parameters, one thread; docs/results/bench.md, 2026-12-03).
      if (node.grad.defined())
        node.grad = kernels::add(node.grad, grad);
      else
        node.grad = node.is_leaf && grad.sole_handle() ? std::move(grad) : grad.clone();
      if (node.is_leaf) continue;
    }

    std::vector<Tensor> input_grads = node.grad_fn(node.inputs, grad);
    MOELAB_CHECK(input_grads.size() == node.inputs.size(), "backward", "op '", node.name, "' returned ",
                 input_grads.size(), " gradients for ", node.inputs.size(), " inputs");
    for (std::size_t i = 0; i < input_grads.size(); ++i) {
      const Variable& input = node.inputs[i];
      Tensor& g = input_grads[i];
      if (!input.requires_grad() || !g.defined()) continue;
      check_gradient(g, input.data(), node, i);
      Tensor& slot = pending[input.node().get()];
      slot = slot.defined() ? kernels::add(slot, g) : std::move(g);
    }
  }

  // Free the graph. `order` keeps every node alive until the end of this function, so clearing
  // inputs here never starts a (deep) chain of destructions.
  for (const std::shared_ptr<Node>& node : order) {
    if (node->is_leaf) continue;
    node->inputs.clear();
    node->grad_fn = nullptr;
    node->hooks.clear();
    node->released = true;
  }
}

}  // namespace moelab
