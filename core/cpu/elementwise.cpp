// core/cpu/elementwise.cpp — elementwise maths on the host: unary ops, binary ops with NumPy
// broadcasting, ops with a scalar, and the ReLU backward.
//
//   unary:            x: [...] -> y: [...],  y[i] = f(x[i])
//   binary:           a: [...], b -> out: a's shape, out[i] = a[i] op b[j] where
//                       b.numel == a.numel   j = i            (same shape)
//                       b.numel == 1         j = 0            (scalar tensor)
//                       otherwise            j = i % b.numel  (b is a's trailing axes: a seen as
//                                                              [rows, m], b: [m] repeats per row)
//   binary_broadcast: any other broadcast, e.g. a: [B, 1, d], b: [T, d] -> out: [B, T, d], walked
//                     with the merged strided plan of core/broadcast.h:
//                       out[i_0, ..., i_{r-1}] = a[sum i_k a_strides[k]] op b[sum i_k b_strides[k]]
//                     The last merged axis is a contiguous row in which each operand steps by 1
//                     or stays put (stride 0), so the inner loop is one of three flat loops
//                     (a[j] op b[j], a[j] op s, s op b[j]) that vectorise like the fast forms;
//                     only the row starts need index arithmetic (an odometer over the outer axes).
//   binary_scalar:    out[i] = a[i] op s, or s op a[i] when scalar_first
//   relu_backward:    out[i] = x[i] > 0 ? grad[i] : 0
//
// Unary ops go through Eigen array expressions, which vectorise exp, log, tanh, sin, ... with
// SIMD polynomial approximations (a plain loop calling std::exp does not vectorise); exp and log
// through core/cpu/exact_math.h, which makes them exact at the extremes on every instruction set. Binary ops
// are plain loops over a small functor per op, which the compiler vectorises (pow excepted).
// Large tensors are cut into fixed chunks of kChunk elements of the output that OpenMP threads
// share; every element is computed by the same scalar function wherever the chunk boundaries fall
// (a chunk may start or end inside a row of binary_broadcast), so results do not depend on the
// thread count, nor on which of binary and binary_broadcast computed them.
//
// Conventions: sigmoid(x) = 1 / (1 + exp(-x)), which saturates to exactly 0 and 1 (exp overflowing
// to inf gives 1/inf = 0, no NaN; exp underflowing to 0 gives 1). relu and maximum/minimum propagate NaN, as PyTorch does.
// GCC 12 reports a false "used uninitialized" inside its own AVX-512 intrinsics header when Eigen's
// vectorised sin/cos are inlined (GCC bug 105593); silence it for the intrinsics headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/chunks.h"
#include "core/cpu/exact_math.h"
#include "core/dtype_dispatch.h"
#include "core/kernels/elementwise_ops.h"
#include "core/cpu/thread_count.h"

