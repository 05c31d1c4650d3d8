// core/kernels/grouped_matmul.cpp — checks and dispatch for grouped matrix products.
//
// A mixture-of-experts layer sorts its tokens by expert, so expert e's rows form one contiguous
// block x[offsets[e] : offsets[e+1]]. The grouped product multiplies each block by that expert's
// own weight matrix in one call, instead of E slices, E matmuls and a concat:
//
//   x: [N, in] (rows sorted by group), w: [E, in, out] (or [E, out, in] when trans_w),
//   offsets: int32 [E + 1], 0 = offsets[0] <= offsets[1] <= ... <= offsets[E] = N
//   out[offsets[e] : offsets[e+1]] = x[offsets[e] : offsets[e+1]] @ op(w[e])      -> [N, out]
//
// Its weight gradient is the per-group outer product sum dw[e] = x_e^T @ dy_e -> [E, in, out].
// The offsets are read to the host here (to validate them) and handed to the backend as int64s.
#include <vector>

#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {
namespace {

// Validates offsets: int32 [groups + 1], non-decreasing, from 0 to rows. Returns them on the host.
std::vector<std::int64_t> read_offsets(const Tensor& offsets, std::int64_t groups, std::int64_t rows,
                                       const Tensor& x, const char* op) {
  check_defined(offsets, op, "offsets");
  check_dtype(offsets, DType::Int32, op, "offsets");
  check_same_device(x, offsets, op);
  MOELAB_CHECK(offsets.rank() == 1 && offsets.size(0) == groups + 1, op, "offsets must be [E + 1] = [", groups + 1,
               "] for E = ", groups, " groups, got ", offsets.shape());
  const std::vector<std::int32_t> host = offsets.to_vector<std::int32_t>();
  std::vector<std::int64_t> out(host.begin(), host.end());
  MOELAB_CHECK(out.front() == 0, op, "offsets[0] must be 0, got ", out.front());
  for (std::int64_t e = 0; e < groups; ++e)
    MOELAB_CHECK(out[e] <= out[e + 1], op, "offsets must be non-decreasing, but offsets[", e, "] = ", out[e],
                 " > offsets[", e + 1, "] = ", out[e + 1]);
  MOELAB_CHECK(out.back() == rows, op, "offsets[E] must equal the number of rows N = ", rows, ", got ", out.back());
  return out;
}

}  // namespace

Tensor grouped_matmul(const Tensor& x, const Tensor& w, const Tensor& offsets, bool trans_w) {
  const char* op = "grouped_matmul";
  check_defined(x, op, "x");
  check_defined(w, op, "w");
  check_floating(x, op, "x");
  check_floating(w, op, "w");
  check_same_device(x, w, op);
  MOELAB_CHECK(x.dtype() == w.dtype(), op, "x is ", x.dtype(), " but w is ", w.dtype());
  MOELAB_CHECK(x.rank() == 2, op, "x must be [N, in], got ", x.shape());
  MOELAB_CHECK(w.rank() == 3, op, "w must be [E, in, out]", (trans_w ? " (stored [E, out, in])" : ""), ", got ",
               w.shape());
  const std::int64_t n = x.size(0), in = x.size(1), groups = w.size(0);
  const std::int64_t w_in = trans_w ? w.size(2) : w.size(1), out_dim = trans_w ? w.size(1) : w.size(2);
  MOELAB_CHECK(w_in == in, op, "inner dimensions differ: x ", x.shape(), " @ w ", w.shape(), (trans_w ? "^T" : ""));
  const std::vector<std::int64_t> offs = read_offsets(offsets, groups, n, x, op);

  Tensor out = Tensor::empty({n, out_dim}, x.dtype(), x.device());  // [N, out]
  if (out.numel() == 0) return out;
  if (in == 0) {
    fill(out, 0.0);
    return out;
  }
  backend(x.device()).grouped_matmul(x, w, offs, trans_w, out);
  return out;
}

Tensor grouped_matmul_weight_grad(const Tensor& x, const Tensor& dy, const Tensor& offsets, std::int64_t groups) {
  const char* op = "grouped_matmul_weight_grad";
  check_defined(x, op, "x");
  check_defined(dy, op, "dy");
  check_floating(x, op, "x");
  check_floating(dy, op, "dy");
  check_same_device(x, dy, op);
  MOELAB_CHECK(x.dtype() == dy.dtype(), op, "x is ", x.dtype(), " but dy is ", dy.dtype());
  MOELAB_CHECK(x.rank() == 2 && dy.rank() == 2 && x.size(0) == dy.size(0), op,
               "needs x: [N, in] and dy: [N, out] with the same N, got x ", x.shape(), " and dy ", dy.shape());
  MOELAB_CHECK(groups >= 0, op, "groups must be >= 0, got ", groups);
  const std::vector<std::int64_t> offs = read_offsets(offsets, groups, x.size(0), x, op);

  Tensor dw = Tensor::empty({groups, x.size(1), dy.size(1)}, x.dtype(), x.device());  // [E, in, out]
  if (dw.numel() == 0) return dw;
  backend(x.device()).grouped_matmul_weight_grad(x, dy, offs, dw);
  return dw;
}

}  // namespace moelab::kernels
