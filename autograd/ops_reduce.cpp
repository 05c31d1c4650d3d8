// autograd/ops_reduce.cpp — reductions and their gradients.
//
// Every element of x contributes once to a sum, so d sum / dx is the output gradient repeated over
// the reduced axis (expand_axis); a mean divides that by the count. A maximum passes the gradient
// only to the element that won: with x seen as [outer, n, inner] and the kernel's argmax indices
// [outer, inner], scatter_add_last writes g[o, i] at position indices[o, i] of a zero row of n
// (the reduced axis is moved last for that, and back after).
#include "autograd/ops_reduce.h"

#include <utility>

#include "autograd/grad_utils.h"
#include "autograd/ops_shape.h"
#include "autograd/record.h"

namespace moelab {
namespace {

using namespace detail;
using Grads = std::vector<Tensor>;
using Inputs = std::vector<Variable>;

}  // namespace

// x: [...] -> []
Variable sum(const Variable& x) {
  return record("sum", kernels::sum(x.data()), {x}, [](const Inputs& in, const Tensor& g) {
    return Grads{add_t(filled(in[0].shape(), 0.0, g), g)};  // g repeated to x's shape
  });
}

// x: [...] -> []
Variable mean(const Variable& x) {
  return record("mean", kernels::mean(x.data()), {x}, [](const Inputs& in, const Tensor& g) {
    const double count = static_cast<double>(in[0].numel());
    return Grads{add_t(filled(in[0].shape(), 0.0, g), scale_t(g, 1.0 / count))};
  });
}

// x: [..., n, ...] -> axis removed (or kept as 1)
Variable sum(const Variable& x, int axis, bool keepdim) {
  return record("sum", kernels::sum(x.data(), axis, keepdim), {x}, [axis](const Inputs& in, const Tensor& g) {
    return Grads{expand_axis(g, in[0].shape(), axis)};
  });
}

// x: [..., n, ...] -> axis removed (or kept as 1)
Variable mean(const Variable& x, int axis, bool keepdim) {
  return record("mean", kernels::mean(x.data(), axis, keepdim), {x}, [axis](const Inputs& in, const Tensor& g) {
    const double count = static_cast<double>(in[0].size(axis));
    return Grads{expand_axis(scale_t(g, 1.0 / count), in[0].shape(), axis)};
  });
}

// x: [..., n, ...] -> axis removed (or kept as 1)
Variable max(const Variable& x, int axis, bool keepdim) {
  kernels::MaxResult result = kernels::max(x.data(), axis, keepdim);
  Tensor indices = result.indices;
  return record("max", std::move(result.values), {x}, [axis, indices](const Inputs& in, const Tensor& g) {
    const Shape& shape = in[0].shape();
    const int a = shape.normalize_axis(axis, "max");
    const std::int64_t outer = shape.outer(a), n = shape[a], inner = shape.inner(a);
    // [outer, inner, 1] scattered into [outer, inner, n], then n moved back to the middle.
    Tensor dx = kernels::scatter_add_last(g.reshape({outer, inner, 1}), indices.reshape({outer, inner, 1}), n);
    if (inner != 1) dx = kernels::permute(dx, {0, 2, 1});
    return Grads{dx.reshape(shape)};
  });
}

// x: [...] -> []: the maximum of all elements, as the maximum of x flattened.
Variable max(const Variable& x) { return max(reshape(x, Shape{x.numel()}), 0); }

}  // namespace moelab
