// autograd/grad_hooks.cpp — registering, removing and running gradient hooks (see grad_hooks.h).
//
// A Node keeps its hooks in registration order with increasing ids; a HookHandle holds a weak
// pointer to the Node and the id, so it never keeps a graph alive and goes quiet once the Node is
// gone. The engine calls run_grad_hooks on each Node's summed gradient before using it.
#include "autograd/grad_hooks.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "autograd/variable.h"

namespace moelab {

HookHandle Variable::register_hook(GradHook hook) {
  MOELAB_CHECK(node_ != nullptr, "Variable::register_hook",
               "this Variable does not require a gradient, so backward() never reaches it (hook a leaf made with "
               "requires_grad = true, or an op output computed from one)");
  MOELAB_CHECK(!node_->released, "Variable::register_hook", "the graph through '", node_->name,
               "' was already freed by backward(); run the forward pass again");
  MOELAB_CHECK(static_cast<bool>(hook), "Variable::register_hook", "the hook is empty");
  const int id = node_->next_hook_id++;
  node_->hooks.push_back({id, std::move(hook)});
  return HookHandle(node_, id);
}

void HookHandle::remove() {
  if (const std::shared_ptr<Node> node = node_.lock()) {
    std::erase_if(node->hooks, [this](const Node::Hook& h) { return h.id == id_; });
  }
  node_.reset();
}

bool HookHandle::active() const {
  const std::shared_ptr<Node> node = node_.lock();
  return node && std::any_of(node->hooks.begin(), node->hooks.end(), [this](const Node::Hook& h) { return h.id == id_; });
}

namespace detail {

Tensor run_grad_hooks(const Node& node, Tensor grad) {
  // A copy: a hook may remove itself (or another) while it runs.
  const std::vector<Node::Hook> hooks = node.hooks;
  for (const Node::Hook& hook : hooks) {
    Tensor replacement = hook.fn(grad);
    if (!replacement.defined()) continue;
    MOELAB_CHECK(replacement.shape() == grad.shape() && replacement.dtype() == grad.dtype() &&
                     replacement.device() == grad.device(),
                 "backward", "a gradient hook on '", node.name, "' returned ", replacement.str(),
                 " for the gradient ", grad.str(), " (a replacement must match it)");
    grad = std::move(replacement);
  }
  return grad;
}

}  // namespace detail
}  // namespace moelab
