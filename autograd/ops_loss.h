// autograd/ops_loss.h — differentiable training losses.
#pragma once

#include "autograd/variable.h"

namespace moelab {

// Mean cross-entropy of softmax(logits) against integer targets, fused and numerically stable.
// logits: [N, V] float, targets: [N] int32 in [0, V) or == ignore_index (row skipped) -> [].
// The loss is the mean over kept rows (0 if every row is ignored). Targets get no gradient.
Variable cross_entropy(const Variable& logits, const Tensor& targets, int ignore_index = -100);
// Mean squared error: mean((pred - target)^2). pred, target: the same shape -> [].
Variable mse_loss(const Variable& pred, const Variable& target);

}  // namespace moelab
