// core/kernels/softmax.cpp — checks and dispatch for softmax (over any axis) and log_softmax
// (over the last axis).
//
//   softmax(x, axis)                x: [..., n, ...] -> same shape, normalised along axis
//   softmax_backward(y, dy, axis)   y, dy -> dx, all the same shape   (y: softmax's output)
//   log_softmax(x)                  x: [..., n] -> [..., n]
//   log_softmax_backward(y, dy)                                        (y: log_softmax's output)
// The backend sees softmax's tensors as [outer, n, inner] (core/backend.h), as the reductions.
//
// x needs at least one axis (a 0-d tensor has no last axis). Empty inputs, including an empty
// last axis ([N, 0]), are allowed and give an empty output: there is no row to normalise, so
// nothing is computed. The backwards take the forward's output, not its input, because both
// gradients are cheapest written in terms of y (see core/cpu/softmax.cpp for the maths).
#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {
namespace {

void check_input(const Tensor& x, const char* op) {
  check_floating(x, op, "x");
  MOELAB_CHECK(x.rank() >= 1, op, "x must have at least one axis, got a 0-d tensor");
}

void check_backward_inputs(const Tensor& y, const Tensor& dy, const char* op) {
  check_floating(y, op, "y");
  check_floating(dy, op, "dy");
  check_same_device(y, dy, op);
  MOELAB_CHECK(y.dtype() == dy.dtype(), op, "y is ", y.dtype(), " but dy is ", dy.dtype());
  MOELAB_CHECK(y.shape() == dy.shape(), op, "y ", y.shape(), " and dy ", dy.shape(), " differ in shape");
  MOELAB_CHECK(y.rank() >= 1, op, "y must have at least one axis, got a 0-d tensor");
}

}  // namespace

Tensor softmax(const Tensor& x, int axis) {
  check_input(x, "softmax");
  const int ax = x.shape().normalize_axis(axis, "softmax");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (y.numel() > 0) backend(x.device()).softmax(x, x.shape().outer(ax), x.shape()[ax], x.shape().inner(ax), y);
  return y;
}

Tensor log_softmax(const Tensor& x) {
  check_input(x, "log_softmax");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (y.numel() > 0) backend(x.device()).log_softmax(x, y);
  return y;
}

Tensor softmax_backward(const Tensor& y, const Tensor& dy, int axis) {
  check_backward_inputs(y, dy, "softmax_backward");
  const int ax = y.shape().normalize_axis(axis, "softmax_backward");
  Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
  if (dx.numel() > 0)
    backend(y.device()).softmax_backward(y, dy, y.shape().outer(ax), y.shape()[ax], y.shape().inner(ax), dx);
  return dx;
}

Tensor log_softmax_backward(const Tensor& y, const Tensor& dy) {
  check_backward_inputs(y, dy, "log_softmax_backward");
  Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
  if (dx.numel() > 0) backend(y.device()).log_softmax_backward(y, dy, dx);
  return dx;
}

}  // namespace moelab::kernels
