// cuda/norm.cu — fused RMSNorm and LayerNorm, forward and backward, on the GPU (mirrors
// core/cpu/norm.cpp, which spells out the maths).
//
// x: [N, d] (all leading axes flattened), w, b: [d], mean, rstd: [N]. Per row, xhat is the
// normalised row and g = dy * w the gradient reaching it:
//   rmsnorm    rstd = 1 / sqrt(sum(x^2) / d + eps),           y = (x * rstd) * w
//   layernorm  mean = sum(x) / d, rstd = 1 / sqrt(sum((x - mean)^2) / d + eps)  (two passes),
//              y = ((x - mean) * rstd) * w + b
//   backward   rmsnorm dx = rstd * (g - xhat * mean(g xhat)),
//              layernorm dx = rstd * ((g - mean(g)) - xhat * mean(g xhat)),
//              dw = sum over rows of dy * xhat, db = sum over rows of dy.
// As on the CPU, every sum is accumulated in double whatever the dtype, the statistics are
// computed in double and rounded to the dtype once, and the elementwise parts are evaluated in
// the dtype in the CPU's operation order. The products and sums of those elementwise parts use
// the round-to-nearest intrinsics (__fmul_rn, __fadd_rn, ...), which nvcc never fuses into an FMA,
// so each is one IEEE operation, as written.
//
// Parallel decomposition:
//   forward and dx: one warp (32 threads) per row. Lane l accumulates columns l, l+32, ... in
//     double; a butterfly of __shfl_xor_sync adds the 32 lane sums. Every lane ends with the same
//     bits (each level adds the same two numbers on both partners), the tree depends only on d,
//     so a row's sum is bitwise the same run after run. No shared memory, no atomics. Then the
//     lanes write their columns (coalesced). Rows are independent: warps grid-stride over rows.
//   dw and db: sums over rows, in a fixed order, in two kernels and no atomics:
//     1. the rows are cut into chunks of kRowsPerPartial; block (chunk, column tile) has one
//        thread per column, which adds its chunk's rows in ascending order (in double) into
//        partial[chunk, column] (consecutive threads read consecutive columns: coalesced);
//     2. one thread per column adds partial[0..chunks-1, column] in ascending chunk order and
//        rounds to the dtype.
//     The chunk size is a constant, so the order of additions depends only on N and d: bitwise
//     repeatable. It differs from the CPU's straight row loop only in how the double sum is
//     parenthesised, far below float32 rounding.
#include <cstdint>

#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"
#include "cuda/rounded_math.cuh"

namespace moelab {
namespace {

constexpr std::int64_t kRowsPerPartial = 64;  // rows per partial sum of dw/db
constexpr int kColumnThreads = 256;           // columns per block of the dw/db kernels

using namespace cuda::rounded;  // mul, add, ...: no FMA contraction (cuda/rounded_math.cuh)

using cuda::warp_sum;

// The first row of this warp and the row stride of the grid (warp-uniform: every lane agrees).
__device__ inline std::int64_t first_warp() {
  return (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
}
__device__ inline std::int64_t warp_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32; }

template <class T>
__global__ void rmsnorm_kernel(const T* x, const T* w, std::int64_t rows, std::int64_t d, double eps, T* y, T* rstd) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  for (std::int64_t r = first_warp(); r < rows; r += warp_stride()) {
    const T* xr = x + r * d;
    double acc = 0;
    for (std::int64_t c = lane; c < d; c += 32) {
      const double v = xr[c];
      acc += v * v;
    }
    const double mean_square = warp_sum(acc) / static_cast<double>(d);
    const T rs = static_cast<T>(1.0 / sqrt(mean_square + eps));
    if (lane == 0) rstd[r] = rs;
    T* yr = y + r * d;
    for (std::int64_t c = lane; c < d; c += 32) yr[c] = mul(mul(xr[c], rs), w[c]);
  }
}

template <class T>
__global__ void rmsnorm_dx_kernel(const T* x, const T* w, const T* rstd, const T* dy, std::int64_t rows,
                                  std::int64_t d, T* dx) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  for (std::int64_t r = first_warp(); r < rows; r += warp_stride()) {
    const T* xr = x + r * d;
    const T* dyr = dy + r * d;
    const T rs = rstd[r];
    double acc = 0;
    for (std::int64_t c = lane; c < d; c += 32)
      acc += static_cast<double>(mul(dyr[c], w[c])) * static_cast<double>(mul(xr[c], rs));
    const T mean_gx = static_cast<T>(warp_sum(acc) / static_cast<double>(d));
    T* dxr = dx + r * d;
    for (std::int64_t c = lane; c < d; c += 32) {
      const T g = mul(dyr[c], w[c]), xhat = mul(xr[c], rs);
      dxr[c] = mul(rs, sub(g, mul(xhat, mean_gx)));
    }
  }
}

