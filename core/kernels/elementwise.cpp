// core/kernels/elementwise.cpp — checks and dispatch for elementwise ops.
//
//   unary(op, x):            x: [...] float -> [...]
//   binary(op, a, b):        a, b: shapes that broadcast (core/broadcast.h) -> the broadcast shape
//   binary_scalar(op, a, s): a op s;  scalar_binary(op, s, b): s op b
//   relu_backward(x, grad):  x, grad: [...] -> [...]
//   add(a, b), mul(a, 2.0), exp(x), ...: the named forms of core/kernels.h (at the end)
//
// binary broadcasts the NumPy way (the rule is in core/kernels.h). Two backend entry points:
//   - Backend::binary for the three forms that already have a's shape as the result: b equal to
//     a, b with one element, b equal to a's trailing axes (a bias [d] on x [N, d], a [T, d] table
//     on [B, T, d]). Every layer's everyday case; a flat loop, no index arithmetic.
//   - Backend::binary_broadcast for everything else (a [N, 1] column on [N, d], a scalar or a
//     smaller tensor on the left, both sides repeated: [N, 1] op [1, M]), with the merged strided
//     plan of core/broadcast.h.
// Both compute every element with the same scalar function, so where both apply they agree bit
// for bit; the choice is speed only.
#include <cstddef>
#include <iterator>
#include <optional>

#include "core/backend.h"
#include "core/broadcast.h"
#include "core/kernels.h"
#include "core/kernels/elementwise_ops.h"

namespace moelab::kernels {

namespace {

// Whether b's shape equals the last b.rank() axes of a's shape (b == a included).
bool is_trailing_shape(const Shape& a, const Shape& b) {
  if (b.rank() > a.rank()) return false;
  const int offset = a.rank() - b.rank();
  for (int i = 0; i < b.rank(); ++i)
    if (b[i] != a[offset + i]) return false;
  return true;
}

// A value outside the enum (a cast from a bad integer) is refused here, so the backends' switches,
// generated from the list, cover every op they can be given.
void check_op(UnaryOp op, const char* where) {
  MOELAB_CHECK(static_cast<std::size_t>(op) < std::size(kUnaryOps), where, "op ", static_cast<int>(op),
               " is not a unary op of core/kernels/elementwise_ops.h");
}
void check_op(BinaryOp op, const char* where) {
  MOELAB_CHECK(static_cast<std::size_t>(op) < std::size(kBinaryOps), where, "op ", static_cast<int>(op),
               " is not a binary op of core/kernels/elementwise_ops.h");
}

}  // namespace

Tensor unary(UnaryOp op, const Tensor& x) {
  check_op(op, "unary");
  check_floating(x, "unary", "x");
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() > 0) backend(x.device()).unary(op, x, out);
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  check_op(op, "binary");
  check_floating(a, "binary", "a");
  check_floating(b, "binary", "b");
  check_same_device(a, b, "binary");
  MOELAB_CHECK(a.dtype() == b.dtype(), "binary", op_name(op), ": a is ", a.dtype(), " but b is ", b.dtype());
  const std::optional<Shape> shape = broadcast_shape(a.shape(), b.shape());
  MOELAB_CHECK(shape.has_value(), "binary", op_name(op), ": a ", a.shape(), " and b ", b.shape(),
               " do not broadcast (aligned from the right, each pair of axes must be equal or one of them 1)");
  Tensor out = Tensor::empty(*shape, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  if (*shape == a.shape() && (b.numel() == 1 || is_trailing_shape(a.shape(), b.shape())))
    backend(a.device()).binary(op, a, b, out);
  else
    backend(a.device()).binary_broadcast(op, a, b, broadcast_plan(a.shape(), b.shape()), out);
  return out;
}

Tensor binary_scalar(BinaryOp op, const Tensor& a, double b) {
  check_op(op, "binary_scalar");
  check_floating(a, "binary_scalar", "a");
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (out.numel() > 0) backend(a.device()).binary_scalar(op, a, b, /*scalar_first=*/false, out);
  return out;
}

Tensor scalar_binary(BinaryOp op, double a, const Tensor& b) {
  check_op(op, "scalar_binary");
  check_floating(b, "scalar_binary", "b");
  Tensor out = Tensor::empty(b.shape(), b.dtype(), b.device());
  if (out.numel() > 0) backend(b.device()).binary_scalar(op, b, a, /*scalar_first=*/true, out);
  return out;
}

Tensor relu_backward(const Tensor& x, const Tensor& grad) {
  check_floating(x, "relu_backward", "x");
  check_floating(grad, "relu_backward", "grad");
  check_same_device(x, grad, "relu_backward");
  MOELAB_CHECK(x.dtype() == grad.dtype(), "relu_backward", "x is ", x.dtype(), " but grad is ", grad.dtype());
  MOELAB_CHECK(x.shape() == grad.shape(), "relu_backward", "x ", x.shape(), " and grad ", grad.shape(),
               " differ in shape");
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() > 0) backend(x.device()).relu_backward(x, grad, out);
  return out;
}

