// autograd/variable.cpp — the Variable handle: leaves, gradients (retain_grad too), detach, and the
// entry to backward(). register_hook is in autograd/grad_hooks.cpp.
#include "autograd/variable.h"

#include <utility>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/kernels.h"
#include "core/tensor_print.h"

namespace moelab {

Variable::Variable(Tensor data, bool requires_grad) : data_(std::move(data)) {
  if (requires_grad) set_requires_grad(true);
}

bool Variable::is_leaf() const { return node_ == nullptr || node_->is_leaf; }

void Variable::set_requires_grad(bool requires_grad) {
  MOELAB_CHECK(is_leaf(), "Variable::set_requires_grad", "only leaves can change requires_grad; this Variable is the output of '",
               node_->name, "' (use detach() to make a leaf)");
  if (!requires_grad) {
    node_.reset();
    return;
  }
  if (node_) return;
  check_floating(data_, "Variable", "a Variable that requires grad");
  node_ = std::make_shared<Node>();
  node_->name = "leaf";
  node_->is_leaf = true;
}

const Tensor& Variable::grad() const {
  static const Tensor undefined;
  if (!node_) return undefined;
  return node_->grad;  // undefined for an op output that does not retain its gradient
}

void Variable::retain_grad() {
  MOELAB_CHECK(node_ != nullptr, "Variable::retain_grad",
               "this Variable does not require a gradient, so backward() never reaches it");
  if (!node_->is_leaf) node_->retains_grad = true;
}

bool Variable::retains_grad() const { return node_ && (node_->is_leaf || node_->retains_grad); }

void Variable::set_grad(Tensor grad) {
  MOELAB_CHECK(node_ && node_->is_leaf, "Variable::set_grad", "only leaves that require grad hold a gradient");
  if (grad.defined())
    MOELAB_CHECK(grad.shape() == data_.shape() && grad.dtype() == data_.dtype() && grad.device() == data_.device(),
                 "Variable::set_grad", "gradient ", grad.str(), " does not match the data ", data_.str());
  node_->grad = std::move(grad);
}

void Variable::zero_grad() {
  if (node_) node_->grad = Tensor();
}

void Variable::backward() const {
  check_defined(data_, "backward", "the output");
  MOELAB_CHECK(data_.numel() == 1, "backward", "backward() without a gradient needs a one-element output (a loss), got ",
               data_.shape(), "; pass the output's gradient: backward(grad_output)");
  Tensor seed = Tensor::empty(data_.shape(), data_.dtype(), data_.device());
  kernels::fill(seed, 1.0);
  run_backward(*this, seed);
}

void Variable::backward(const Tensor& grad_output) const { run_backward(*this, grad_output); }

Variable Variable::detach() const { return Variable(data_); }

const std::string& Variable::op_name() const {
  static const std::string none;
  return node_ ? node_->name : none;
}

Variable make_recorded(Tensor data, std::shared_ptr<Node> node) {
  Variable out(std::move(data));
  out.node_ = std::move(node);
  return out;
}

std::ostream& operator<<(std::ostream& out, const Variable& v) {
  if (!v.defined()) return out << "variable(undefined)";
  std::string text = format_tensor(v.data());
  if (v.requires_grad()) {  // before the closing parenthesis, as PyTorch places it
    text.pop_back();
    text += v.is_leaf() ? ", requires_grad=True)" : ", grad_fn=<" + v.op_name() + ">)";
  }
  return out << text;
}

}  // namespace moelab
