// autograd/record.cpp — creating graph Nodes for op outputs (see record.h).
#include "autograd/record.h"

#include <algorithm>
#include <utility>

#include "autograd/no_grad.h"
#include "autograd/op_list.h"

namespace moelab {

Variable record(const char* op, Tensor output, std::vector<Variable> inputs, GradFn grad_fn) {
  MOELAB_CHECK(is_differentiable_op(op), "record", "op '", op,
               "' is not in the registry of differentiable ops; add X(", op, ") to autograd/op_list.h");
  const bool needs_grad =
      grad_enabled() && std::any_of(inputs.begin(), inputs.end(), [](const Variable& v) { return v.requires_grad(); });
  if (!needs_grad) return Variable(std::move(output));
  auto node = std::make_shared<Node>();
  node->name = op;
  node->inputs = std::move(inputs);
  node->grad_fn = std::move(grad_fn);
  return make_recorded(std::move(output), std::move(node));
}

}  // namespace moelab
