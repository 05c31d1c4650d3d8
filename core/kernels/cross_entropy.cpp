// core/kernels/cross_entropy.cpp — checks and dispatch for the fused cross-entropy loss.
//
//   cross_entropy(logits, targets, ignore_index)
//       logits: [N, V] float, targets: [N] int32 -> loss: [], logsumexp: [N], kept: [] float64
//   cross_entropy_backward(logits, targets, logsumexp, dloss: [] float64, kept: [] float64, ignore_index)
//       -> dlogits: [N, V]
//
// Each target must be a class in [0, V) or equal ignore_index (that row is skipped). An
// out-of-range target would read outside its row, so it is an error, reported with the row and the
// value. The hot path never waits on the host (README), so that check is not done here on a
// host copy of the targets: the backend does it where the targets live (the CPU scans them before
// computing and throws at once; CUDA flags the bad row in the kernel and throws at the next
// synchronisation, see core/kernels/index.cpp). Likewise the number of kept rows never leaves the
// device: the forward writes it to `kept`, and the backward's backend forms
// scale = double(dloss) / kept there (0 when no row is kept, so the gradient is all zeros).
// V must be at least 1 (a row with no classes has no loss); N may be 0 (then loss = 0, kept = 0).
// The overload of the backward that takes host values (dloss, kept) is for tests and hand-written
// gradients; it still checks kept against the targets on the host, as this file always did.
// The maths is in core/cpu/cross_entropy.cpp.
#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {
namespace {

// Checks logits, targets and their agreement (shapes, dtypes, device); not the target values.
void check_logits_and_targets(const Tensor& logits, const Tensor& targets, const char* op) {
  check_floating(logits, op, "logits");
  check_dtype(targets, DType::Int32, op, "targets");
  check_same_device(logits, targets, op);
  MOELAB_CHECK(logits.rank() == 2, op, "logits must be [N, V], got ", logits.shape());
  MOELAB_CHECK(targets.rank() == 1 && targets.size(0) == logits.size(0), op, "targets must be [N] = [",
               logits.size(0), "] for logits ", logits.shape(), ", got ", targets.shape());
  MOELAB_CHECK(logits.size(1) >= 1, op, "logits ", logits.shape(), " have no classes");
}

// A [] tensor holding `value`, of `dtype` on `device` (a host->device copy when not the CPU).
Tensor scalar_on(double value, DType dtype, Device device) {
  Tensor t = Tensor::empty(Shape{}, dtype, Device::cpu());
  fill(t, value);
  return t.to(device);
}

}  // namespace

std::int64_t CrossEntropyResult::kept_count() const {
  return static_cast<std::int64_t>(kept.to(Device::cpu()).item<double>());
}

CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, int ignore_index) {
  check_logits_and_targets(logits, targets, "cross_entropy");
  CrossEntropyResult result;
  result.loss = Tensor::empty(Shape{}, logits.dtype(), logits.device());
  result.logsumexp = Tensor::empty(Shape{logits.size(0)}, logits.dtype(), logits.device());
  result.kept = Tensor::empty(Shape{}, DType::Float64, logits.device());
  if (logits.size(0) == 0) {
    fill(result.loss, 0.0);
    fill(result.kept, 0.0);
    return result;
  }
  backend(logits.device()).cross_entropy(logits, targets, ignore_index, result.loss, result.logsumexp, result.kept);
  return result;
}

Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& logsumexp,
                              const Tensor& dloss, const Tensor& kept, int ignore_index) {
  const char* op = "cross_entropy_backward";
  check_logits_and_targets(logits, targets, op);
  check_floating(logsumexp, op, "logsumexp");
  check_same_device(logits, logsumexp, op);
  MOELAB_CHECK(logsumexp.dtype() == logits.dtype(), op, "logsumexp is ", logsumexp.dtype(), " but logits are ",
               logits.dtype());
  MOELAB_CHECK(logsumexp.shape() == Shape{logits.size(0)}, op, "logsumexp must be [N] = [", logits.size(0),
               "] for logits ", logits.shape(), ", got ", logsumexp.shape());
  check_dtype(dloss, DType::Float64, op, "dloss");
  check_same_device(logits, dloss, op);
  MOELAB_CHECK(dloss.numel() == 1, op, "dloss must be one value, got ", dloss.shape());
  check_dtype(kept, DType::Float64, op, "kept");
  check_same_device(logits, kept, op);
  MOELAB_CHECK(kept.numel() == 1, op, "kept must be one value (the forward's), got ", kept.shape());
  Tensor dlogits = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  if (dlogits.numel() == 0) return dlogits;
  backend(logits.device()).cross_entropy_backward(logits, targets, logsumexp, dloss, kept, ignore_index, dlogits);
  return dlogits;
}

Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& logsumexp, double dloss,
                              std::int64_t kept, int ignore_index) {
  const char* op = "cross_entropy_backward";
  check_logits_and_targets(logits, targets, op);
  const Tensor host = targets.to(Device::cpu());
  const std::int32_t* t = host.data<std::int32_t>();
  std::int64_t counted = 0;
  for (std::int64_t i = 0; i < host.numel(); ++i) counted += t[i] != ignore_index;
  MOELAB_CHECK(kept == counted, op, "kept = ", kept, " but the targets keep ", counted, " of ", logits.size(0),
               " rows (ignore_index ", ignore_index, "); pass the forward's kept");
  return cross_entropy_backward(logits, targets, logsumexp, scalar_on(dloss, DType::Float64, logits.device()),
                                scalar_on(static_cast<double>(kept), DType::Float64, logits.device()), ignore_index);
}

}  // namespace moelab::kernels
