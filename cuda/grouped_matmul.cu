// cuda/grouped_matmul.cu — grouped matrix products whose group offsets stay on the GPU, the MoE
// expert layers (mirrors core/cpu/grouped_matmul.cpp).
//
// Group e owns rows r0 = offsets[e] .. r1 - 1 = offsets[e+1] - 1 of x; offsets: int32 [E + 1],
// made on the device by routing (cuda/routing.cu) and never read back to the host:
//   forward:      out[r0:r1] = x[r0:r1] @ op(w[e])   x_e: [rows, in], w[e]: [in, out] (stored
//                                                    [out, in] when trans_w) -> [rows, out]
//                 out[offsets[E]:N] = 0               (rows in no group: what a capacity dropped)
//   weight grad:  dw[e] = x_e^T @ dy_e                [in, rows] @ [rows, out] -> [in, out]
//                 (zeros for a group with no rows; rows past offsets[E] are not read)
//
// Why not cuBLAS. cuBLAS takes every size (here the rows of each group) as a host integer, so a
// loop of cuBLAS GEMMs (what this file used to be) or cublasGemmGroupedBatchedEx first copies the
// offsets to the host, and that copy drains the stream: every MoE layer, forward and backward,
// would wait for the GPU to finish all the work queued before it. So the products here are our
// own tiled GEMM, in which every thread block reads the offsets itself, on the device:
//
//   forward   grid.x = ceil(N / 64) + E "row-tile slots", grid.y = ceil(out / 64) column tiles.
//             Group e needs ceil(rows_e / 64) row tiles, and since sum_e rows_e <= N,
//             sum_e ceil(rows_e / 64) <= ceil(N / 64) + E: that many slots always suffice.
//             Block (s, j) walks the groups adding up their tile counts until it reaches its
//             slot s: that gives its group e and its 64 rows; slots past the last tile exit at
//             once. Each block computes one 64 x 64 tile of out from x's rows and w[e].
//             A second small kernel zeroes rows offsets[E] .. N-1.
//   weight    grid = (ceil(out / 64), ceil(in / 64), E): block (j, i, e) computes one 64 x 64
//   grad      tile of dw[e], looping k over the rows of group e (none: it writes zeros).
//
// The tile GEMM (tile_product): 256 threads, each owning a 4 x 4 block of the 64 x 64 output
// tile in registers (rows ty + 16i, columns tx + 16j, so that the shared-memory reads of a warp
// hit distinct banks or broadcast); k advances 16 at a time through two shared-memory tiles, A
// [16 x 64] and B [16 x 64], loaded so that consecutive threads read consecutive addresses of
// the row-major source (coalesced), and padded by one column against bank conflicts on the
// stores. Out-of-range elements (past the group's rows, past out, past k) load as 0. float and
// double share the template; accumulation is in T, as cuBLAS's.
//
// Determinism: each output element is summed over k = 0, 1, ... in that order by exactly one
// thread, with no atomics and no split-k, so the result is bitwise the same run after run (not
// bitwise the CPU's: nvcc contracts the multiply-adds into FMAs, the CPU's blocked GEMM sums in
// another order).
//
// The offsets are checked on the device (check_group_offsets, cuda/group_offsets.cuh): a bad
// entry is reported at the next synchronisation, and every kernel reads them clamped to [0, N]
// (a group that ends before it starts is empty), so bad offsets can give a wrong result (with
// groups that overlap, more tiles than slots: some rows are then left unwritten) but never a
// read or write outside the tensors.
//
// Cost, honestly. This runs on the CUDA cores in FP32/FP64 FMAs: no tensor cores, no TF32, no
// asynchronous copies or double buffering. On an H100/H200 that is maybe a fifth to a third of
// what cuBLAS reaches on the same shapes in float32 (an estimate, not a measurement). What it
// buys is a MoE layer with no host round trip. A faster version (tensor-core MMA tiles,
// cp.async pipelining, or cuBLASLt grouped GEMM with device-side size arrays if a future CUDA
// allows it) would change only this file. This file has been compiled (nvcc, sm_90) but has
// never run on a GPU: it is checked by reading only, and the CPU twin is what tests exercise.
#include <algorithm>
#include <climits>
#include <cstdint>

#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_errors.cuh"
#include "cuda/device_utils.cuh"
#include "cuda/group_offsets.cuh"

