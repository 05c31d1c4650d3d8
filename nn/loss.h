// nn/loss.h — training losses over model outputs, in the namespace moelab::nn.
//
//   nn::cross_entropy  logits: [..., V] (e.g. [B, T, V]), targets: [...] int32 (e.g. [B, T]) -> []
//       mean over kept positions of -log softmax(logits)[target]; positions whose target equals
//       ignore_index are skipped (padding, prompt tokens); 0 when every position is skipped.
//       The leading axes are flattened (views) and the fused autograd cross_entropy does the rest.
//   nn::mse_loss       pred, target: the same shape -> [], mean((pred - target)^2)
// They live in moelab::nn because autograd's moelab::cross_entropy / mse_loss already take the
// flat [N, V] forms with the same argument types.
#pragma once

#include "autograd/variable.h"

namespace moelab::nn {

// logits: [..., V], targets: [...] int32 in [0, V) or == ignore_index -> []
Variable cross_entropy(const Variable& logits, const Tensor& targets, int ignore_index = -100);
// pred, target: [...] -> []
Variable mse_loss(const Variable& pred, const Variable& target);

}  // namespace moelab::nn
