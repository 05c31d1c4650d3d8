// autograd/variable.h — a Tensor that remembers how it was computed, so gradients can flow back.
//
// A Variable is a cheap handle, like Tensor: copying it copies two pointers. It holds
//   data   the value (a Tensor; optimizers update it in place through data())
//   node   the graph record (autograd/node.h), present only when a gradient is needed:
//            leaves made with requires_grad = true get a leaf Node that collects .grad();
//            outputs of differentiable ops (autograd/ops*.h) get a Node with the op's inputs and
//            its grad_fn, unless no input needs a gradient or a NoGradGuard is active.
// backward() (autograd/engine.cpp) walks the nodes from this Variable back to the leaves, adds
// each leaf's gradient into leaf.grad(), and frees the graph it walked. To look inside: an op
// output's gradient with retain_grad(), any gradient as it flows with register_hook()
// (autograd/grad_hooks.h), and the graph itself with graph_text() / graph_dot()
// (autograd/graph_print.h).
//
//   Variable w(normal({3, 2}, 0, 1, gen), true);      // a parameter (leaf, requires_grad)
//   Variable x(input);                                // a constant (no gradient)
//   Variable loss = mean(square(matmul(x, w)));
//   loss.backward();                                  // w.grad(): [3, 2]
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>

#include "autograd/grad_hooks.h"
#include "core/tensor.h"

namespace moelab {

struct Node;

class Variable {
 public:
  Variable() = default;                                       // undefined
  explicit Variable(Tensor data, bool requires_grad = false); // a leaf

  const Tensor& data() const { return data_; }
  Tensor& data() { return data_; }

  bool defined() const { return data_.defined(); }
  bool requires_grad() const { return node_ != nullptr; }
  // True for Variables made by the constructor (or detach()), false for outputs of recorded ops.
  bool is_leaf() const;
  // Turns gradient tracking on or off for a leaf (freezing a parameter); throws on a non-leaf.
  void set_requires_grad(bool requires_grad);

  const Shape& shape() const { return data_.shape(); }
  DType dtype() const { return data_.dtype(); }
  Device device() const { return data_.device(); }
  std::int64_t numel() const { return data_.numel(); }
  int rank() const { return data_.rank(); }
  std::int64_t size(int axis) const { return data_.size(axis); }

  // The gradient accumulated into a leaf by backward() calls; undefined until one reaches it.
  // Always undefined for leaves without requires_grad, and for op outputs unless they called
  // retain_grad() before the backward().
  const Tensor& grad() const;
  // Replaces a leaf's gradient (e.g. after clipping); must match the data's shape and dtype.
  void set_grad(Tensor grad);
  // Drops the accumulated gradient (the next backward() starts from nothing).
  void zero_grad();
  // Makes an op output keep its gradient: the next backward() that reaches it stores dloss/dv
  // (v's shape, after v's hooks ran) in grad(), where it stays after the graph is freed, as a
  // leaf's does (a later backward() would add to it, but the freed graph cannot run again). A
  // leaf keeps its gradient anyway (nothing to do); a Variable without a gradient throws.
  //   Variable h = relu(matmul(x, w));  h.retain_grad();  loss.backward();  // h.grad(): dloss/dh
  void retain_grad();
  // Whether grad() is kept: a leaf that requires grad, or an op output after retain_grad().
  bool retains_grad() const;
  // Calls `hook` with this Variable's gradient during every backward() that reaches it; the hook
  // may return a replacement. Order, lifetime and removal: autograd/grad_hooks.h.
  HookHandle register_hook(GradHook hook);

  // Computes gradients of this Variable with respect to every leaf behind it that requires one,
  // adds them into those leaves' grad(), and frees the graph. The seedless form needs a
  // one-element output (a loss) and seeds d(out)/d(out) = 1.
  void backward() const;
  void backward(const Tensor& grad_output) const;

  // The same data with no history: gradients do not flow through the result.
  Variable detach() const;

  // The graph record (null when no gradient is tracked). Read-only; for inspection and the engine.
  const std::shared_ptr<Node>& node() const { return node_; }
  // The name of the op that produced this Variable ("leaf" for a leaf that requires grad, "" without a node).
  const std::string& op_name() const;

 private:
  friend struct Node;
  friend Variable make_recorded(Tensor, std::shared_ptr<Node>);

  Tensor data_;
  std::shared_ptr<Node> node_;
};

// Internal: wraps an op's output and its freshly built Node (used by autograd/record.cpp).
Variable make_recorded(Tensor data, std::shared_ptr<Node> node);

// Prints like PyTorch: the values (core/tensor_print.h), then ", requires_grad=True" for a leaf
// that requires a gradient or ", grad_fn=<op>" for an op's output that records one:
//   std::cout << w;   // tensor([[ 0.1000, -0.2000]], requires_grad=True)
//   std::cout << y;   // tensor([0.3000], grad_fn=<matmul>)
// "variable(undefined)" for an undefined Variable. A GPU Variable is copied to the host to be read.
std::ostream& operator<<(std::ostream& out, const Variable& v);

}  // namespace moelab
