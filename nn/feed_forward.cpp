// nn/feed_forward.cpp — AuxLosses::total and added_to (see feed_forward.h).
#include "nn/feed_forward.h"

#include "autograd/ops.h"

namespace moelab {

Variable AuxLosses::total() const {
  Variable sum;
  for (const auto& [name, loss] : terms) sum = sum.defined() ? sum + loss : loss;
  return sum;
}

Variable AuxLosses::added_to(const Variable& task_loss) const {
  return terms.empty() ? task_loss : task_loss + total();
}

}  // namespace moelab
