// autograd/ops_elementwise.cpp — elementwise ops and their derivatives.
//
// With g = dL/d(out), out = f(a, b) elementwise:
//   add  da = g            db = g           sub  da = g        db = -g
//   mul  da = g * b        db = g * a       div  da = g / b    db = -g * a / b^2
//   max  da = g where a > b, db = the rest   pow  da = g * b * a^(b-1)   db = g * out * log(a)
// each computed in the broadcast output's shape, then summed back to its operand's shape over
// the axes along which that operand was repeated (reduce_to_shape: a bias [d] on [N, d] sums over
// N, a column [N, 1] on [N, d] over d, a 0-d scalar over everything).
// Unary derivatives use the saved input x or the saved output y, whichever is cheaper:
//   exp y   log 1/x   sqrt 1/(2y)   square 2x   sigmoid y(1-y)   tanh 1-y^2   reciprocal -y^2
//   erf 2/sqrt(pi) exp(-x^2)
//   relu, abs: kernels::relu_backward masks g by x > 0 (abs: g where x > 0, -g where x < 0).
#include "autograd/ops_elementwise.h"
#include "autograd/ops_unary.h"

#include <utility>

#include "autograd/grad_utils.h"
#include "autograd/record.h"
#include "core/kernels/elementwise_ops.h"

namespace moelab {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;
using namespace detail;
using Grads = std::vector<Tensor>;
using Inputs = std::vector<Variable>;

// The gradient operand v receives from full, a gradient of the broadcast output's shape: full
// summed back to v's shape (full itself when v was not repeated). Undefined when v needs none.
Tensor to_operand(const Tensor& full, const Variable& v) {
  return v.requires_grad() ? reduce_to_shape(full, v.shape()) : Tensor();
}

}  // namespace

// ---------------------------------------------------------------- binary, two Variables
// a, b: shapes that broadcast (core/kernels.h) -> [the broadcast shape]

Variable add(const Variable& a, const Variable& b) {
  Tensor out = kernels::binary(BinaryOp::Add, a.data(), b.data());
  return record("add", std::move(out), {a, b}, [](const Inputs& in, const Tensor& g) {
    return Grads{to_operand(g, in[0]), to_operand(g, in[1])};
  });
}

Variable sub(const Variable& a, const Variable& b) {
  Tensor out = kernels::binary(BinaryOp::Sub, a.data(), b.data());
  return record("sub", std::move(out), {a, b}, [](const Inputs& in, const Tensor& g) {
    return Grads{to_operand(g, in[0]), in[1].requires_grad() ? to_operand(neg_t(g), in[1]) : Tensor()};
  });
}

Variable mul(const Variable& a, const Variable& b) {
  Tensor out = kernels::binary(BinaryOp::Mul, a.data(), b.data());
  return record("mul", std::move(out), {a, b}, [](const Inputs& in, const Tensor& g) {
    Tensor da = in[0].requires_grad() ? to_operand(mul_t(g, in[1].data()), in[0]) : Tensor();
    Tensor db = in[1].requires_grad() ? to_operand(mul_t(g, in[0].data()), in[1]) : Tensor();
    return Grads{da, db};
  });
}

Variable div(const Variable& a, const Variable& b) {
  Tensor out = kernels::binary(BinaryOp::Div, a.data(), b.data());
  return record("div", std::move(out), {a, b}, [](const Inputs& in, const Tensor& g) {
    const Tensor& av = in[0].data();
    const Tensor& bv = in[1].data();
    Tensor g_over_b = div_t(g, bv);  // da, and a factor of db: db = -(g / b) * a / b
    Tensor db = in[1].requires_grad() ? to_operand(neg_t(div_t(mul_t(g_over_b, av), bv)), in[1]) : Tensor();
    return Grads{to_operand(g_over_b, in[0]), db};
  });
}

Variable maximum(const Variable& a, const Variable& b) {
  Tensor out = kernels::binary(BinaryOp::Maximum, a.data(), b.data());
  return record("maximum", std::move(out), {a, b}, [](const Inputs& in, const Tensor& g) {
    // g where a - b > 0 goes to a; the rest of g goes to b.
    Tensor to_a = kernels::relu_backward(sub_t(in[0].data(), in[1].data()), g);
    return Grads{to_operand(to_a, in[0]), in[1].requires_grad() ? to_operand(sub_t(g, to_a), in[1]) : Tensor()};
  });
}

