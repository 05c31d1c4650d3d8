// autograd/op_list.cpp — the registry's names as strings (expanded from the X-macro in op_list.h).
#include "autograd/op_list.h"

#include <algorithm>

namespace moelab {

const std::vector<std::string>& differentiable_ops() {
#define MOELAB_OP_NAME(name) #name,
  static const std::vector<std::string> names = {MOELAB_DIFFERENTIABLE_OPS(MOELAB_OP_NAME)};
#undef MOELAB_OP_NAME
  return names;
}

bool is_differentiable_op(const std::string& name) {
  const auto& names = differentiable_ops();
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace moelab
