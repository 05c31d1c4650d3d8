// autograd/ops_softmax.h — differentiable softmax and log-softmax over the last axis.
#pragma once

#include "autograd/variable.h"

namespace moelab {

// x: [..., n] -> [..., n], y_i = exp(x_i) / sum_j exp(x_j)
Variable softmax(const Variable& x);
// x: [..., n] -> [..., n], y_i = x_i - log(sum_j exp(x_j))
Variable log_softmax(const Variable& x);

}  // namespace moelab