namespace moelab {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

template <class T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// ---------------------------------------------------------------- the math of each op
// One function per op of the list (core/kernels/elementwise_ops.h), named as the op. Unary: y = f(x)
// as an Eigen array expression (x, y: maps of n elements). Binary: the scalar function (T, T) -> T.
// The dispatch below is generated from the list, so an op without its function here does not compile.
namespace unary_math {
// Not `-x`: Eigen's vector negation is 0 - x, which gives +0 for +0 (IEEE's -(+0) is -0, as the
// scalar path, PyTorch and the CUDA kernel give). Times -1 is exact and flips every sign, zeros too.
template <class X, class Y> void neg(const X& x, Y& y) {
  using T = typename X::Scalar;
  y = x * T(-1);
}
template <class X, class Y> void exp(const X& x, Y& y) { y = cpu::exact_exp(x); }
template <class X, class Y> void log(const X& x, Y& y) { y = cpu::exact_log(x); }
template <class X, class Y> void sqrt(const X& x, Y& y) { y = x.sqrt(); }
template <class X, class Y> void abs(const X& x, Y& y) { y = x.abs(); }
template <class X, class Y> void square(const X& x, Y& y) { y = x.square(); }
template <class X, class Y> void relu(const X& x, Y& y) {  // NaN < 0 is false: NaN stays
  using T = typename X::Scalar;
  y = (x < T(0)).select(T(0), x);
}
template <class X, class Y> void sigmoid(const X& x, Y& y) {
  using T = typename X::Scalar;
  y = (T(1) + cpu::exact_exp(-x)).inverse();
}
template <class X, class Y> void tanh(const X& x, Y& y) { y = x.tanh(); }
// std::erf element by element (the C library's, the same bits on every x86 CPU), not Eigen's
// vectorised approximation.
template <class X, class Y> void erf(const X& x, Y& y) {
  using T = typename X::Scalar;
  y = x.unaryExpr([](T v) { return std::erf(v); });
}
template <class X, class Y> void sin(const X& x, Y& y) { y = x.sin(); }
template <class X, class Y> void cos(const X& x, Y& y) { y = x.cos(); }
template <class X, class Y> void reciprocal(const X& x, Y& y) { y = x.inverse(); }
}  // namespace unary_math

namespace binary_math {
template <class T> T add(T p, T q) { return p + q; }
template <class T> T sub(T p, T q) { return p - q; }
template <class T> T mul(T p, T q) { return p * q; }
template <class T> T div(T p, T q) { return p / q; }
template <class T> T maximum(T p, T q) { return (p > q || p != p) ? p : q; }  // NaN in p or q wins
template <class T> T minimum(T p, T q) { return (p < q || p != p) ? p : q; }
template <class T> T pow(T p, T q) { return std::pow(p, q); }
template <class T> T eq(T p, T q) { return p == q ? T(1) : T(0); }
template <class T> T ne(T p, T q) { return p != q ? T(1) : T(0); }
template <class T> T lt(T p, T q) { return p < q ? T(1) : T(0); }
template <class T> T le(T p, T q) { return p <= q ? T(1) : T(0); }
template <class T> T gt(T p, T q) { return p > q ? T(1) : T(0); }
template <class T> T ge(T p, T q) { return p >= q ? T(1) : T(0); }
}  // namespace binary_math

// ---------------------------------------------------------------- dispatch, generated from the list
template <class T>
void unary_range(UnaryOp op, const T* x, T* y, std::int64_t n) {
  ConstArrayMap<T> in(x, n);
  ArrayMap<T> out(y, n);
  switch (op) {
#define MOELAB_UNARY_CASE(Op, name, ...) \
  case UnaryOp::Op: unary_math::name(in, out); return;
    MOELAB_UNARY_OPS(MOELAB_UNARY_CASE)
#undef MOELAB_UNARY_CASE
  }
  // Not reached: core/kernels/elementwise.cpp rejects a value outside the enum before dispatching.
}

// Calls body(f) with f the scalar function (T, T) -> T of the binary op, so that each op gets its
// own inlined, vectorisable loop.
template <class T, class Body>
void with_binary_op(BinaryOp op, const Body& body) {
  switch (op) {
#define MOELAB_BINARY_CASE(Op, name, ...) \
  case BinaryOp::Op: body([](T p, T q) { return binary_math::name<T>(p, q); }); return;
    MOELAB_BINARY_OPS(MOELAB_BINARY_CASE)
#undef MOELAB_BINARY_CASE
  }
  // Not reached (as above).
}

// out[begin, end) of a broadcast (see the header): rows of the last merged axis, split where the
// range starts or ends inside one.
template <class T, class F>
void broadcast_range(const F& f, const T* pa, const T* pb, T* po, const BroadcastPlan& plan, std::int64_t begin,
                     std::int64_t end) {
  const int r = plan.rank();
  const std::int64_t width = plan.sizes[static_cast<std::size_t>(r - 1)];
  const std::int64_t sa = plan.a_strides[static_cast<std::size_t>(r - 1)];
  const std::int64_t sb = plan.b_strides[static_cast<std::size_t>(r - 1)];
  // The odometer: the index of the current row along each outer axis, and where a and b start it.
  std::vector<std::int64_t> index(static_cast<std::size_t>(r), 0);
  std::int64_t row = begin / width, off_a = 0, off_b = 0;
  for (int k = r - 2; k >= 0; --k) {
    const auto u = static_cast<std::size_t>(k);
    index[u] = row % plan.sizes[u];
    row /= plan.sizes[u];
    off_a += index[u] * plan.a_strides[u];
    off_b += index[u] * plan.b_strides[u];
  }
  std::int64_t j = begin % width;  // position inside the current row
  for (std::int64_t i = begin; i < end;) {
    const std::int64_t n = std::min(width - j, end - i);
    const T* a = pa + off_a + j * sa;
    const T* b = pb + off_b + j * sb;
    T* o = po + i;
    if (sa != 0 && sb != 0) {
      for (std::int64_t t = 0; t < n; ++t) o[t] = f(a[t], b[t]);
    } else if (sa != 0) {
      const T q = b[0];
      for (std::int64_t t = 0; t < n; ++t) o[t] = f(a[t], q);
    } else {
      const T p = a[0];
      for (std::int64_t t = 0; t < n; ++t) o[t] = f(p, b[t]);
    }
    i += n;
    j = 0;
    for (int k = r - 2; k >= 0; --k) {  // next row: advance the odometer
      const auto u = static_cast<std::size_t>(k);
      off_a += plan.a_strides[u];
      off_b += plan.b_strides[u];
      if (++index[u] < plan.sizes[u]) break;
      off_a -= plan.a_strides[u] * plan.sizes[u];
      off_b -= plan.b_strides[u] * plan.sizes[u];
      index[u] = 0;
    }
  }
}

}  // namespace

