// core/kernels/elementwise_ops.h — THE list of elementwise ops: one line per op, in one place.
//
// MOELAB_UNARY_OPS and MOELAB_BINARY_OPS below are X-macros: a caller defines X and gets one
// expansion per op, in list order.
//   unary:  X(Op, name, domain)              y[i] = name(x[i])
//   binary: X(Op, name, a_domain, b_domain)  out[i] = a[i] name b[j]  (broadcast: core/kernels.h)
// Op is the enumerator (kernels::UnaryOp::Op), name is what errors, the autograd graph and the
// printed graph call it, and a domain says where an operand may be drawn from so that the op is
// defined and smooth there (the tests draw their inputs from it):
//   Real      any finite value
//   Positive  x > 0                 (log, sqrt; the base of pow)
//   NonZero   x != 0, either sign   (reciprocal, the divisor; relu and abs, whose kink at 0 would
//                                   spoil a finite-difference gradient)
//
// Everything that has to name every op is generated from these lists, so none can forget one:
//   - enum class UnaryOp / BinaryOp, op_name(), and the tables kUnaryOps / kBinaryOps (here;
//     core/kernels.h declares the two enums by name only, so include this header to name an op);
//   - the CPU dispatch (core/cpu/elementwise.cpp): case Op -> that file's function `name`;
//   - the CUDA functors and dispatch (cuda/elementwise.cu): the same, on the device;
//   - the autograd registry: every unary op is a differentiable op moelab::name(x) (autograd/
//     op_list.cpp), gradchecked on its domain (tests/test_gradcheck.cpp);
//   - the tests' op lists (tests/test_elementwise.cpp, tests/test_cuda_parity.cpp walk the tables;
//     the reference values are in tests/unary_reference.h).
// A switch that names the ops by hand (the tests' reference values) is compiled with
// -Werror=switch (CMakeLists.txt), so a missing case there is an error as well.
//
// Adding a unary op, say softplus(x) = log(1 + exp(x)), touches 6 files (10 before this list):
//   1. here:                            X(Softplus, softplus, Real)
//   2. core/cpu/elementwise.cpp         its math on the host, an Eigen array expression
//   3. cuda/elementwise.cu              its math on the device (a CUDA build fails without it),
//      and cuda/device_utils.cuh when that math calls a libm function DeviceMath<T> lacks (log1p,
//      expm1, ...): one line for float (log1pf) and one for double. A CPU-only build does not
//      compile either file, so a contributor without nvcc must add both by this recipe; the
//      CUDA parity test (tests/test_cuda_parity.cpp) checks them on the next GPU machine.
//   4. autograd/ops_unary.h             Variable softplus(const Variable& x);
//   5. autograd/ops_elementwise.cpp     its derivative (dx = g * sigmoid(x))
//   6. tests/unary_reference.h         its reference value in double precision (unary_ref)
// Each missing piece is a compile error (2, 3, 6: -Werror=switch; 4, 5: the generated gradcheck
// calls moelab::softplus), never a silent default. The gradcheck, the CPU value test and the
// CPU/CUDA parity test then cover it with no further line. Only the files that include this list
// or autograd/ops_unary.h recompile (core/kernels.h declares the enums by name only): 25 of some
// 300 objects (the 25th, nn/moe/moe_layer.cpp, calls sigmoid for its gated shared expert),
// counted by scripts/rebuild_cost.sh; a ctest of that name fails past 25. A binary op is the same list line, math and reference, plus its autograd forms and gradcheck cases
// written by hand (its forms, Variable op double and double op Variable, differ from op to op).
// The comparisons eq, ne, lt, le, gt, ge give 1 where the relation holds and 0 elsewhere, in the
// operands' dtype (a comparison with NaN holds only for ne, as in IEEE and PyTorch); they have no
// gradient, so autograd offers them as constant masks (autograd/ops_compare.h), beside where().
#pragma once

