// cuda/softmax.cu — softmax (over any axis) and log-softmax (over the last axis), and their
// backwards, on the GPU (mirrors core/cpu/softmax.cpp).
//
// x: [N, n] (leading axes flattened into N rows; softmax over another axis: x seen as
// [outer, n, inner], N = outer * inner rows of n elements at stride inner):
//   softmax:      y = exp(x - m) / s,        m = max(x), s = sum(exp(x - m))
//   log_softmax:  y = (x - m) - log(s)
//   softmax backward:      dx = y * (dy - sum(dy * y))
//   log_softmax backward:  dx = dy - exp(y) * sum(dy)
// Subtracting the row maximum keeps every exponent <= 0 (no overflow), and s >= 1.
//
// Short contiguous rows (inner = 1, n <= kWarpRowMax = 1024: the attention's scores, a vocabulary
// of a thousand): one warp per row, 8 rows per 256-thread block. Each lane keeps its elements
// lane, lane + 32, ... in registers (kPerLane of them, the smallest power of two with
// 32 * kPerLane >= n), so the row is read from global memory once and written once; the row
// maximum and sums come from a butterfly of __shfl_xor_sync (sums in double), which gives every
// lane the same value in a fixed order: deterministic, no shared memory, no barrier. A block per
// row (below) spent most of its time in 16 barriers for 256 elements: on an H100 the attention's
// softmax ran at about a quarter of the memory bandwidth (docs/results/gpu-h100-2026-11-26).
//
// Other rows: one block per row, blockDim = the smallest power of two >= n between 32 and 256
// (cuda::row_threads); MOELAB_CUDA_GENERIC=1 sends every row there (cuda/context.h). Each thread
// walks a strided slice of the row; the row maximum and the row sums (s, sum(dy * y), sum(dy)) are combined with block_max / block_sum: sums in double, in a
// fixed tree, so results repeat bitwise run after run (and match the CPU, which also sums in
// double, to rounding). exp is evaluated in T as on the CPU, and the row is read twice rather
// than keeping exponentials in a scratch row: the second read usually hits the L2 cache.
// A row that is entirely -inf gives NaN, as on the CPU and in PyTorch. The strided rows use the
// same kernels with element i of row r at (r / inner) * n * inner + r % inner + i * inner (inner = 1:
// r * n + i), so the arithmetic, hence every bit, is the same as for the transposed tensor's rows.
// Each thread then reads elements inner apart: uncoalesced, acceptable for the short columns Soft
// MoE normalises (m tokens); a wide strided softmax would want a thread per column instead.
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"

namespace moelab {
namespace {

// A row of n elements `inner` apart: this block's (row blockIdx.x of [outer * inner, n]).
struct StridedRow {
  std::int64_t first, inner;
  __device__ StridedRow(std::int64_t n, std::int64_t inner_)
      : first(blockIdx.x / inner_ * n * inner_ + blockIdx.x % inner_), inner(inner_) {}
  __device__ std::int64_t operator[](std::int64_t i) const { return first + i * inner; }
};

// Shared memory of a row kernel: blockDim.x doubles, reused by block_max (as T) and block_sum.
template <class T>
__device__ T row_max(const T* x, const StridedRow& at, std::int64_t n, double* scratch) {
  T m = x[at[0]];  // n >= 1 (the front end never launches on empty tensors)
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const T v = x[at[i]];
    if (v > m || v != v) m = v;
  }
  return cuda::block_max(m, reinterpret_cast<T*>(scratch));
}

template <class T>
__device__ double row_sum_exp(const T* x, const StridedRow& at, std::int64_t n, T m, double* scratch) {
  double acc = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += double(cuda::DeviceMath<T>::exp(x[at[i]] - m));
  return cuda::block_sum(acc, scratch);
}

template <class T>
__global__ void softmax_kernel(const T* x, T* y, std::int64_t n, std::int64_t inner) {
  extern __shared__ double scratch[];
  const StridedRow at(n, inner);
  const T m = row_max(x, at, n, scratch);
  const T inv = static_cast<T>(1.0 / row_sum_exp(x, at, n, m, scratch));
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) y[at[i]] = cuda::DeviceMath<T>::exp(x[at[i]] - m) * inv;
}

