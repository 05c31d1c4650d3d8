// autograd/ops_loss.cpp — cross-entropy (a fused kernel pair) and mean squared error (composed).
//
// cross_entropy: loss = (1/kept) * sum over kept rows i of (logsumexp(logits[i]) - logits[i, t_i]).
//   Its gradient, (softmax(logits[i]) - onehot(t_i)) * dloss / kept, comes from
//   kernels::cross_entropy_backward, which needs the per-row logsumexp saved by the forward.
//   Neither dloss nor kept is read back to the host: both reach the backward as device tensors.
// mse_loss is written from differentiable ops (sub, square, mean), so it needs no backward code.
#include "autograd/ops_loss.h"

#include <utility>

#include "autograd/grad_utils.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/record.h"

namespace moelab {

// logits: [N, V], targets: [N] int32 -> []
Variable cross_entropy(const Variable& logits, const Tensor& targets, int ignore_index) {
  check_dtype(targets, DType::Int32, "cross_entropy", "targets");
  kernels::CrossEntropyResult result = kernels::cross_entropy(logits.data(), targets, ignore_index);
  Tensor logsumexp = result.logsumexp, kept = result.kept;  // kept: [] float64, stays on the device
  return record("cross_entropy", std::move(result.loss), {logits},
                [targets, logsumexp, kept, ignore_index](const std::vector<Variable>& in, const Tensor& g) {
                  // dloss as float64 on the device: exactly the double the scale is formed from.
                  const Tensor dloss = g.to(DType::Float64);
                  return std::vector<Tensor>{
                      kernels::cross_entropy_backward(in[0].data(), targets, logsumexp, dloss, kept, ignore_index)};
                });
}

// pred, target: [...] (same shape) -> []
Variable mse_loss(const Variable& pred, const Variable& target) {
  MOELAB_CHECK(pred.shape() == target.shape(), "mse_loss", "pred ", pred.shape(), " and target ", target.shape(),
               " differ in shape");
  const Variable diff = pred - target;  // diff * diff: square(diff) to the last bit, gradient included
  return mean(diff * diff);
}

}  // namespace moelab