namespace moelab::kernels {

// clang-format off
#define MOELAB_UNARY_OPS(X)                  \
  X(Neg,        neg,        Real)            \
  X(Exp,        exp,        Real)            \
  X(Log,        log,        Positive)        \
  X(Sqrt,       sqrt,       Positive)        \
  X(Abs,        abs,        NonZero)         \
  X(Square,     square,     Real)            \
  X(Relu,       relu,       NonZero)         \
  X(Sigmoid,    sigmoid,    Real)            \
  X(Tanh,       tanh,       Real)            \
  X(Erf,        erf,        Real)            \
  X(Sin,        sin,        Real)            \
  X(Cos,        cos,        Real)            \
  X(Reciprocal, reciprocal, NonZero)

#define MOELAB_BINARY_OPS(X)                 \
  X(Add,     add,     Real,     Real)        \
  X(Sub,     sub,     Real,     Real)        \
  X(Mul,     mul,     Real,     Real)        \
  X(Div,     div,     Real,     NonZero)     \
  X(Maximum, maximum, Real,     Real)        \
  X(Minimum, minimum, Real,     Real)        \
  X(Pow,     pow,     Positive, Real)       \
  X(Eq,      eq,      Real,     Real)        \
  X(Ne,      ne,      Real,     Real)        \
  X(Lt,      lt,      Real,     Real)        \
  X(Le,      le,      Real,     Real)        \
  X(Gt,      gt,      Real,     Real)        \
  X(Ge,      ge,      Real,     Real)
// clang-format on

enum class OpDomain { Real, Positive, NonZero };

#define MOELAB_ELEMENTWISE_ENUMERATOR(Op, ...) Op,
// The enums core/kernels.h declares by name only (so their underlying type, int, is fixed there too).
enum class UnaryOp : int { MOELAB_UNARY_OPS(MOELAB_ELEMENTWISE_ENUMERATOR) };
enum class BinaryOp : int { MOELAB_BINARY_OPS(MOELAB_ELEMENTWISE_ENUMERATOR) };
#undef MOELAB_ELEMENTWISE_ENUMERATOR

// Every op with its name and domains, in list order (so kUnaryOps[int(op)].op == op).
struct UnaryOpInfo {
  UnaryOp op;
  const char* name;
  OpDomain domain;
};
struct BinaryOpInfo {
  BinaryOp op;
  const char* name;
  OpDomain a_domain, b_domain;
};
#define MOELAB_UNARY_INFO(Op, name, domain) {UnaryOp::Op, #name, OpDomain::domain},
#define MOELAB_BINARY_INFO(Op, name, a_domain, b_domain) {BinaryOp::Op, #name, OpDomain::a_domain, OpDomain::b_domain},
inline constexpr UnaryOpInfo kUnaryOps[] = {MOELAB_UNARY_OPS(MOELAB_UNARY_INFO)};
inline constexpr BinaryOpInfo kBinaryOps[] = {MOELAB_BINARY_OPS(MOELAB_BINARY_INFO)};
#undef MOELAB_UNARY_INFO
#undef MOELAB_BINARY_INFO

// The op's name ("sigmoid", "maximum"); "?" for a value outside the enum.
constexpr const char* op_name(UnaryOp op) {
  switch (op) {
#define MOELAB_UNARY_NAME(Op, name, ...) \
  case UnaryOp::Op: return #name;
    MOELAB_UNARY_OPS(MOELAB_UNARY_NAME)
#undef MOELAB_UNARY_NAME
  }
  return "?";
}
constexpr const char* op_name(BinaryOp op) {
  switch (op) {
#define MOELAB_BINARY_NAME(Op, name, ...) \
  case BinaryOp::Op: return #name;
    MOELAB_BINARY_OPS(MOELAB_BINARY_NAME)
#undef MOELAB_BINARY_NAME
  }
  return "?";
}

}  // namespace moelab::kernels