Variable minimum(const Variable& a, const Variable& b) {
  Tensor out = kernels::binary(BinaryOp::Minimum, a.data(), b.data());
  return record("minimum", std::move(out), {a, b}, [](const Inputs& in, const Tensor& g) {
    // g where b - a > 0 (a is the smaller) goes to a; the rest goes to b.
    Tensor to_a = kernels::relu_backward(neg_t(sub_t(in[0].data(), in[1].data())), g);
    return Grads{to_operand(to_a, in[0]), in[1].requires_grad() ? to_operand(sub_t(g, to_a), in[1]) : Tensor()};
  });
}

Variable pow(const Variable& a, const Variable& b) {
  Tensor out = kernels::binary(BinaryOp::Pow, a.data(), b.data());
  return record("pow", out, {a, b}, [out](const Inputs& in, const Tensor& g) {
    const Tensor& av = in[0].data();
    const Tensor& bv = in[1].data();
    Tensor da, db;
    if (in[0].requires_grad()) {
      const Tensor b_minus_1 = kernels::binary_scalar(BinaryOp::Sub, bv, 1.0);
      const Tensor slope = mul_t(bv, kernels::binary(BinaryOp::Pow, av, b_minus_1));
      da = to_operand(mul_t(g, slope), in[0]);
    }
    if (in[1].requires_grad()) db = to_operand(mul_t(g, mul_t(out, kernels::unary(UnaryOp::Log, av))), in[1]);
    return Grads{da, db};
  });
}

// ---------------------------------------------------------------- binary with a constant
// x: [...] -> [...]; the double is not differentiated.

Variable add(const Variable& a, double b) {
  return record("add", kernels::binary_scalar(BinaryOp::Add, a.data(), b), {a},
                [](const Inputs&, const Tensor& g) { return Grads{g}; });
}
Variable add(double a, const Variable& b) { return add(b, a); }

Variable sub(const Variable& a, double b) {
  return record("sub", kernels::binary_scalar(BinaryOp::Sub, a.data(), b), {a},
                [](const Inputs&, const Tensor& g) { return Grads{g}; });
}
Variable sub(double a, const Variable& b) {
  return record("sub", kernels::scalar_binary(BinaryOp::Sub, a, b.data()), {b},
                [](const Inputs&, const Tensor& g) { return Grads{neg_t(g)}; });
}

Variable mul(const Variable& a, double b) {
  return record("mul", kernels::binary_scalar(BinaryOp::Mul, a.data(), b), {a},
                [b](const Inputs&, const Tensor& g) { return Grads{scale_t(g, b)}; });
}
Variable mul(double a, const Variable& b) { return mul(b, a); }

Variable div(const Variable& a, double b) {
  return record("div", kernels::binary_scalar(BinaryOp::Div, a.data(), b), {a},
                [b](const Inputs&, const Tensor& g) { return Grads{kernels::binary_scalar(BinaryOp::Div, g, b)}; });
}
Variable div(double a, const Variable& b) {
  // out = a / x, d/dx = -a / x^2 = -out / x
  Tensor out = kernels::scalar_binary(BinaryOp::Div, a, b.data());
  return record("div", out, {b}, [out](const Inputs& in, const Tensor& g) {
    return Grads{neg_t(mul_t(g, div_t(out, in[0].data())))};
  });
}

Variable pow(const Variable& x, double exponent) {
  Tensor out = kernels::binary_scalar(BinaryOp::Pow, x.data(), exponent);
  return record("pow", std::move(out), {x}, [exponent](const Inputs& in, const Tensor& g) {
    Tensor slope = scale_t(kernels::binary_scalar(BinaryOp::Pow, in[0].data(), exponent - 1.0), exponent);
    return Grads{mul_t(g, slope)};
  });
}

// ---------------------------------------------------------------- operators

Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
Variable operator+(const Variable& a, double b) { return add(a, b); }
Variable operator+(double a, const Variable& b) { return add(a, b); }
Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
Variable operator-(const Variable& a, double b) { return sub(a, b); }
Variable operator-(double a, const Variable& b) { return sub(a, b); }
Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
Variable operator*(const Variable& a, double b) { return mul(a, b); }
Variable operator*(double a, const Variable& b) { return mul(a, b); }
Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }
Variable operator/(const Variable& a, double b) { return div(a, b); }
Variable operator/(double a, const Variable& b) { return div(a, b); }
Variable operator-(const Variable& x) { return neg(x); }

