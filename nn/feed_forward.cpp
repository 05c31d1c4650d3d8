// nn/feed_forward.cpp — AuxLosses::total (see feed_forward.h).
#include "nn/feed_forward.h"

#include "autograd/ops.h"

namespace moelab {

Variable AuxLosses::total() const {
  Variable sum;
  for (const auto& [name, loss] : terms) sum = sum.defined() ? sum + loss : loss;
  return sum;
}

}  // namespace moelab