template <class T>
__global__ void log_softmax_kernel(const T* x, T* y, std::int64_t n, std::int64_t inner) {
  extern __shared__ double scratch[];
  const StridedRow at(n, inner);
  const T m = row_max(x, at, n, scratch);
  const T log_s = static_cast<T>(::log(row_sum_exp(x, at, n, m, scratch)));
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) y[at[i]] = (x[at[i]] - m) - log_s;
}

template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* dy, T* dx, std::int64_t n, std::int64_t inner) {
  extern __shared__ double scratch[];
  const StridedRow at(n, inner);
  double acc = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += double(dy[at[i]]) * double(y[at[i]]);
  const T dot = static_cast<T>(cuda::block_sum(acc, scratch));
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) dx[at[i]] = y[at[i]] * (dy[at[i]] - dot);
}

template <class T>
__global__ void log_softmax_backward_kernel(const T* y, const T* dy, T* dx, std::int64_t n, std::int64_t inner) {
  extern __shared__ double scratch[];
  const StridedRow at(n, inner);
  double acc = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += double(dy[at[i]]);
  const T total = static_cast<T>(cuda::block_sum(acc, scratch));
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x)
    dx[at[i]] = dy[at[i]] - cuda::DeviceMath<T>::exp(y[at[i]]) * total;
}

// ---------------------------------------------------------------- a warp per row

constexpr int kWarpRowMax = 1024;  // the longest row a warp takes (32 lanes x 32 registers)
constexpr int kRowsPerBlock = 8;   // warps (rows) per 256-thread block

// The last two are the attention's (cuda/attention.cu), each three passes over the [B*H, T, S]
// scores fused into one: softmax of the causally masked, scaled scores (scale * s, then -inf
// where key j > query i + S - T, then softmax), and softmax's backward times scale. Each does the
// separate ops' roundings in the same order (s * scale rounded to T; y * (dy - dot) rounded, then
// times scale), so the fused results are bitwise those of the three kernels.
enum class RowOp {
  Softmax,
  LogSoftmax,
  SoftmaxBackward,
  LogSoftmaxBackward,
  ScaledCausalSoftmax,
  ScaledSoftmaxBackward
};

// Rows of the attention's scores [B*H, T, S]: row r is query i = r % T; keys j >= keep(i) =
// clamp(i + S - T + 1, 0, S) are masked (cuda/mask.cu's boundary).
struct AttentionRows {
  std::int64_t queries = 1;  // T
  double scale = 1.0;
};

template <class T>
__device__ T warp_max(T v) {  // NaN wins, as block_max
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const T other = __shfl_xor_sync(cuda::kFullWarpMask, v, offset);
    if (other > v || other != other) v = other;
  }
  return v;
}

using cuda::warp_sum;  // the same sum in every lane (cuda/device_utils.cuh)