namespace moelab {
namespace {

constexpr int kTileM = 64;                      // output rows per block tile
constexpr int kTileN = 64;                      // output columns per block tile
constexpr int kTileK = 16;                      // k per shared-memory step
constexpr int kThreadsX = 16;                   // threads along a tile's columns
constexpr int kThreadsY = 16;                   // threads along a tile's rows
constexpr int kTileThreads = kThreadsX * kThreadsY;  // 256
constexpr int kRegM = kTileM / kThreadsY;       // 4 output rows per thread
constexpr int kRegN = kTileN / kThreadsX;       // 4 output columns per thread
static_assert(kTileM * kTileK % kTileThreads == 0 && kTileN * kTileK % kTileThreads == 0,
              "every thread loads the same number of elements of each shared tile");
constexpr int kCheckThreads = 256;              // threads of the offsets check (one block)
constexpr unsigned int kMaxGridYZ = 65535;      // CUDA's limit on grid.y and grid.z

using cuda::clamped_offset;

// ---------------------------------------------------------------- the offsets check

// One block: records the first e where 0 = offsets[0] <= ... <= offsets[groups] <= rows fails.
__global__ void check_offsets_kernel(const std::int32_t* offsets, std::int64_t groups, std::int64_t rows, int op,
                                     cuda::DeviceError* error) {
  __shared__ unsigned long long first_bad;
  if (threadIdx.x == 0) first_bad = ULLONG_MAX;
  __syncthreads();
  for (std::int64_t e = threadIdx.x; e <= groups; e += blockDim.x) {
    const std::int64_t v = offsets[e];
    const bool bad = (e == 0 ? v != 0 : v < offsets[e - 1]) || v > rows;
    if (bad) atomicMin(&first_bad, static_cast<unsigned long long>(e));
  }
  __syncthreads();
  if (threadIdx.x == 0 && first_bad != ULLONG_MAX) {
    const auto e = static_cast<std::int64_t>(first_bad);
    cuda::report_index_error(error, op, e, offsets[e], rows);
  }
}

// ---------------------------------------------------------------- the tile GEMM

template <class T>
struct SharedTiles {
  T a[kTileK][kTileM + 1];  // a[k][m] = A[m][k0 + k]  (+1: no bank conflicts on the stores)
  T b[kTileK][kTileN + 1];  // b[k][n] = B[k0 + k][n]
};

// One 64 x 64 tile C = A @ B by the whole block (call it from every thread of a 256-thread block):
//   A: [m_count, k_count], A[m][k] = a[kATransposed ? k * lda + m : m * lda + k], m_count <= 64
//   B: [k_count, n_count], B[k][n] = b[kBTransposed ? n * ldb + k : k * ldb + n], n_count <= 64
//   C: c[m * ldc + n] for m < m_count, n < n_count (written, never read; k_count = 0 writes zeros).
// The layout flags pick the load pattern that keeps consecutive threads on consecutive addresses.
template <class T, bool kATransposed, bool kBTransposed>
__device__ void tile_product(const T* a, std::int64_t lda, const T* b, std::int64_t ldb, int m_count, int n_count,
                             std::int64_t k_count, T* c, std::int64_t ldc) {
  __shared__ SharedTiles<T> tiles;
  const int tx = static_cast<int>(threadIdx.x) % kThreadsX, ty = static_cast<int>(threadIdx.x) / kThreadsX;
  T acc[kRegM][kRegN];
#pragma unroll
  for (int i = 0; i < kRegM; ++i)
#pragma unroll
    for (int j = 0; j < kRegN; ++j) acc[i][j] = T(0);

  for (std::int64_t k0 = 0; k0 < k_count; k0 += kTileK) {
#pragma unroll
    for (int l = 0; l < kTileM * kTileK / kTileThreads; ++l) {
      const int at = static_cast<int>(threadIdx.x) + l * kTileThreads;
      const int m = kATransposed ? at % kTileM : at / kTileK;  // transposed: m is the contiguous index
      const int k = kATransposed ? at / kTileM : at % kTileK;
      T v = T(0);
      if (m < m_count && k0 + k < k_count) v = kATransposed ? a[(k0 + k) * lda + m] : a[m * lda + k0 + k];
      tiles.a[k][m] = v;
    }
#pragma unroll
    for (int l = 0; l < kTileN * kTileK / kTileThreads; ++l) {
      const int at = static_cast<int>(threadIdx.x) + l * kTileThreads;
      const int n = kBTransposed ? at / kTileK : at % kTileN;  // not transposed: n is the contiguous index
      const int k = kBTransposed ? at % kTileK : at / kTileN;
      T v = T(0);
      if (n < n_count && k0 + k < k_count) v = kBTransposed ? b[n * ldb + k0 + k] : b[(k0 + k) * ldb + n];
      tiles.b[k][n] = v;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTileK; ++k) {
      T a_reg[kRegM], b_reg[kRegN];
#pragma unroll
      for (int i = 0; i < kRegM; ++i) a_reg[i] = tiles.a[k][ty + i * kThreadsY];
#pragma unroll
      for (int j = 0; j < kRegN; ++j) b_reg[j] = tiles.b[k][tx + j * kThreadsX];
#pragma unroll
      for (int i = 0; i < kRegM; ++i)
#pragma unroll
        for (int j = 0; j < kRegN; ++j) acc[i][j] += a_reg[i] * b_reg[j];
    }
    __syncthreads();  // the tiles are overwritten by the next step
  }

#pragma unroll
  for (int i = 0; i < kRegM; ++i) {
    const int m = ty + i * kThreadsY;
    if (m >= m_count) continue;
#pragma unroll
    for (int j = 0; j < kRegN; ++j) {
      const int n = tx + j * kThreadsX;
      if (n < n_count) c[m * ldc + n] = acc[i][j];
    }
  }
}

// ---------------------------------------------------------------- forward

// x: [rows, in], w: [groups, in, out] (or [groups, out, in] when kTransW), out: [rows, out].
// grid = (row-tile slots, column tiles); see the header for how a block finds its group.
template <class T, bool kTransW>
__global__ void __launch_bounds__(kTileThreads)
    grouped_forward_kernel(const T* x, const T* w, const std::int32_t* offsets, std::int64_t groups,
                           std::int64_t rows, std::int64_t in, std::int64_t out_dim, T* out) {
  std::int64_t slot = blockIdx.x;
  std::int64_t group = -1, tile_row = 0, group_end = 0;
  std::int64_t r0 = clamped_offset(offsets, 0, rows);
  for (std::int64_t e = 0; e < groups; ++e) {  // the same walk in every thread: no divergence
    const std::int64_t r1 = clamped_offset(offsets, e + 1, rows);
    const std::int64_t tiles = r1 > r0 ? (r1 - r0 + kTileM - 1) / kTileM : 0;
    if (slot < tiles) {
      group = e;
      tile_row = r0 + slot * kTileM;
      group_end = r1;
      break;
    }
    slot -= tiles;
    r0 = r1;
  }
  if (group < 0) return;  // a spare slot (the grid is an upper bound); the whole block leaves
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.y) * kTileN;
  const T* w_e = w + group * in * out_dim;
  // B = op(w[e]) restricted to columns n0..: B[k][n] = w_e[k * out + n0 + n], or w_e[(n0 + n) * in + k].
  const T* b = kTransW ? w_e + n0 * in : w_e + n0;
  const std::int64_t ldb = kTransW ? in : out_dim;
  const int m_count = static_cast<int>(group_end - tile_row < kTileM ? group_end - tile_row : kTileM);
  const int n_count = static_cast<int>(out_dim - n0 < kTileN ? out_dim - n0 : kTileN);
  tile_product<T, false, kTransW>(x + tile_row * in, in, b, ldb, m_count, n_count, in, out + tile_row * out_dim + n0,
                                  out_dim);
}

// out rows offsets[groups] .. rows-1 (clamped) := 0; out: [rows, out_dim].
template <class T>
__global__ void zero_rows_past_groups_kernel(const std::int32_t* offsets, std::int64_t groups, std::int64_t rows,
                                             std::int64_t out_dim, T* out) {
  const std::int64_t begin = clamped_offset(offsets, groups, rows) * out_dim, end = rows * out_dim;
  for (std::int64_t i = begin + cuda::first_index(); i < end; i += cuda::grid_stride()) out[i] = T(0);
}

// ---------------------------------------------------------------- weight gradient

// x: [rows, in], dy: [rows, out], dw: [groups, in, out]; grid = (column tiles, row tiles of in, groups).
template <class T>
__global__ void __launch_bounds__(kTileThreads)
    grouped_weight_grad_kernel(const T* x, const T* dy, const std::int32_t* offsets, std::int64_t rows,
                               std::int64_t in, std::int64_t out_dim, T* dw) {
  const std::int64_t e = blockIdx.z;
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.y) * kTileM;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.x) * kTileN;
  const std::int64_t r0 = clamped_offset(offsets, e, rows), r1 = clamped_offset(offsets, e + 1, rows);
  const std::int64_t k_count = r1 > r0 ? r1 - r0 : 0;  // 0: an empty group, the tile is written as zeros
  const int m_count = static_cast<int>(in - i0 < kTileM ? in - i0 : kTileM);
  const int n_count = static_cast<int>(out_dim - n0 < kTileN ? out_dim - n0 : kTileN);
  // A[m][k] = x_e^T[i0 + m][k] = x[(r0 + k) * in + i0 + m]; B[k][n] = dy[(r0 + k) * out + n0 + n].
  tile_product<T, true, false>(x + r0 * in + i0, in, dy + r0 * out_dim + n0, out_dim, m_count, n_count, k_count,
                               dw + (e * in + i0) * out_dim + n0, out_dim);
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

