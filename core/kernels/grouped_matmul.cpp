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
//
// The offsets are only checked for shape and dtype here; their values are checked by the backend
// where they live (core/backend.h), because reading them to the host would make a GPU wait for
// the routing that produced them. Rows past offsets[E] belong to no group (their output is 0),
// which lets a MoE layer keep N fixed when a capacity drops a data-dependent number of rows.
// Two bfloat16 operands give float32 results (bf16 products, float32 sums, as matmul's: see
// core/kernels/matmul.cpp); each backend decides how (core/cpu/grouped_matmul.cpp,
// cuda/grouped_matmul.cu).
#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {
namespace {

// offsets must be int32 [groups + 1] on x's device.
void check_offsets(const Tensor& offsets, std::int64_t groups, const Tensor& x, const char* op) {
  check_defined(offsets, op, "offsets");
  check_dtype(offsets, DType::Int32, op, "offsets");
  check_same_device(x, offsets, op);
  MOELAB_CHECK(offsets.rank() == 1 && offsets.size(0) == groups + 1, op, "offsets must be [E + 1] = [", groups + 1,
               "] for E = ", groups, " groups, got ", offsets.shape());
}

}  // namespace

Tensor grouped_matmul(const Tensor& x, const Tensor& w, const Tensor& offsets, bool trans_w) {
  const char* op = "grouped_matmul";
  const bool bf16 = check_product_operands(x, w, op, "x", "w");
  check_same_device(x, w, op);
  MOELAB_CHECK(x.rank() == 2, op, "x must be [N, in], got ", x.shape());
  MOELAB_CHECK(w.rank() == 3, op, "w must be [E, in, out]", (trans_w ? " (stored [E, out, in])" : ""), ", got ",
               w.shape());
  const std::int64_t n = x.size(0), in = x.size(1), groups = w.size(0);
  const std::int64_t w_in = trans_w ? w.size(2) : w.size(1), out_dim = trans_w ? w.size(1) : w.size(2);
  MOELAB_CHECK(w_in == in, op, "inner dimensions differ: x ", x.shape(), " @ w ", w.shape(), (trans_w ? "^T" : ""));
  check_offsets(offsets, groups, x, op);

  Tensor out = Tensor::empty({n, out_dim}, bf16 ? DType::Float32 : x.dtype(), x.device());  // [N, out]
  // The backend is called even for empty sizes (in == 0, N == 0): it checks the offsets' values.
  backend(x.device()).grouped_matmul(x, w, offsets, trans_w, out);
  return out;
}

Tensor grouped_matmul_weight_grad(const Tensor& x, const Tensor& dy, const Tensor& offsets, std::int64_t groups) {
  const char* op = "grouped_matmul_weight_grad";
  const bool bf16 = check_product_operands(x, dy, op, "x", "dy");
  check_same_device(x, dy, op);
  MOELAB_CHECK(x.rank() == 2 && dy.rank() == 2 && x.size(0) == dy.size(0), op,
               "needs x: [N, in] and dy: [N, out] with the same N, got x ", x.shape(), " and dy ", dy.shape());
  MOELAB_CHECK(groups >= 0, op, "groups must be >= 0, got ", groups);
  check_offsets(offsets, groups, x, op);

  Tensor dw = Tensor::empty({groups, x.size(1), dy.size(1)}, bf16 ? DType::Float32 : x.dtype(), x.device());  // [E, in, out]
  // Called for empty sizes too, so that the offsets' values are always checked.
  backend(x.device()).grouped_matmul_weight_grad(x, dy, offsets, dw);
  return dw;
}

}  // namespace moelab::kernels
