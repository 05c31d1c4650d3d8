// autograd/ops_softmax.h — differentiable softmax (over any axis) and log-softmax (over the last).
#pragma once

#include "autograd/variable.h"

namespace moelab {

// x: [..., n] -> [..., n], y_i = exp(x_i) / sum_j exp(x_j), along `axis` (default the last;
// negative counts from the end): softmax(l, 1) on [B, m, S] normalises each column over m.
Variable softmax(const Variable& x, int axis = -1);
// x: [..., n] -> [..., n], y_i = x_i - log(sum_j exp(x_j))
Variable log_softmax(const Variable& x);

}  // namespace moelab
