// core/kernels/reduce.cpp — checks and dispatch for sum, mean and max.
//
//   sum(x)                   x: [...] -> []         (0 for an empty x)
//   sum(x, axis, keepdim)    x: [A, n, B] -> [A, B] (or [A, 1, B] with keepdim)
//   mean(x), mean(x, axis)   the sum divided by the number of terms; x (or the axis) must not be
//                            empty: the mean of nothing is undefined, so it is an error, not NaN
//   max(x)                   x: [...] -> [], x not empty
//   max(x, axis, keepdim)    -> values and int32 indices of the first maximum along axis
//
// Every reduction is handed to the backend as x seen as [outer, n, inner] (core/backend.h): outer
// is the product of the sizes before the axis, inner of those after it. Axes may be negative.
// Only float32/float64 inputs are accepted. The output of a float32 reduction is float32 (the
// backend accumulates in double and rounds once at the end; see core/cpu/reduce.cpp).
// mean is sum followed by a division by n in the tensor's dtype.
#include <limits>

#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {
namespace {

// x's shape with `axis` removed, or set to 1 with keepdim.
Shape reduced_shape(const Shape& shape, int axis, bool keepdim) {
  std::vector<std::int64_t> sizes = shape.sizes();
  if (keepdim)
    sizes[static_cast<std::size_t>(axis)] = 1;
  else
    sizes.erase(sizes.begin() + axis);
  return Shape(std::move(sizes));
}

Tensor sum_impl(const Tensor& x, int axis, bool keepdim, const char* op) {
  const int ax = x.shape().normalize_axis(axis, op);
  Tensor out = Tensor::empty(reduced_shape(x.shape(), ax, keepdim), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  if (x.shape()[ax] == 0) {  // an empty sum is 0; backends never see n == 0
    fill(out, 0.0);
    return out;
  }
  backend(x.device()).sum(x, x.shape().outer(ax), x.shape()[ax], x.shape().inner(ax), out);
  return out;
}

}  // namespace

Tensor sum(const Tensor& x) {
  check_floating(x, "sum", "x");
  Tensor out = Tensor::empty(Shape{}, x.dtype(), x.device());
  if (x.numel() == 0)
    fill(out, 0.0);
  else
    backend(x.device()).sum(x, 1, x.numel(), 1, out);
  return out;
}

Tensor sum(const Tensor& x, int axis, bool keepdim) {
  check_floating(x, "sum", "x");
  return sum_impl(x, axis, keepdim, "sum");
}

Tensor mean(const Tensor& x) {
  check_floating(x, "mean", "x");
  MOELAB_CHECK(x.numel() > 0, "mean", "the mean of an empty tensor ", x.shape(), " is undefined");
  Tensor total = Tensor::empty(Shape{}, x.dtype(), x.device());
  backend(x.device()).sum(x, 1, x.numel(), 1, total);
  return div(total, static_cast<double>(x.numel()));
}

Tensor mean(const Tensor& x, int axis, bool keepdim) {
  check_floating(x, "mean", "x");
  const int ax = x.shape().normalize_axis(axis, "mean");
  MOELAB_CHECK(x.shape()[ax] > 0, "mean", "axis ", axis, " of ", x.shape(), " is empty: the mean of nothing is undefined");
  Tensor total = sum_impl(x, ax, keepdim, "mean");
  return div(total, static_cast<double>(x.shape()[ax]));
}

Tensor max(const Tensor& x) {
  check_floating(x, "max", "x");
  MOELAB_CHECK(x.numel() > 0, "max", "the maximum of an empty tensor ", x.shape(), " is undefined");
  Tensor out = Tensor::empty(Shape{}, x.dtype(), x.device());
  backend(x.device()).max(x, 1, x.numel(), 1, out, nullptr);
  return out;
}

MaxResult max(const Tensor& x, int axis, bool keepdim) {
  check_floating(x, "max", "x");
  const int ax = x.shape().normalize_axis(axis, "max");
  const std::int64_t n = x.shape()[ax];
  MOELAB_CHECK(n > 0, "max", "axis ", axis, " of ", x.shape(), " is empty: the maximum of nothing is undefined");
  MOELAB_CHECK(n <= std::numeric_limits<std::int32_t>::max(), "max", "axis ", axis, " of ", x.shape(),
               " is too long for int32 indices");
  const Shape shape = reduced_shape(x.shape(), ax, keepdim);
  MaxResult result{Tensor::empty(shape, x.dtype(), x.device()), Tensor::empty(shape, DType::Int32, x.device())};
  if (result.values.numel() == 0) return result;
  backend(x.device()).max(x, x.shape().outer(ax), n, x.shape().inner(ax), result.values, &result.indices);
  return result;
}

}  // namespace moelab::kernels
