// autograd/ops_compare.cpp — see ops_compare.h.
#include "autograd/ops_compare.h"

#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"
#include "core/error.h"
#include "core/kernels.h"

namespace moelab {

// The comparisons give constant masks: the named kernel forms (core/kernels.h) on the data.
Tensor eq(const Variable& a, const Variable& b) { return kernels::eq(a.data(), b.data()); }
Tensor ne(const Variable& a, const Variable& b) { return kernels::ne(a.data(), b.data()); }
Tensor lt(const Variable& a, const Variable& b) { return kernels::lt(a.data(), b.data()); }
Tensor le(const Variable& a, const Variable& b) { return kernels::le(a.data(), b.data()); }
Tensor gt(const Variable& a, const Variable& b) { return kernels::gt(a.data(), b.data()); }
Tensor ge(const Variable& a, const Variable& b) { return kernels::ge(a.data(), b.data()); }
Tensor eq(const Variable& a, double s) { return kernels::eq(a.data(), s); }
Tensor ne(const Variable& a, double s) { return kernels::ne(a.data(), s); }
Tensor lt(const Variable& a, double s) { return kernels::lt(a.data(), s); }
Tensor le(const Variable& a, double s) { return kernels::le(a.data(), s); }
Tensor gt(const Variable& a, double s) { return kernels::gt(a.data(), s); }
Tensor ge(const Variable& a, double s) { return kernels::ge(a.data(), s); }

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
      kernels::ne(kernels::cast(cond, DType::Float64), 0.0).reshape({n, 1}), DType::Int32);
  return reshape(gather_last(both, take_a), a.shape());
}

}  // namespace moelab