template <class T>
__global__ void layernorm_kernel(const T* x, const T* w, const T* b, std::int64_t rows, std::int64_t d, double eps,
                                 T* y, T* mean, T* rstd) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  for (std::int64_t r = first_warp(); r < rows; r += warp_stride()) {
    const T* xr = x + r * d;
    double acc = 0;
    for (std::int64_t c = lane; c < d; c += 32) acc += static_cast<double>(xr[c]);
    const double mu = warp_sum(acc) / static_cast<double>(d);
    acc = 0;
    for (std::int64_t c = lane; c < d; c += 32) {
      const double v = static_cast<double>(xr[c]) - mu;
      acc += v * v;
    }
    const double var = warp_sum(acc) / static_cast<double>(d);
    const T mu_t = static_cast<T>(mu), rs = static_cast<T>(1.0 / sqrt(var + eps));
    if (lane == 0) {
      mean[r] = mu_t;
      rstd[r] = rs;
    }
    T* yr = y + r * d;
    for (std::int64_t c = lane; c < d; c += 32) yr[c] = add(mul(mul(sub(xr[c], mu_t), rs), w[c]), b[c]);
  }
}

template <class T>
__global__ void layernorm_dx_kernel(const T* x, const T* w, const T* mean, const T* rstd, const T* dy,
                                    std::int64_t rows, std::int64_t d, T* dx) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  for (std::int64_t r = first_warp(); r < rows; r += warp_stride()) {
    const T* xr = x + r * d;
    const T* dyr = dy + r * d;
    const T mu = mean[r], rs = rstd[r];
    double acc_g = 0, acc_gx = 0;
    for (std::int64_t c = lane; c < d; c += 32) {
      const T g = mul(dyr[c], w[c]), xhat = mul(sub(xr[c], mu), rs);
      acc_g += static_cast<double>(g);
      acc_gx += static_cast<double>(g) * static_cast<double>(xhat);
    }
    const T mean_g = static_cast<T>(warp_sum(acc_g) / static_cast<double>(d));
    const T mean_gx = static_cast<T>(warp_sum(acc_gx) / static_cast<double>(d));
    T* dxr = dx + r * d;
    for (std::int64_t c = lane; c < d; c += 32) {
      const T g = mul(dyr[c], w[c]), xhat = mul(sub(xr[c], mu), rs);
      dxr[c] = mul(rs, sub(sub(g, mean_g), mul(xhat, mean_gx)));
    }
  }
}

// partial_w[chunk, c] = sum of dy[r, c] * xhat[r, c] over the chunk's rows in ascending order,
// xhat = (x - mean[r]) * rstd[r] (mean == nullptr: rmsnorm, mean 0); partial_b likewise with dy
// alone (skipped when partial_b == nullptr). Grid: x = chunk, y = column tile.
template <class T>
__global__ void weight_grad_partial_kernel(const T* x, const T* mean, const T* rstd, const T* dy, std::int64_t rows,
                                           std::int64_t d, double* partial_w, double* partial_b) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= d) return;
  const std::int64_t chunk = blockIdx.x, r0 = chunk * kRowsPerPartial;
  const std::int64_t r1 = r0 + kRowsPerPartial < rows ? r0 + kRowsPerPartial : rows;
  double acc_w = 0, acc_b = 0;
  for (std::int64_t r = r0; r < r1; ++r) {
    const T mu = mean ? mean[r] : T(0);
    const T xhat = mul(sub(x[r * d + c], mu), rstd[r]);
    const double g = static_cast<double>(dy[r * d + c]);
    acc_w += g * static_cast<double>(xhat);
    acc_b += g;
  }
  partial_w[chunk * d + c] = acc_w;
  if (partial_b) partial_b[chunk * d + c] = acc_b;
}

// out[c] = sum of partial[0..chunks-1, c] in ascending order, rounded to T.
template <class T>
__global__ void sum_partials_kernel(const double* partial, std::int64_t chunks, std::int64_t d, T* out) {
  for (std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < d;
       c += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    double acc = 0;
    for (std::int64_t k = 0; k < chunks; ++k) acc += partial[k * d + c];
    out[c] = static_cast<T>(acc);
  }
}

