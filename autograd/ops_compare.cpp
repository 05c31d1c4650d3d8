// autograd/ops_compare.cpp — see ops_compare.h.
#include "autograd/ops_compare.h"

#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"
#include "core/broadcast.h"
#include "core/error.h"
#include "core/factories.h"
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
  MOELAB_CHECK(cond.defined() && a.defined() && b.defined(), "where", "cond, a and b must be defined");
  MOELAB_CHECK(a.dtype() == b.dtype() && a.device() == b.device() && cond.device() == a.device(), "where",
               "a and b must share a dtype and a device with cond's device, got ", a.dtype(), " on ", a.device(),
               ", ", b.dtype(), " on ", b.device(), " and cond on ", cond.device());
  const std::optional<Shape> ab = broadcast_shape(a.shape(), b.shape());
  const std::optional<Shape> out = ab ? broadcast_shape(cond.shape(), *ab) : std::nullopt;
  MOELAB_CHECK(out.has_value(), "where", "cond ", cond.shape(), ", a ", a.shape(), " and b ", b.shape(),
               " do not broadcast to one shape");
  // Each operand broadcast to the output's shape by adding zeros: add's backward sums a
  // broadcast operand's gradient back over the axes it was repeated along.
  const Tensor zero = zeros(*out, a.dtype(), a.device());
  const Variable full_a = a.shape() == *out ? a : a + Variable(zero);
  const Variable full_b = b.shape() == *out ? b : b + Variable(zero);
  const Tensor full_cond = kernels::ne(kernels::add(kernels::cast(cond, DType::Float64),
                                                    zeros(*out, DType::Float64, cond.device())),
                                       0.0);
  const std::int64_t n = full_a.numel();
  // Column 0 holds b, column 1 holds a; the index picks column 1 where cond != 0.
  const Variable both = concat({reshape(full_b, {n, 1}), reshape(full_a, {n, 1})}, 1);  // [n, 2]
  const Tensor take_a = kernels::cast(full_cond.reshape({n, 1}), DType::Int32);
  return reshape(gather_last(both, take_a), *out);
}

Variable where(const Tensor& cond, const Variable& a, double b) {
  MOELAB_CHECK(a.defined(), "where", "a must be defined");
  return where(cond, a, Variable(full({}, b, a.dtype(), a.device())));
}

Variable where(const Tensor& cond, double a, const Variable& b) {
  MOELAB_CHECK(b.defined(), "where", "b must be defined");
  return where(cond, Variable(full({}, a, b.dtype(), b.device())), b);
}

}  // namespace moelab
