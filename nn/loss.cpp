// nn/loss.cpp — flatten [..., V] logits to [N, V] and call the fused autograd losses.
#include "nn/loss.h"

#include "autograd/ops.h"

namespace moelab::nn {

// logits: [..., V], targets: [...] -> []
Variable cross_entropy(const Variable& logits, const Tensor& targets, int ignore_index) {
  check_defined(logits.data(), "nn::cross_entropy", "logits");
  check_dtype(targets, DType::Int32, "nn::cross_entropy", "targets");
  MOELAB_CHECK(logits.rank() >= 1, "nn::cross_entropy", "logits must be [..., V], got ", logits.shape());
  std::vector<std::int64_t> lead = logits.shape().sizes();
  const std::int64_t vocab = lead.back();
  lead.pop_back();
  MOELAB_CHECK(targets.shape() == Shape(lead), "nn::cross_entropy", "targets must be ", Shape(lead), " for logits ",
               logits.shape(), ", got ", targets.shape());
  const std::int64_t n = targets.numel();
  const Variable flat = logits.rank() == 2 ? logits : reshape(logits, {n, vocab});
  return moelab::cross_entropy(flat, targets.rank() == 1 ? targets : targets.reshape({n}), ignore_index);
}

// pred, target: [...] -> []
Variable mse_loss(const Variable& pred, const Variable& target) { return moelab::mse_loss(pred, target); }

}  // namespace moelab::nn