// Row r = blockIdx.x * 8 + warp of [rows, n]: kOp on a (x, or y for the backwards) and b (dy;
// unused by the forwards), into out. The same formulas as the block kernels above.
template <class T, RowOp kOp, int kPerLane>
__global__ void warp_row_kernel(const T* a, const T* b, T* out, std::int64_t rows, int n, AttentionRows attention) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const T* a_row = a + row * n;
  constexpr bool kBackward =
      kOp == RowOp::SoftmaxBackward || kOp == RowOp::LogSoftmaxBackward || kOp == RowOp::ScaledSoftmaxBackward;
  constexpr bool kMasked = kOp == RowOp::ScaledCausalSoftmax;
  const T scale = static_cast<T>(attention.scale);
  std::int64_t keep = n;  // the row's unmasked keys
  if constexpr (kMasked) {
    keep = row % attention.queries + (n - attention.queries) + 1;
    keep = keep < 0 ? 0 : (keep > n ? n : keep);
  }
  const T masked = -cuda::DeviceMath<T>::infinity();
  // The row's element i as the softmax sees it (scaled and masked for the attention's rows).
  const auto element = [&](int i) -> T {
    if constexpr (kMasked) return i < keep ? cuda::DeviceMath<T>::mul_rounded(a_row[i], scale) : masked;
    return a_row[i];
  };
  T va[kPerLane], vb[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int i = lane + 32 * j;
    va[j] = i < n ? element(i) : T(0);
    if constexpr (kBackward) vb[j] = i < n ? b[row * n + i] : T(0);
  }
  T* out_row = out + row * n;
  if constexpr (!kBackward) {
    T m = element(0);  // an element of the row (n >= 1), in every lane: a lane past n has no element of its own
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (lane + 32 * j < n && (va[j] > m || va[j] != va[j])) m = va[j];
    m = warp_max(m);
    double acc = 0.0;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      if (lane + 32 * j >= n) continue;
      vb[j] = cuda::DeviceMath<T>::exp(va[j] - m);
      acc += double(vb[j]);
    }
    const double s = warp_sum(acc);
    if constexpr (kOp != RowOp::LogSoftmax) {
      const T inv = static_cast<T>(1.0 / s);
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (lane + 32 * j < n) out_row[lane + 32 * j] = vb[j] * inv;
    } else {
      const T log_s = static_cast<T>(::log(s));
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (lane + 32 * j < n) out_row[lane + 32 * j] = (va[j] - m) - log_s;
    }
  } else {
    double acc = 0.0;  // padding lanes hold 0: they add nothing
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      if constexpr (kOp == RowOp::LogSoftmaxBackward) acc += double(vb[j]);
      else acc += double(vb[j]) * double(va[j]);
    }
    const T total = static_cast<T>(warp_sum(acc));
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      if (lane + 32 * j >= n) continue;
      if constexpr (kOp == RowOp::SoftmaxBackward) {
        out_row[lane + 32 * j] = va[j] * (vb[j] - total);
      } else if constexpr (kOp == RowOp::ScaledSoftmaxBackward) {
        const T dx = va[j] * (vb[j] - total);  // rounded, as softmax_backward's output, then scaled
        out_row[lane + 32 * j] = cuda::DeviceMath<T>::mul_rounded(dx, scale);
      } else {
        out_row[lane + 32 * j] = vb[j] - cuda::DeviceMath<T>::exp(va[j]) * total;
      }
    }
  }
}

template <class T, RowOp kOp, int kPerLane>
void launch_warp_rows_at(const T* a, const T* b, T* out, std::int64_t rows, int n, AttentionRows attention) {
  const std::int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  warp_row_kernel<T, kOp, kPerLane>
      <<<static_cast<unsigned int>(blocks), kRowsPerBlock * 32, 0, cuda::stream()>>>(a, b, out, rows, n, attention);
  MOELAB_CUDA_CHECK_LAUNCH();
}

// Whether rows of n at stride inner take the warp kernels.
bool warp_rows(std::int64_t rows, std::int64_t n, std::int64_t inner) {
  return inner == 1 && n <= kWarpRowMax && rows <= 0x7fffffffLL * kRowsPerBlock && !cuda::generic_kernels();
}

template <class T, RowOp kOp>
void launch_warp_rows(const Tensor& shape_of, std::int64_t n, const T* a, const T* b, T* out,
                      AttentionRows attention = {}) {
  const std::int64_t rows = shape_of.numel() / n;
  const int count = static_cast<int>(n);
  if (n <= 32) launch_warp_rows_at<T, kOp, 1>(a, b, out, rows, count, attention);
  else if (n <= 64) launch_warp_rows_at<T, kOp, 2>(a, b, out, rows, count, attention);
  else if (n <= 128) launch_warp_rows_at<T, kOp, 4>(a, b, out, rows, count, attention);
  else if (n <= 256) launch_warp_rows_at<T, kOp, 8>(a, b, out, rows, count, attention);
  else if (n <= 512) launch_warp_rows_at<T, kOp, 16>(a, b, out, rows, count, attention);
  else launch_warp_rows_at<T, kOp, 32>(a, b, out, rows, count, attention);
}

// ---------------------------------------------------------------- dispatch