// ---------------------------------------------------------------- the named forms
// kernels::add(a, b) is binary(BinaryOp::Add, a, b), and so on (declared in core/kernels.h), so
// that code which only computes need not include the op list and recompile when an op is added.
// a op b for tensors, a op b with a scalar on the right, and (sub, div, pow) on the left.
#define MOELAB_NAMED_BINARY(name, Op)                                                                \
  Tensor name(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Op, a, b); }              \
  Tensor name(const Tensor& a, double b) { return binary_scalar(BinaryOp::Op, a, b); }
#define MOELAB_NAMED_SCALAR_FIRST(name, Op) \
  Tensor name(double a, const Tensor& b) { return scalar_binary(BinaryOp::Op, a, b); }
#define MOELAB_NAMED_UNARY(name, Op) \
  Tensor name(const Tensor& x) { return unary(UnaryOp::Op, x); }

MOELAB_NAMED_BINARY(add, Add)
MOELAB_NAMED_BINARY(sub, Sub)
MOELAB_NAMED_SCALAR_FIRST(sub, Sub)
MOELAB_NAMED_BINARY(mul, Mul)
MOELAB_NAMED_BINARY(div, Div)
MOELAB_NAMED_SCALAR_FIRST(div, Div)
MOELAB_NAMED_BINARY(maximum, Maximum)
MOELAB_NAMED_BINARY(minimum, Minimum)
MOELAB_NAMED_BINARY(pow, Pow)
MOELAB_NAMED_SCALAR_FIRST(pow, Pow)
MOELAB_NAMED_BINARY(eq, Eq)
MOELAB_NAMED_BINARY(ne, Ne)
MOELAB_NAMED_BINARY(lt, Lt)
MOELAB_NAMED_BINARY(le, Le)
MOELAB_NAMED_BINARY(gt, Gt)
MOELAB_NAMED_BINARY(ge, Ge)

MOELAB_NAMED_UNARY(neg, Neg)
MOELAB_NAMED_UNARY(exp, Exp)
MOELAB_NAMED_UNARY(log, Log)
MOELAB_NAMED_UNARY(sqrt, Sqrt)
MOELAB_NAMED_UNARY(abs, Abs)
MOELAB_NAMED_UNARY(square, Square)
MOELAB_NAMED_UNARY(relu, Relu)
MOELAB_NAMED_UNARY(sigmoid, Sigmoid)
MOELAB_NAMED_UNARY(tanh, Tanh)
MOELAB_NAMED_UNARY(sin, Sin)
MOELAB_NAMED_UNARY(cos, Cos)
MOELAB_NAMED_UNARY(reciprocal, Reciprocal)

#undef MOELAB_NAMED_BINARY
#undef MOELAB_NAMED_SCALAR_FIRST
#undef MOELAB_NAMED_UNARY

}  // namespace moelab::kernels
