// autograd/record.h — how a differentiable op joins the graph.
//
// Every op in autograd/ops_*.cpp has the same shape:
//   1. compute the output Tensor with core/kernels.h,
//   2. return record("op", output, {inputs...}, grad_fn).
// record() creates a Node only when it is needed: when recording is on (no NoGradGuard) and at
// least one input requires a gradient. Otherwise the output is a plain Variable and grad_fn is
// dropped, so evaluation keeps no graph memory. It also refuses op names missing from the registry
// (autograd/op_list.h).
#pragma once

#include <vector>

#include "autograd/node.h"
#include "autograd/variable.h"

namespace moelab {

Variable record(const char* op, Tensor output, std::vector<Variable> inputs, GradFn grad_fn);

}  // namespace moelab
