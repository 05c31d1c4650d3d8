// autograd/op_list.cpp — the registry's names as strings (expanded from the X-macro in op_list.h
// and from the list of unary elementwise ops in core/kernels/elementwise_ops.h).
#include "autograd/op_list.h"

#include <unordered_set>

#include "core/kernels/elementwise_ops.h"

namespace moelab {

const std::vector<std::string>& differentiable_ops() {
#define MOELAB_OP_NAME(name) #name,
#define MOELAB_UNARY_OP_NAME(Op, name, ...) #name,
  static const std::vector<std::string> names = {MOELAB_DIFFERENTIABLE_OPS(MOELAB_OP_NAME)
                                                     MOELAB_UNARY_OPS(MOELAB_UNARY_OP_NAME)};
#undef MOELAB_OP_NAME
#undef MOELAB_UNARY_OP_NAME
  return names;
}

bool is_differentiable_op(const std::string& name) {
  // Asked once per recorded op, so a hash lookup rather than a scan of the list.
  static const std::unordered_set<std::string> lookup(differentiable_ops().begin(), differentiable_ops().end());
  return lookup.count(name) > 0;
}

}  // namespace moelab
