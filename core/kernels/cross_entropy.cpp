// core/kernels/cross_entropy.cpp — checks and dispatch for the fused cross-entropy loss.
//
//   cross_entropy(logits, targets, ignore_index)
//       logits: [N, V] float, targets: [N] int32 -> loss: [], logsumexp: [N], kept
//   cross_entropy_backward(logits, targets, logsumexp, dloss, kept, ignore_index)
//       -> dlogits: [N, V]
//
// Each target must be a class in [0, V) or equal ignore_index (that row is skipped). The range
// check reads the targets on the host (copying them there first when they live on a GPU): an
// out-of-range index would otherwise read outside the row, so it is an error, reported with the
// row and the value. V must be at least 1 (a row with no classes has no loss); N may be 0 (then
// loss = 0 and kept = 0).
// The backward receives `kept` from the forward and checks it against the targets, then hands
// the backend scale = dloss / kept (0 when no row is kept, so the gradient is all zeros).
// The maths is in core/cpu/cross_entropy.cpp.
#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {
namespace {

// Checks logits, targets and their agreement; returns how many rows are kept (not ignored).
std::int64_t check_logits_and_targets(const Tensor& logits, const Tensor& targets, int ignore_index, const char* op) {
  check_floating(logits, op, "logits");
  check_dtype(targets, DType::Int32, op, "targets");
  check_same_device(logits, targets, op);
  MOELAB_CHECK(logits.rank() == 2, op, "logits must be [N, V], got ", logits.shape());
  MOELAB_CHECK(targets.rank() == 1 && targets.size(0) == logits.size(0), op, "targets must be [N] = [",
               logits.size(0), "] for logits ", logits.shape(), ", got ", targets.shape());
  const std::int64_t vocab = logits.size(1);
  MOELAB_CHECK(vocab >= 1, op, "logits ", logits.shape(), " have no classes");
  const Tensor host = targets.to(Device::cpu());
  const std::int32_t* t = host.data<std::int32_t>();
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    if (t[i] == ignore_index) continue;
    MOELAB_CHECK(t[i] >= 0 && t[i] < vocab, op, "targets[", i, "] = ", t[i], " is outside [0, ", vocab,
                 ") for logits ", logits.shape(), " and is not ignore_index (", ignore_index, ")");
    ++kept;
  }
  return kept;
}

}  // namespace

CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, int ignore_index) {
  const std::int64_t kept = check_logits_and_targets(logits, targets, ignore_index, "cross_entropy");
  CrossEntropyResult result;
  result.loss = Tensor::empty(Shape{}, logits.dtype(), logits.device());
  result.logsumexp = Tensor::empty(Shape{logits.size(0)}, logits.dtype(), logits.device());
  if (logits.size(0) == 0) {
    fill(result.loss, 0.0);
    return result;
  }
  result.kept = backend(logits.device()).cross_entropy(logits, targets, ignore_index, result.loss, result.logsumexp);
  MOELAB_CHECK(result.kept == kept, "cross_entropy", "internal error: the backend kept ", result.kept,
               " rows but the targets keep ", kept);
  return result;
}

Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& logsumexp, double dloss,
                              std::int64_t kept, int ignore_index) {
  const char* op = "cross_entropy_backward";
  const std::int64_t counted = check_logits_and_targets(logits, targets, ignore_index, op);
  check_floating(logsumexp, op, "logsumexp");
  check_same_device(logits, logsumexp, op);
  MOELAB_CHECK(logsumexp.dtype() == logits.dtype(), op, "logsumexp is ", logsumexp.dtype(), " but logits are ",
               logits.dtype());
  MOELAB_CHECK(logsumexp.shape() == Shape{logits.size(0)}, op, "logsumexp must be [N] = [", logits.size(0),
               "] for logits ", logits.shape(), ", got ", logsumexp.shape());
  MOELAB_CHECK(kept == counted, op, "kept = ", kept, " but the targets keep ", counted, " of ", logits.size(0),
               " rows (ignore_index ", ignore_index, "); pass the forward's kept");
  Tensor dlogits = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  if (dlogits.numel() == 0) return dlogits;
  const double scale = kept > 0 ? dloss / static_cast<double>(kept) : 0.0;
  backend(logits.device()).cross_entropy_backward(logits, targets, logsumexp, scale, ignore_index, dlogits);
  return dlogits;
}

}  // namespace moelab::kernels