// Launches kernel<<<rows, row_threads(n), shared>>>(args..., n, inner), rows = numel / n, for a
// tensor seen as [outer, n, inner] (the last axis: n = its size, inner = 1).
template <class Kernel, class... Args>
void launch_rows(const Tensor& shape_of, std::int64_t n, std::int64_t inner, Kernel kernel, Args... args) {
  const std::int64_t rows = shape_of.numel() / n;
  MOELAB_CHECK(rows <= 0x7fffffffLL, "softmax", "too many rows for one launch: ", rows);
  const int threads = cuda::row_threads(n);
  kernel<<<static_cast<unsigned int>(rows), threads, threads * sizeof(double), cuda::stream()>>>(args..., n, inner);
  MOELAB_CUDA_CHECK_LAUNCH();
}

// The last axis of t: [rows, n] with inner = 1.
std::int64_t last_axis(const Tensor& t) { return t.shape().back(); }

}  // namespace

namespace cuda {

bool fused_attention_softmax(const Tensor& scores, double scale, Tensor& p) {
  const std::int64_t n = scores.size(-1);
  if (!warp_rows(scores.numel() / n, n, 1)) return false;
  dispatch_float(scores.dtype(), [&]<class T>() {
    launch_warp_rows<T, RowOp::ScaledCausalSoftmax>(scores, n, scores.data<T>(), nullptr, p.data<T>(),
                                                    AttentionRows{scores.size(-2), scale});
  });
  return true;
}

bool fused_attention_softmax_backward(const Tensor& p, const Tensor& dp, double scale, Tensor& ds) {
  const std::int64_t n = p.size(-1);
  if (!warp_rows(p.numel() / n, n, 1)) return false;
  dispatch_float(p.dtype(), [&]<class T>() {
    launch_warp_rows<T, RowOp::ScaledSoftmaxBackward>(p, n, p.data<T>(), dp.data<T>(), ds.data<T>(),
                                                      AttentionRows{p.size(-2), scale});
  });
  return true;
}

}  // namespace cuda

void CudaBackend::softmax(const Tensor& x, std::int64_t, std::int64_t n, std::int64_t inner, Tensor& y) {
  dispatch_float(x.dtype(), [&]<class T>() {
    if (warp_rows(x.numel() / n, n, inner))
      launch_warp_rows<T, RowOp::Softmax>(x, n, x.data<T>(), nullptr, y.data<T>());
    else
      launch_rows(x, n, inner, softmax_kernel<T>, x.data<T>(), y.data<T>());
  });
}

void CudaBackend::log_softmax(const Tensor& x, Tensor& y) {
  dispatch_float(x.dtype(), [&]<class T>() {
    const std::int64_t n = last_axis(x);
    if (warp_rows(x.numel() / n, n, 1))
      launch_warp_rows<T, RowOp::LogSoftmax>(x, n, x.data<T>(), nullptr, y.data<T>());
    else
      launch_rows(x, n, 1, log_softmax_kernel<T>, x.data<T>(), y.data<T>());
  });
}

void CudaBackend::softmax_backward(const Tensor& y, const Tensor& dy, std::int64_t, std::int64_t n, std::int64_t inner,
                                   Tensor& dx) {
  dispatch_float(y.dtype(), [&]<class T>() {
    if (warp_rows(y.numel() / n, n, inner))
      launch_warp_rows<T, RowOp::SoftmaxBackward>(y, n, y.data<T>(), dy.data<T>(), dx.data<T>());
    else
      launch_rows(y, n, inner, softmax_backward_kernel<T>, y.data<T>(), dy.data<T>(), dx.data<T>());
  });
}

void CudaBackend::log_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  dispatch_float(y.dtype(), [&]<class T>() {
    const std::int64_t n = last_axis(y);
    if (warp_rows(y.numel() / n, n, 1))
      launch_warp_rows<T, RowOp::LogSoftmaxBackward>(y, n, y.data<T>(), dy.data<T>(), dx.data<T>());
    else
      launch_rows(y, n, 1, log_softmax_backward_kernel<T>, y.data<T>(), dy.data<T>(), dx.data<T>());
  });
}

}  // namespace moelab
