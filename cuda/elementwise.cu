// cuda/elementwise.cu — elementwise maths on the GPU (mirrors core/cpu/elementwise.cpp).
//
//   unary:            x: [...] -> y: [...],  y[i] = f(x[i])
//   binary:           a: [...], b -> out: a's shape, out[i] = a[i] op b[j] where
//                       b.numel == a.numel   j = i            (same shape)
//                       b.numel == 1         j = 0            (scalar tensor)
//                       otherwise            j = i % b.numel  (b is a's trailing axes: a seen as
//                                                              [rows, m], b: [m] repeats per row)
//   binary_broadcast: any other broadcast, e.g. a: [B, 1, d], b: [T, d] -> out: [B, T, d], with the
//                     merged strided plan of core/broadcast.h passed by value (at most
//                     kMaxBroadcastAxes merged axes, checked): each thread splits its flat index i
//                     into (i_0, ..., i_{r-1}) and reads a[sum i_k a_strides[k]], b[sum i_k b_strides[k]]
//   binary_scalar:    out[i] = a[i] op s, or s op a[i] when scalar_first
//   relu_backward:    out[i] = x[i] > 0 ? grad[i] : 0
// float32 and float64, one thread per element in grid-stride loops. Each op is a small functor
// generated from the list of ops (core/kernels/elementwise_ops.h) around its __device__ function;
// the op is chosen on the host, so each kernel instantiation contains one op and no per-element switch.
//
// The same conventions as the CPU: sigmoid(x) = 1 / (1 + exp(-x)) (saturates to 0 and 1, no NaN),
// relu keeps NaN (NaN < 0 is false), maximum/minimum propagate NaN from either side. Results are
// per element, so independent of the launch shape; they match the CPU within a few ulps (CUDA's
// expf/tanhf/... are not bitwise the same functions as Eigen's vectorised ones).
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"
#include "core/kernels/elementwise_ops.h"