// dw (and db when wanted) from the two kernels above. mean == nullptr for rmsnorm.
template <class T>
void weight_grads(const Tensor& x, const T* mean, const Tensor& rstd, const Tensor& dy, Tensor& dw, Tensor* db) {
  const std::int64_t d = x.size(-1), rows = x.numel() / d;
  const std::int64_t chunks = (rows + kRowsPerPartial - 1) / kRowsPerPartial;
  const std::int64_t tiles = (d + kColumnThreads - 1) / kColumnThreads;
  MOELAB_CHECK(tiles <= 65535 && chunks <= 0x7fffffff, "norm backward", "x ", x.shape(),
               " is too large for the CUDA weight-gradient kernels");
  Tensor partial_w = Tensor::empty({chunks, d}, DType::Float64, x.device());
  Tensor partial_b;
  if (db) partial_b = Tensor::empty({chunks, d}, DType::Float64, x.device());
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(tiles));
  weight_grad_partial_kernel<T><<<grid, kColumnThreads, 0, cuda::stream()>>>(
      x.data<T>(), mean, rstd.data<T>(), dy.data<T>(), rows, d, partial_w.data<double>(),
      db ? partial_b.data<double>() : nullptr);
  MOELAB_CUDA_CHECK_LAUNCH();
  sum_partials_kernel<T><<<cuda::blocks_for(d), cuda::kThreads, 0, cuda::stream()>>>(partial_w.data<double>(), chunks,
                                                                                     d, dw.data<T>());
  MOELAB_CUDA_CHECK_LAUNCH();
  if (db) {
    sum_partials_kernel<T><<<cuda::blocks_for(d), cuda::kThreads, 0, cuda::stream()>>>(partial_b.data<double>(),
                                                                                       chunks, d, db->data<T>());
    MOELAB_CUDA_CHECK_LAUNCH();
  }
}

// Launch geometry of the warp-per-row kernels: 8 warps per block, one warp per row.
unsigned row_blocks(std::int64_t rows) { return cuda::blocks_for(rows * 32); }

template <class T>
void rmsnorm_typed(const Tensor& x, const Tensor& w, double eps, Tensor& y, Tensor& rstd) {
  const std::int64_t d = x.size(-1), rows = x.numel() / d;
  rmsnorm_kernel<T><<<row_blocks(rows), cuda::kThreads, 0, cuda::stream()>>>(x.data<T>(), w.data<T>(), rows, d, eps,
                                                                             y.data<T>(), rstd.data<T>());
  MOELAB_CUDA_CHECK_LAUNCH();
}

template <class T>
void rmsnorm_backward_typed(const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dy, Tensor& dx,
                            Tensor& dw) {
  const std::int64_t d = x.size(-1), rows = x.numel() / d;
  rmsnorm_dx_kernel<T><<<row_blocks(rows), cuda::kThreads, 0, cuda::stream()>>>(
      x.data<T>(), w.data<T>(), rstd.data<T>(), dy.data<T>(), rows, d, dx.data<T>());
  MOELAB_CUDA_CHECK_LAUNCH();
  weight_grads<T>(x, nullptr, rstd, dy, dw, nullptr);
}

template <class T>
void layernorm_typed(const Tensor& x, const Tensor& w, const Tensor& b, double eps, Tensor& y, Tensor& mean,
                     Tensor& rstd) {
  const std::int64_t d = x.size(-1), rows = x.numel() / d;
  layernorm_kernel<T><<<row_blocks(rows), cuda::kThreads, 0, cuda::stream()>>>(
      x.data<T>(), w.data<T>(), b.data<T>(), rows, d, eps, y.data<T>(), mean.data<T>(), rstd.data<T>());
  MOELAB_CUDA_CHECK_LAUNCH();
}

template <class T>
void layernorm_backward_typed(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                              const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db) {
  const std::int64_t d = x.size(-1), rows = x.numel() / d;
  layernorm_dx_kernel<T><<<row_blocks(rows), cuda::kThreads, 0, cuda::stream()>>>(
      x.data<T>(), w.data<T>(), mean.data<T>(), rstd.data<T>(), dy.data<T>(), rows, d, dx.data<T>());
  MOELAB_CUDA_CHECK_LAUNCH();
  weight_grads<T>(x, mean.data<T>(), rstd, dy, dw, &db);
}

}  // namespace

void CudaBackend::rmsnorm(const Tensor& x, const Tensor& w, double eps, Tensor& y, Tensor& rstd) {
  if (x.dtype() == DType::Float64) rmsnorm_typed<double>(x, w, eps, y, rstd);
  else rmsnorm_typed<float>(x, w, eps, y, rstd);
}

void CudaBackend::rmsnorm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dy, Tensor& dx,
                                   Tensor& dw) {
  if (x.dtype() == DType::Float64) rmsnorm_backward_typed<double>(x, w, rstd, dy, dx, dw);
  else rmsnorm_backward_typed<float>(x, w, rstd, dy, dx, dw);
}

void CudaBackend::layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, Tensor& y, Tensor& mean,
                            Tensor& rstd) {
  if (x.dtype() == DType::Float64) layernorm_typed<double>(x, w, b, eps, y, mean, rstd);
  else layernorm_typed<float>(x, w, b, eps, y, mean, rstd);
}

void CudaBackend::layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                                     const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db) {
  if (x.dtype() == DType::Float64) layernorm_backward_typed<double>(x, w, mean, rstd, dy, dx, dw, db);
  else layernorm_backward_typed<float>(x, w, mean, rstd, dy, dx, dw, db);
}

}  // namespace moelab
