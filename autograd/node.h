// autograd/node.h — one recorded operation in the graph that backward() walks.
//
// Every Variable that needs a gradient points at a Node:
//   - a leaf (a parameter, or an input the user marked requires_grad) has a Node with
//     is_leaf == true, no inputs and no grad_fn; backward() accumulates into its `grad`;
//   - the output of a differentiable op has a Node holding the op's name, its inputs (as
//     Variables, which keeps the graph behind them alive) and its grad_fn; after retain_grad()
//     it keeps its gradient in `grad` as well.
// Any Node may carry gradient hooks (autograd/grad_hooks.h), which backward() runs on its
// gradient before using it.
// A grad_fn receives the inputs and the gradient of the output, and returns one gradient per
// input (an undefined Tensor means "no gradient"). It is handed the inputs as arguments instead of
// capturing them, and it never captures its own output Variable: the output owns the Node, so a
// captured output would own itself (a reference cycle that never frees). Capturing saved Tensors
// (a softmax output, a norm's rstd) is fine: Tensors hold no graph.
//
// Destroying a long chain of Nodes naively recurses once per link (Node -> inputs -> Variable ->
// Node -> ...) and overflows the stack at ~100k links. ~Node therefore unlinks iteratively: it
// moves the input nodes it solely owns onto an explicit stack and empties them one by one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_hooks.h"
#include "autograd/variable.h"
#include "core/tensor.h"

namespace moelab {

// inputs: the op's inputs; grad_output: d(loss)/d(output), the output's shape.
// Returns d(loss)/d(inputs[i]) for each i, each of inputs[i]'s shape, or undefined for none.
using GradFn = std::function<std::vector<Tensor>(const std::vector<Variable>& inputs, const Tensor& grad_output)>;

struct Node {
  struct Hook {
    int id;                     // HookHandle's key
    GradHook fn;
  };

  std::string name;             // the op that made the output ("add", "matmul", ...); "leaf" for leaves
  std::string detail;           // what a printed graph adds to the name: matmul's transposes ("b^T"), ...
  std::vector<Variable> inputs; // what the op read (empty for leaves and for freed nodes)
  GradFn grad_fn;               // empty for leaves and for freed nodes
  Tensor grad;                  // leaves, and op outputs with retains_grad: the gradient accumulated
                                // over backward() calls
  bool is_leaf = false;
  bool retains_grad = false;    // set by Variable::retain_grad() on an op output
  bool released = false;        // set by backward() once the node's inputs and grad_fn were freed
  std::vector<Hook> hooks;      // in registration order (autograd/grad_hooks.h)
  int next_hook_id = 0;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();
};

}  // namespace moelab