namespace moelab {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

// ---------------------------------------------------------------- the math of each op
// One __device__ function per op of the list (core/kernels/elementwise_ops.h), named as the op;
// T is float or double. The functors and the dispatch below are generated from the list, so an op
// without its function here does not compile (no default case computes something else).
namespace unary_math {
template <class T> __device__ T neg(T x) { return -x; }
template <class T> __device__ T exp(T x) { return cuda::DeviceMath<T>::exp(x); }
template <class T> __device__ T log(T x) { return cuda::DeviceMath<T>::log(x); }
template <class T> __device__ T sqrt(T x) { return cuda::DeviceMath<T>::sqrt(x); }
template <class T> __device__ T abs(T x) { return cuda::DeviceMath<T>::abs(x); }
template <class T> __device__ T square(T x) { return x * x; }
template <class T> __device__ T relu(T x) { return x < T(0) ? T(0) : x; }  // NaN < 0 is false: NaN stays
template <class T> __device__ T sigmoid(T x) { return T(1) / (T(1) + cuda::DeviceMath<T>::exp(-x)); }
template <class T> __device__ T tanh(T x) { return cuda::DeviceMath<T>::tanh(x); }
template <class T> __device__ T erf(T x) { return cuda::DeviceMath<T>::erf(x); }
template <class T> __device__ T sin(T x) { return cuda::DeviceMath<T>::sin(x); }
template <class T> __device__ T cos(T x) { return cuda::DeviceMath<T>::cos(x); }
template <class T> __device__ T reciprocal(T x) { return T(1) / x; }
}  // namespace unary_math

namespace binary_math {
template <class T> __device__ T add(T p, T q) { return p + q; }
template <class T> __device__ T sub(T p, T q) { return p - q; }
template <class T> __device__ T mul(T p, T q) { return p * q; }
template <class T> __device__ T div(T p, T q) { return p / q; }
template <class T> __device__ T maximum(T p, T q) { return (p > q || p != p) ? p : q; }  // NaN in p or q wins
template <class T> __device__ T minimum(T p, T q) { return (p < q || p != p) ? p : q; }
template <class T> __device__ T pow(T p, T q) { return cuda::DeviceMath<T>::pow(p, q); }
template <class T> __device__ T eq(T p, T q) { return p == q ? T(1) : T(0); }
template <class T> __device__ T ne(T p, T q) { return p != q ? T(1) : T(0); }
template <class T> __device__ T lt(T p, T q) { return p < q ? T(1) : T(0); }
template <class T> __device__ T le(T p, T q) { return p <= q ? T(1) : T(0); }
template <class T> __device__ T gt(T p, T q) { return p > q ? T(1) : T(0); }
template <class T> __device__ T ge(T p, T q) { return p >= q ? T(1) : T(0); }
}  // namespace binary_math

// ---------------------------------------------------------------- functors and dispatch, generated
// One functor type per op (a device lambda would need nvcc's --extended-lambda): Unary<T, Op> and
// Binary<T, Op> are declared only, and defined for the ops of the list.
template <class T, UnaryOp Op>
struct Unary;
template <class T, BinaryOp Op>
struct Binary;
#define MOELAB_UNARY_FUNCTOR(Op, name, ...)                                   \
  template <class T>                                                          \
  struct Unary<T, UnaryOp::Op> {                                              \
    __device__ T operator()(T x) const { return unary_math::name<T>(x); }     \
  };
#define MOELAB_BINARY_FUNCTOR(Op, name, ...)                                         \
  template <class T>                                                                 \
  struct Binary<T, BinaryOp::Op> {                                                   \
    __device__ T operator()(T p, T q) const { return binary_math::name<T>(p, q); }   \
  };
MOELAB_UNARY_OPS(MOELAB_UNARY_FUNCTOR)
MOELAB_BINARY_OPS(MOELAB_BINARY_FUNCTOR)
#undef MOELAB_UNARY_FUNCTOR
#undef MOELAB_BINARY_FUNCTOR

// Calls body(functor) with the functor of the runtime op (one template instance per op). A value
// outside the enum never arrives: core/kernels/elementwise.cpp refuses it before dispatching.
template <class T, class Body>
void with_unary_op(UnaryOp op, const Body& body) {
  switch (op) {
#define MOELAB_UNARY_CASE(Op, ...) \
  case UnaryOp::Op: body(Unary<T, UnaryOp::Op>{}); return;
    MOELAB_UNARY_OPS(MOELAB_UNARY_CASE)
#undef MOELAB_UNARY_CASE
  }
}

template <class T, class Body>
void with_binary_op(BinaryOp op, const Body& body) {
  switch (op) {
#define MOELAB_BINARY_CASE(Op, ...) \
  case BinaryOp::Op: body(Binary<T, BinaryOp::Op>{}); return;
    MOELAB_BINARY_OPS(MOELAB_BINARY_CASE)
#undef MOELAB_BINARY_CASE
  }
}

// The merged broadcast plan as a kernel argument (a plain struct copied to the device with the launch).
constexpr int kMaxBroadcastAxes = 8;
struct BroadcastArgs {
  int rank;
  std::int64_t sizes[kMaxBroadcastAxes];
  std::int64_t a_strides[kMaxBroadcastAxes];
  std::int64_t b_strides[kMaxBroadcastAxes];
};

// ---------------------------------------------------------------- kernels
#define MOELAB_GRID_STRIDE_LOOP(i, n)                                                    \
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += std::int64_t{gridDim.x} * blockDim.x)

template <class T, class F>
__global__ void unary_kernel(F f, const T* x, T* y, std::int64_t n) {
  MOELAB_GRID_STRIDE_LOOP(i, n) y[i] = f(x[i]);
}

template <class T, class F>
__global__ void binary_same_kernel(F f, const T* a, const T* b, T* out, std::int64_t n) {
  MOELAB_GRID_STRIDE_LOOP(i, n) out[i] = f(a[i], b[i]);
}

// b broadcast: b_numel == 1 is the scalar tensor, otherwise b repeats every b_numel elements.
template <class T, class F>
__global__ void binary_broadcast_kernel(F f, const T* a, const T* b, T* out, std::int64_t n, std::int64_t b_numel) {
  if (b_numel == 1) {
    const T s = b[0];
    MOELAB_GRID_STRIDE_LOOP(i, n) out[i] = f(a[i], s);
  } else {
    MOELAB_GRID_STRIDE_LOOP(i, n) out[i] = f(a[i], b[i % b_numel]);
  }
}

