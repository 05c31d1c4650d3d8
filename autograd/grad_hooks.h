// autograd/grad_hooks.h — gradient hooks: a function that backward() calls with a Variable's gradient.
//
//   Variable h = relu(matmul(x, w1));                       // h: [N, f]
//   Tensor dh;
//   HookHandle seen = h.register_hook([&](const Tensor& g) { dh = g; return Tensor(); });  // observe
//   w1.register_hook([](const Tensor& g) { return kernels::mul(g, 0.5); });
//   loss.backward();  // dh = dloss/dh: [N, f]; w1.grad() receives half of dloss/dw1
//   seen.remove();
//
// When. backward() calls a Variable's hooks once per backward() that reaches it, with its full
// gradient dloss/dv (v's shape: the sum over all of v's users), before that gradient is used: for
// a leaf, before it is added into grad(); for an op's output, before retain_grad() keeps it and
// before the op's grad_fn sends it on to the op's inputs, so a replacement flows into everything
// behind v. A Variable that no gradient reaches (not on the path to the output) is not called.
// Order. A Variable's hooks run in the order they were registered, each given what the previous
// one returned. Across Variables they run in the backward order: users before their inputs.
// Return. An undefined Tensor() keeps the gradient as it is; a defined one replaces it and must
// have the gradient's shape, dtype and device (checked: moelab::Error naming the Variable's op).
// Do not modify the given gradient in place: it may be shared with another Variable's gradient
// (add hands the same tensor to both of its inputs).
// Lifetime. Hooks live in the Variable's graph Node, shared by every copy of the Variable. A
// leaf's hooks stay for every later backward() until removed (or until set_requires_grad(false)
// drops its Node). An op output's hooks are dropped with the graph at the end of the backward()
// that ran them, like its grad_fn and saved tensors (the graph cannot run a second time). What a
// hook captures lives as long as the hook; a hook must not capture its own Variable (the Node
// would own itself through it and never be freed, the cycle node.h warns of for grad_fn). HookHandle::remove() removes one hook; removing twice,
// or after the Node is gone, does nothing. Dropping the handle does not remove the hook.
#pragma once

#include <functional>
#include <memory>

#include "core/tensor.h"

namespace moelab {

struct Node;

// grad: dloss/dv, v's shape. Returns a replacement of the same shape, dtype and device, or an
// undefined Tensor() to keep grad.
using GradHook = std::function<Tensor(const Tensor& grad)>;

// Identifies one registered hook (Variable::register_hook returns it).
class HookHandle {
 public:
  HookHandle() = default;  // refers to no hook
  // Unregisters the hook; does nothing if it was removed already or its Node is gone.
  void remove();
  // Whether the hook is still registered.
  bool active() const;

 private:
  friend class Variable;
  HookHandle(std::weak_ptr<Node> node, int id) : node_(std::move(node)), id_(id) {}
  std::weak_ptr<Node> node_;
  int id_ = -1;
};

namespace detail {
// The engine's side (autograd/engine.cpp): runs node's hooks on grad in order and returns the
// gradient to use from then on.
Tensor run_grad_hooks(const Node& node, Tensor grad);
}  // namespace detail

}  // namespace moelab