// ---------------------------------------------------------------- unary
// x: [...] -> [...]

Variable neg(const Variable& x) {
  return record("neg", kernels::unary(UnaryOp::Neg, x.data()), {x},
                [](const Inputs&, const Tensor& g) { return Grads{neg_t(g)}; });
}

Variable exp(const Variable& x) {
  Tensor y = kernels::unary(UnaryOp::Exp, x.data());
  return record("exp", y, {x}, [y](const Inputs&, const Tensor& g) { return Grads{mul_t(g, y)}; });
}

Variable log(const Variable& x) {
  return record("log", kernels::unary(UnaryOp::Log, x.data()), {x},
                [](const Inputs& in, const Tensor& g) { return Grads{div_t(g, in[0].data())}; });
}

Variable sqrt(const Variable& x) {
  Tensor y = kernels::unary(UnaryOp::Sqrt, x.data());
  return record("sqrt", y, {x}, [y](const Inputs&, const Tensor& g) { return Grads{scale_t(div_t(g, y), 0.5)}; });
}

Variable abs(const Variable& x) {
  return record("abs", kernels::unary(UnaryOp::Abs, x.data()), {x}, [](const Inputs& in, const Tensor& g) {
    const Tensor& xv = in[0].data();
    return Grads{sub_t(kernels::relu_backward(xv, g), kernels::relu_backward(neg_t(xv), g))};
  });
}

Variable square(const Variable& x) {
  return record("square", kernels::unary(UnaryOp::Square, x.data()), {x},
                [](const Inputs& in, const Tensor& g) { return Grads{scale_t(mul_t(g, in[0].data()), 2.0)}; });
}

Variable relu(const Variable& x) {
  return record("relu", kernels::unary(UnaryOp::Relu, x.data()), {x},
                [](const Inputs& in, const Tensor& g) { return Grads{kernels::relu_backward(in[0].data(), g)}; });
}

Variable sigmoid(const Variable& x) {
  Tensor y = kernels::unary(UnaryOp::Sigmoid, x.data());
  return record("sigmoid", y, {x}, [y](const Inputs&, const Tensor& g) {
    return Grads{mul_t(g, mul_t(y, kernels::scalar_binary(BinaryOp::Sub, 1.0, y)))};
  });
}

Variable tanh(const Variable& x) {
  Tensor y = kernels::unary(UnaryOp::Tanh, x.data());
  return record("tanh", y, {x}, [y](const Inputs&, const Tensor& g) {
    return Grads{mul_t(g, kernels::scalar_binary(BinaryOp::Sub, 1.0, kernels::unary(UnaryOp::Square, y)))};
  });
}

Variable erf(const Variable& x) {  // d erf = 2/sqrt(pi) exp(-x^2)
  return record("erf", kernels::unary(UnaryOp::Erf, x.data()), {x}, [](const Inputs& in, const Tensor& g) {
    const Tensor bell = kernels::unary(UnaryOp::Exp, neg_t(kernels::unary(UnaryOp::Square, in[0].data())));
    return Grads{scale_t(mul_t(g, bell), 1.1283791670955126)};  // 2 / sqrt(pi)
  });
}

Variable gelu(const Variable& x) { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); }  // 1 / sqrt(2)

Variable sin(const Variable& x) {
  return record("sin", kernels::unary(UnaryOp::Sin, x.data()), {x}, [](const Inputs& in, const Tensor& g) {
    return Grads{mul_t(g, kernels::unary(UnaryOp::Cos, in[0].data()))};
  });
}

Variable cos(const Variable& x) {
  return record("cos", kernels::unary(UnaryOp::Cos, x.data()), {x}, [](const Inputs& in, const Tensor& g) {
    return Grads{neg_t(mul_t(g, kernels::unary(UnaryOp::Sin, in[0].data())))};
  });
}

Variable reciprocal(const Variable& x) {
  Tensor y = kernels::unary(UnaryOp::Reciprocal, x.data());
  return record("reciprocal", y, {x}, [y](const Inputs&, const Tensor& g) {
    return Grads{neg_t(mul_t(g, kernels::unary(UnaryOp::Square, y)))};
  });
}

}  // namespace moelab