// General broadcast: the flat output index, split into per-axis indices from the innermost axis out.
template <class T, class F>
__global__ void binary_strided_kernel(F f, const T* a, const T* b, T* out, std::int64_t n, BroadcastArgs p) {
  MOELAB_GRID_STRIDE_LOOP(i, n) {
    std::int64_t rest = i, ia = 0, ib = 0;
    for (int k = p.rank - 1; k >= 0; --k) {
      const std::int64_t index = rest % p.sizes[k];
      rest /= p.sizes[k];
      ia += index * p.a_strides[k];
      ib += index * p.b_strides[k];
    }
    out[i] = f(a[ia], b[ib]);
  }
}

template <class T, class F>
__global__ void binary_scalar_kernel(F f, const T* a, T s, bool scalar_first, T* out, std::int64_t n) {
  if (scalar_first) {
    MOELAB_GRID_STRIDE_LOOP(i, n) out[i] = f(s, a[i]);
  } else {
    MOELAB_GRID_STRIDE_LOOP(i, n) out[i] = f(a[i], s);
  }
}

template <class T>
__global__ void relu_backward_kernel(const T* x, const T* grad, T* out, std::int64_t n) {
  MOELAB_GRID_STRIDE_LOOP(i, n) out[i] = x[i] > T(0) ? grad[i] : T(0);
}

#undef MOELAB_GRID_STRIDE_LOOP

}  // namespace

void CudaBackend::unary(kernels::UnaryOp op, const Tensor& x, Tensor& out) {
  const std::int64_t n = x.numel();
  dispatch_float(x.dtype(), [&]<class T>() {
    with_unary_op<T>(op, [&](auto f) {
      unary_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(f, x.data<T>(), out.data<T>(), n);
      MOELAB_CUDA_CHECK_LAUNCH();
    });
  });
}

void CudaBackend::binary(kernels::BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const std::int64_t n = a.numel(), m = b.numel();
  if (n == 0) return;
  dispatch_float(a.dtype(), [&]<class T>() {
    with_binary_op<T>(op, [&](auto f) {
      if (m == n)
        binary_same_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(f, a.data<T>(), b.data<T>(),
                                                                                           out.data<T>(), n);
      else
        binary_broadcast_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
            f, a.data<T>(), b.data<T>(), out.data<T>(), n, m);
      MOELAB_CUDA_CHECK_LAUNCH();
    });
  });
}

void CudaBackend::binary_broadcast(kernels::BinaryOp op, const Tensor& a, const Tensor& b, const BroadcastPlan& plan,
                                   Tensor& out) {
  MOELAB_CHECK(plan.rank() <= kMaxBroadcastAxes, "binary", kernels::op_name(op), ": a ", a.shape(), " and b ",
               b.shape(), " broadcast over ", plan.rank(), " axes after merging; the CUDA kernel handles at most ",
               kMaxBroadcastAxes);
  BroadcastArgs args{};
  args.rank = plan.rank();
  for (int k = 0; k < plan.rank(); ++k) {
    const auto u = static_cast<std::size_t>(k);
    args.sizes[k] = plan.sizes[u];
    args.a_strides[k] = plan.a_strides[u];
    args.b_strides[k] = plan.b_strides[u];
  }
  const std::int64_t n = out.numel();
  dispatch_float(a.dtype(), [&]<class T>() {
    with_binary_op<T>(op, [&](auto f) {
      binary_strided_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
          f, a.data<T>(), b.data<T>(), out.data<T>(), n, args);
      MOELAB_CUDA_CHECK_LAUNCH();
    });
  });
}

void CudaBackend::binary_scalar(kernels::BinaryOp op, const Tensor& a, double b, bool scalar_first, Tensor& out) {
  const std::int64_t n = a.numel();
  dispatch_float(a.dtype(), [&]<class T>() {
    with_binary_op<T>(op, [&](auto f) {
      binary_scalar_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
          f, a.data<T>(), static_cast<T>(b), scalar_first, out.data<T>(), n);
      MOELAB_CUDA_CHECK_LAUNCH();
    });
  });
}

void CudaBackend::relu_backward(const Tensor& x, const Tensor& grad, Tensor& out) {
  const std::int64_t n = x.numel();
  dispatch_float(x.dtype(), [&]<class T>() {
    relu_backward_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(x.data<T>(), grad.data<T>(),
                                                                                        out.data<T>(), n);
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace moelab