void CpuBackend::unary(kernels::UnaryOp op, const Tensor& x, Tensor& out) {
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = out.data<T>();
    cpu::for_chunks(x.numel(), [&](std::int64_t b, std::int64_t e) { unary_range(op, px + b, py + b, e - b); });
  });
}

void CpuBackend::binary(kernels::BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const std::int64_t n = a.numel(), m = b.numel();
  if (n == 0) return;
  dispatch_float(a.dtype(), [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    with_binary_op<T>(op, [&](auto f) {
      if (m == n) {  // same shape
        cpu::for_chunks(n, [&](std::int64_t s, std::int64_t e) {
          for (std::int64_t i = s; i < e; ++i) po[i] = f(pa[i], pb[i]);
        });
      } else if (m == 1) {  // scalar tensor
        const T s0 = pb[0];
        cpu::for_chunks(n, [&](std::int64_t s, std::int64_t e) {
          for (std::int64_t i = s; i < e; ++i) po[i] = f(pa[i], s0);
        });
      } else {  // trailing broadcast: a: [rows, m], b: [m]
        const std::int64_t rows = n / m;
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(n)) if (cpu::element_threads(n) > 1)
        for (std::int64_t r = 0; r < rows; ++r) {
          const T* ar = pa + r * m;
          T* orow = po + r * m;
          for (std::int64_t j = 0; j < m; ++j) orow[j] = f(ar[j], pb[j]);
        }
      }
    });
  });
}

void CpuBackend::binary_broadcast(kernels::BinaryOp op, const Tensor& a, const Tensor& b, const BroadcastPlan& plan,
                                  Tensor& out) {
  dispatch_float(a.dtype(), [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    with_binary_op<T>(op, [&](auto f) {
      cpu::for_chunks(out.numel(), [&](std::int64_t s, std::int64_t e) { broadcast_range(f, pa, pb, po, plan, s, e); });
    });
  });
}

void CpuBackend::binary_scalar(kernels::BinaryOp op, const Tensor& a, double b, bool scalar_first, Tensor& out) {
  dispatch_float(a.dtype(), [&]<class T>() {
    const T* pa = a.data<T>();
    T* po = out.data<T>();
    const T s0 = static_cast<T>(b);
    with_binary_op<T>(op, [&](auto f) {
      if (scalar_first) {
        cpu::for_chunks(a.numel(), [&](std::int64_t s, std::int64_t e) {
          for (std::int64_t i = s; i < e; ++i) po[i] = f(s0, pa[i]);
        });
      } else {
        cpu::for_chunks(a.numel(), [&](std::int64_t s, std::int64_t e) {
          for (std::int64_t i = s; i < e; ++i) po[i] = f(pa[i], s0);
        });
      }
    });
  });
}

void CpuBackend::relu_backward(const Tensor& x, const Tensor& grad, Tensor& out) {
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    const T* pg = grad.data<T>();
    T* po = out.data<T>();
    // Pointers captured by value and grad read unconditionally: a branch-free select that the
    // compiler vectorises (captured by reference, every iteration reloaded them and branched).
    cpu::for_chunks(x.numel(), [px, pg, po](std::int64_t s, std::int64_t e) {
      for (std::int64_t i = s; i < e; ++i) {
        const T g = pg[i];
        po[i] = px[i] > T(0) ? g : T(0);
      }
    });
  });
}

}  // namespace moelab
