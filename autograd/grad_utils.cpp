// autograd/grad_utils.cpp — the shared backward helpers (see grad_utils.h).
#include "autograd/grad_utils.h"

#include <vector>

namespace moelab::detail {

using kernels::BinaryOp;

Tensor add_t(const Tensor& a, const Tensor& b) { return kernels::add(a, b); }
Tensor sub_t(const Tensor& a, const Tensor& b) { return kernels::sub(a, b); }
Tensor mul_t(const Tensor& a, const Tensor& b) { return kernels::mul(a, b); }
Tensor div_t(const Tensor& a, const Tensor& b) { return kernels::div(a, b); }
Tensor scale_t(const Tensor& a, double s) { return kernels::mul(a, s); }
Tensor neg_t(const Tensor& a) { return kernels::neg(a); }

Tensor filled(const Shape& shape, double value, const Tensor& like) {
  Tensor out = Tensor::empty(shape, like.dtype(), like.device());
  kernels::fill(out, value);
  return out;
}

double scalar_value(const Tensor& x) {
  check_floating(x, "scalar_value");
  MOELAB_CHECK(x.numel() == 1, "scalar_value", "needs one element, got ", x.shape());
  return x.dtype() == DType::Float64 ? x.item<double>() : static_cast<double>(x.item<float>());
}

Tensor reduce_to_shape(const Tensor& grad, const Shape& shape) {
  const Shape& out = grad.shape();
  if (out == shape) return grad;
  if (shape.numel() == 1) return kernels::sum(grad).reshape(shape);  // scalar operand: every element used it
  const int rank = out.rank(), lead = out.rank() - shape.rank();
  bool trailing = true;  // shape == out's last axes: sum the leading copies, one reduction
  for (int i = 0; i < shape.rank(); ++i) trailing = trailing && shape[i] == out[lead + i];
  if (trailing) {
    const std::int64_t inner = shape.numel();
    return kernels::sum(grad.reshape({grad.numel() / inner, inner}), 0).reshape(shape);
  }
  // General: view grad as runs of neighbouring axes that are all summed (the operand had 1 there,
  // or no axis at all) or all kept, each run merged into one axis; drop out's size-1 axes. Then
  // sum the summed runs one at a time, innermost first: a fixed order of fixed-order sums.
  std::vector<std::int64_t> sizes;
  std::vector<bool> summed;
  for (int i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;
    const bool s = i < lead || shape[i - lead] == 1;
    if (!sizes.empty() && summed.back() == s) {
      sizes.back() *= out[i];
    } else {
      sizes.push_back(out[i]);
      summed.push_back(s);
    }
  }
  Tensor g = grad.reshape(Shape(sizes));
  for (int k = static_cast<int>(sizes.size()) - 1; k >= 0; --k)
    if (summed[static_cast<std::size_t>(k)]) g = kernels::sum(g, k, /*keepdim=*/true);
  return g.reshape(shape);
}

Tensor expand_axis(const Tensor& grad, const Shape& shape, int axis) {
  axis = shape.normalize_axis(axis, "expand_axis");
  const std::int64_t outer = shape.outer(axis), n = shape[axis], inner = shape.inner(axis);
  // Broadcasting repeats a tensor along *leading* axes, so build [n, outer, inner] as
  // zeros + grad (grad: [outer, inner] is the trailing shape), then move n to the middle.
  // 0 + g == g exactly, on every device.
  Tensor repeated = add_t(filled({n, outer, inner}, 0.0, grad), grad.reshape({outer, inner}));
  if (outer == 1) return repeated.reshape(shape);
  return kernels::permute(repeated, {1, 0, 2}).reshape(shape);
}

Tensor pad_axis(const Tensor& grad, const Shape& shape, int axis, std::int64_t start) {
  axis = shape.normalize_axis(axis, "pad_axis");
  const std::int64_t length = grad.size(axis), after = shape[axis] - start - length;
  if (start == 0 && after == 0) return grad;
  std::vector<Tensor> pieces;
  auto zeros_of = [&](std::int64_t size) {
    Shape piece = shape;
    piece[axis] = size;
    return filled(piece, 0.0, grad);
  };
  if (start > 0) pieces.push_back(zeros_of(start));
  pieces.push_back(grad);
  if (after > 0) pieces.push_back(zeros_of(after));
  return kernels::concat(pieces, axis);
}

}  // namespace moelab::detail
