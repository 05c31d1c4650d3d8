// autograd/engine.h — the backward pass (called by Variable::backward; see engine.cpp).
#pragma once

#include "autograd/variable.h"

namespace moelab {

// Propagates `grad_output` (output's shape, dtype and device) from `output` back to every leaf
// that requires a gradient, adds into the leaves' grad(), then frees the graph it walked.
void run_backward(const Variable& output, const Tensor& grad_output);

}  // namespace moelab
