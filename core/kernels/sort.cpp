// core/kernels/sort.cpp — checks and dispatch for top-k selection and stable argsort.
//
//   topk     x: [..., n] float, 1 <= k <= n -> values: [..., k] (largest first), indices: [..., k] int32
//   argsort  keys: [..., n] int32           -> [..., n] int32, a stable ascending order of each row
// Both work on the last axis, row by row. Their orders are total, so every device returns the
// same answer:
//   - topk: larger values first; equal values (+0.0 and -0.0 are equal) lower index first; NaN
//     counts as larger than every number, +infinity included (as in PyTorch), so NaNs come first,
//     lower index first among them.
//   - argsort: smaller keys first; equal keys keep their original order (stable), which is what
//     sorting token assignments by expert needs.
// Empty rows: topk needs n >= 1 (k >= 1 must fit); argsort of n == 0 gives an empty result. Zero
// rows (a leading axis of size 0) give empty outputs for both. n must fit in int32 since the
// results are int32 positions.
#include <limits>

#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {

TopKResult topk(const Tensor& x, int k) {
  check_floating(x, "topk", "x");
  MOELAB_CHECK(x.rank() >= 1, "topk", "x must have at least one axis, got ", x.shape());
  const std::int64_t n = x.size(-1);
  MOELAB_CHECK(k >= 1 && k <= n, "topk", "k must be in [1, ", n, "] for x ", x.shape(), ", got ", k);
  MOELAB_CHECK(n <= std::numeric_limits<std::int32_t>::max(), "topk", "last axis of x ", x.shape(),
               " is too long for int32 indices");
  std::vector<std::int64_t> sizes = x.shape().sizes();
  sizes.back() = k;
  TopKResult result{Tensor::empty(Shape(sizes), x.dtype(), x.device()),
                    Tensor::empty(Shape(sizes), DType::Int32, x.device())};
  if (x.numel() == 0) return result;
  backend(x.device()).topk(x, k, result.values, result.indices);
  return result;
}

Tensor argsort(const Tensor& keys) {
  check_dtype(keys, DType::Int32, "argsort", "keys");
  MOELAB_CHECK(keys.rank() >= 1, "argsort", "keys must have at least one axis, got ", keys.shape());
  MOELAB_CHECK(keys.size(-1) <= std::numeric_limits<std::int32_t>::max(), "argsort", "last axis of keys ",
               keys.shape(), " is too long for int32 indices");
  Tensor out = Tensor::empty(keys.shape(), DType::Int32, keys.device());
  if (out.numel() == 0) return out;
  backend(keys.device()).argsort(keys, out);
  return out;
}

}  // namespace moelab::kernels
