// autograd/op_list.cpp — the registry's names as strings (expanded from the X-macro in op_list.h).
#include "autograd/op_list.h"

#include <unordered_set>

namespace moelab {

const std::vector<std::string>& differentiable_ops() {
#define MOELAB_OP_NAME(name) #name,
  static const std::vector<std::string> names = {MOELAB_DIFFERENTIABLE_OPS(MOELAB_OP_NAME)};
#undef MOELAB_OP_NAME
  return names;
}

bool is_differentiable_op(const std::string& name) {
  // Asked once per recorded op, so a hash lookup rather than a scan of the list.
  static const std::unordered_set<std::string> lookup(differentiable_ops().begin(), differentiable_ops().end());
  return lookup.count(name) > 0;
}

}  // namespace moelab
