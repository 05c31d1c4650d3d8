// autograd/ops_compare.cpp — see ops_compare.h.
#include "autograd/ops_compare.h"

#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"
#include "core/error.h"
#include "core/kernels.h"

namespace moelab {

namespace {

using kernels::BinaryOp;

Tensor compare(BinaryOp op, const Variable& a, const Variable& b) { return kernels::binary(op, a.data(), b.data()); }
Tensor compare(BinaryOp op, const Variable& a, double s) { return kernels::binary_scalar(op, a.data(), s); }

}  // namespace

Tensor eq(const Variable& a, const Variable& b) { return compare(BinaryOp::Eq, a, b); }
Tensor ne(const Variable& a, const Variable& b) { return compare(BinaryOp::Ne, a, b); }
Tensor lt(const Variable& a, const Variable& b) { return compare(BinaryOp::Lt, a, b); }
Tensor le(const Variable& a, const Variable& b) { return compare(BinaryOp::Le, a, b); }
Tensor gt(const Variable& a, const Variable& b) { return compare(BinaryOp::Gt, a, b); }
Tensor ge(const Variable& a, const Variable& b) { return compare(BinaryOp::Ge, a, b); }
Tensor eq(const Variable& a, double s) { return compare(BinaryOp::Eq, a, s); }
Tensor ne(const Variable& a, double s) { return compare(BinaryOp::Ne, a, s); }
Tensor lt(const Variable& a, double s) { return compare(BinaryOp::Lt, a, s); }
Tensor le(const Variable& a, double s) { return compare(BinaryOp::Le, a, s); }
Tensor gt(const Variable& a, double s) { return compare(BinaryOp::Gt, a, s); }
Tensor ge(const Variable& a, double s) { return compare(BinaryOp::Ge, a, s); }

Variable where(const Tensor& cond, const Variable& a, const Variable& b) {
  MOELAB_CHECK(cond.defined() && a.defined() && b.defined() && cond.shape() == a.shape() && a.shape() == b.shape(),
               "where", "cond, a and b must have one shape, got ", cond.shape(), ", ", a.shape(), " and ", b.shape());
  MOELAB_CHECK(a.dtype() == b.dtype() && a.device() == b.device() && cond.device() == a.device(), "where",
               "a and b must share a dtype and a device with cond's device, got ", a.dtype(), " on ", a.device(),
               ", ", b.dtype(), " on ", b.device(), " and cond on ", cond.device());
  const std::int64_t n = a.numel();
  // Column 0 holds b, column 1 holds a; the index picks column 1 where cond != 0.
  const Variable both = concat({reshape(b, {n, 1}), reshape(a, {n, 1})}, 1);  // [n, 2]
  const Tensor take_a = kernels::cast(
      kernels::binary_scalar(BinaryOp::Ne, kernels::cast(cond, DType::Float64), 0.0).reshape({n, 1}), DType::Int32);
  return reshape(gather_last(both, take_a), a.shape());
}

}  // namespace moelab