namespace cuda {

void check_group_offsets(const std::int32_t* offsets, std::int64_t groups, std::int64_t rows, int op) {
  check_offsets_kernel<<<1, kCheckThreads, 0, stream()>>>(offsets, groups, rows, op, device_error());
  MOELAB_CUDA_CHECK_LAUNCH();
}

}  // namespace cuda

void CudaBackend::grouped_matmul(const Tensor& x, const Tensor& w, const Tensor& offsets, bool trans_w,
                                 Tensor& out) {
  // x: [N, in], w: [E, in, out] or [E, out, in], offsets: int32 [E + 1] on the GPU, out: [N, out].
  const std::int64_t groups = w.size(0), rows = x.size(0), in = x.size(1), out_dim = out.size(1);
  const std::int32_t* off = offsets.data<std::int32_t>();
  cuda::check_group_offsets(off, groups, rows, cuda::kGroupedMatmul);  // also for empty sizes
  if (out.numel() == 0) return;
  const std::int64_t slots = ceil_div(rows, kTileM) + groups, column_tiles = ceil_div(out_dim, kTileN);
  MOELAB_CHECK(slots <= INT_MAX && column_tiles <= kMaxGridYZ, "grouped_matmul", "N = ", rows, ", E = ", groups,
               ", out = ", out_dim, " need more thread blocks than the CUDA backend's tiling allows");
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    T* po = out.data<T>();
    if (groups > 0) {  // in == 0 is fine: every tile is a sum over nothing and is written as zeros
      const dim3 grid(static_cast<unsigned int>(slots), static_cast<unsigned int>(column_tiles));
      if (trans_w)
        grouped_forward_kernel<T, true><<<grid, kTileThreads, 0, cuda::stream()>>>(px, pw, off, groups, rows, in,
                                                                                   out_dim, po);
      else
        grouped_forward_kernel<T, false><<<grid, kTileThreads, 0, cuda::stream()>>>(px, pw, off, groups, rows, in,
                                                                                    out_dim, po);
      MOELAB_CUDA_CHECK_LAUNCH();
    }
    // The rows past offsets[E]: a grid-stride loop over at most all N rows (most threads of a
    // grid sized for the worst case find nothing to do; capped, since the count is unknown here).
    const unsigned int zero_blocks = std::min(cuda::blocks_for(rows * out_dim), 1024u);
    zero_rows_past_groups_kernel<T><<<zero_blocks, cuda::kThreads, 0, cuda::stream()>>>(off, groups, rows, out_dim,
                                                                                         po);
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::grouped_matmul_weight_grad(const Tensor& x, const Tensor& dy, const Tensor& offsets, Tensor& dw) {
  // x: [N, in], dy: [N, out], offsets: int32 [E + 1] on the GPU, dw: [E, in, out] = x_e^T @ dy_e.
  const std::int64_t groups = dw.size(0), rows = x.size(0), in = x.size(1), out_dim = dy.size(1);
  const std::int32_t* off = offsets.data<std::int32_t>();
  cuda::check_group_offsets(off, groups, rows, cuda::kGroupedMatmulWeightGrad);  // also for empty sizes
  if (dw.numel() == 0) return;
  const std::int64_t column_tiles = ceil_div(out_dim, kTileN), row_tiles = ceil_div(in, kTileM);
  MOELAB_CHECK(column_tiles <= INT_MAX && row_tiles <= kMaxGridYZ && groups <= kMaxGridYZ,
               "grouped_matmul_weight_grad", "E = ", groups, ", in = ", in, ", out = ", out_dim,
               " need more thread blocks than the CUDA backend's tiling allows");
  const dim3 grid(static_cast<unsigned int>(column_tiles), static_cast<unsigned int>(row_tiles),
                  static_cast<unsigned int>(groups));
  dispatch_float(x.dtype(), [&]<class T>() {
    grouped_weight_grad_kernel<T><<<grid, kTileThreads, 0, cuda::stream()>>>(x.data<T>(), dy.data<T>(), off, rows,
                                                                             in, out_dim, dw.data<T>());
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace moelab
