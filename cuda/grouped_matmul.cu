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
//   forward   grid.x = ceil(N / M) + E "row-tile slots", grid.y = ceil(out / N) column tiles
//             (an M x N tile: 128 x 128 for float32 by default, 64 x 64 for float64).
//             Group e needs ceil(rows_e / M) row tiles, and since sum_e rows_e <= N,
//             sum_e ceil(rows_e / M) <= ceil(N / M) + E: that many slots always suffice.
//             Block (s, j) walks the groups adding up their tile counts until it reaches its
//             slot s: that gives its group e and its M rows; slots past the last tile exit at
//             once. Each block computes one M x N tile of out from x's rows and w[e].
//             A second small kernel zeroes rows offsets[E] .. N-1.
//   weight    grid = (ceil(out / N), ceil(in / M), E * splits): block (j, i, e * splits + c)
//   grad      computes one M x N tile of dw[e] over the c-th of `splits` runs of group e's rows
//             (none: it writes zeros). With splits > 1 (too few tiles to fill the GPU) the runs'
//             tiles go to a scratch buffer and a second kernel adds them in order c = 0, 1, ...
//
// The tile GEMM (tile_product): 256 threads (16 x 16), each owning an (M / 16) x (N / 16) block of
// the output tile in registers; k advances 16 at a time through two shared-memory tiles, A
// [16 x M] and B [16 x N], loaded so that consecutive threads read consecutive addresses of the
// row-major source (coalesced). Out-of-range elements (past the group's rows, past out, past k)
// load as 0. float and double share the template; accumulation is in T, as cuBLAS's. Three tiles:
//   64 x 64     a thread owns rows ty + 16i and columns tx + 16j (4 x 4): 8 shared-memory reads
//               for 16 multiply-adds per k; rows padded by 1 against bank conflicts.
//   128 x 128   the same layout with 8 x 8 per thread: 16 reads for 64 multiply-adds.
//   128 x 128v  a thread owns rows ty*4 + {0..3} and 64 + ty*4 + {0..3} (columns alike) and reads
//               them as 4 float4 (rows padded by 4, keeping 16-byte alignment): 4 reads for 64
//               multiply-adds. The default for float32.
//   128 x 128d  128v with two shared tiles used in turn (double buffering): each thread loads the
//               next k-step's elements into registers before multiplying out of the current tile
//               and stores them into the other tile after, so global memory's latency can hide
//               behind the arithmetic and a k-step has one barrier instead of two. Not faster on
//               an H200 (docs/results/gpu-h200-2026-11-26-2: 245.1k tokens/s against 128v's
//               247.2k on 8 experts, 221.7k against 222.8k on 64): two resident blocks of 8 warps
//               per SM already hide the loads, and the prefetch registers push the forward kernel
//               to 128 registers with a small spill. Kept as an option for other GPUs.
// MOELAB_GROUPED_TILE picks one per kernel (GroupedTiles below). On an H100 (the GPU preset's
// step, 8 experts top-2, d 512; docs/results/gpu-h100-2026-11-26) the step ran at 168.5k tokens/s
// with 64 x 64 tiles and no split, 169.5k with 128 x 128, 188.0k with 128 x 128 and the split
// weight gradient, 197.8k with 128 x 128v: the 64 x 64 weight gradient had run at about 15 TFLOP/s,
// the forward at 28 (ncu), cuBLAS's float32 GEMMs at about 45 on the same card.
//
// Determinism: each output element is summed over k = 0, 1, ... in that order by exactly one
// thread, with no atomics, so the result is bitwise the same run after run and for every tile
// shape; the weight gradient's splits, a function of the shapes only (never of the GPU), add the
// runs' sums in a fixed order. Not bitwise the CPU's: nvcc contracts the multiply-adds into FMAs,
// the CPU's blocked GEMM sums in another order.
//
// The offsets are checked on the device (check_group_offsets, cuda/group_offsets.cuh): a bad
// entry is reported at the next synchronisation, and every kernel reads them clamped to [0, N]
// (a group that ends before it starts is empty), so bad offsets can give a wrong result (with
// groups that overlap, more tiles than slots: some rows are then left unwritten) but never a
// read or write outside the tensors.
//
// Cost, honestly. This runs on the CUDA cores in FP32/FP64 FMAs: no tensor cores, no TF32, no
// asynchronous copies (cp.async) or vector loads from global memory. What it buys is a MoE layer
// with no host round trip.
// A faster version (tensor-core MMA tiles, cp.async pipelining, or cuBLASLt grouped GEMM with
// device-side size arrays if a future CUDA allows it) would change only this file.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "cuda/caching_allocator.h"
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_errors.cuh"
#include "cuda/device_utils.cuh"
#include "cuda/group_offsets.cuh"

namespace moelab {
namespace {

// A tile shape: kM x kN outputs per 256-thread block (16 x 16 threads, each owning a
// (kM / 16) x (kN / 16) block of registers), k advancing 16 at a time. Three are instantiated
// (GroupedTiles below picks one per kernel; see the header for what each costs).
template <int kM, int kN, bool kVec = false, int kStages = 1>
struct Tile {
  static constexpr int M = kM;                    // output rows per block tile
  static constexpr int N = kN;                    // output columns per block tile
  static constexpr int K = 16;                    // k per shared-memory step
  static constexpr int ThreadsX = 16;             // threads along a tile's columns
  static constexpr int ThreadsY = 16;             // threads along a tile's rows
  static constexpr int Threads = ThreadsX * ThreadsY;  // 256
  static constexpr int RegM = M / ThreadsY;       // output rows per thread
  static constexpr int RegN = N / ThreadsX;       // output columns per thread
  // kVec (float only): a thread owns rows ty*4 + {0..3} and M/2 + ty*4 + {0..3} (columns alike),
  // so that it reads its A and B values from shared memory as two float4 each instead of 8
  // scalars; the rows of the shared tiles are then padded by 4 (16-byte alignment) instead of 1.
  static constexpr bool Vec = kVec;
  static constexpr int Pad = kVec ? 4 : 1;
  static_assert(!kVec || (RegM == 8 && RegN == 8), "the vector layout is two float4 per operand");
  // kStages = 2: two shared tiles; while the block multiplies out of one, each thread already
  // holds the next k-step's elements in registers (loaded from global memory before the
  // multiply, stored into the other tile after it), so the loads' latency hides behind the
  // arithmetic and a k-step needs one __syncthreads instead of two.
  static constexpr int Stages = kStages;
  static_assert(kStages == 1 || kStages == 2, "one shared tile, or two in turn");
  static constexpr int LoadsA = M * K / Threads;  // elements of A each thread loads per k-step
  static constexpr int LoadsB = N * K / Threads;
  static_assert(M % ThreadsY == 0 && N % ThreadsX == 0, "whole register blocks");
  static_assert(M * K % Threads == 0 && N * K % Threads == 0,
                "every thread loads the same number of elements of each shared tile");
};
using SmallTile = Tile<64, 64>;
using LargeTile = Tile<128, 128>;
using WideTile = Tile<128, 128, true>;  // float32 only
using PipelinedTile = Tile<128, 128, true, 2>;  // float32 only
constexpr int kTileThreads = 256;               // every tile's block size
constexpr int kCheckThreads = 256;              // threads of the offsets check (one block)
constexpr unsigned int kMaxGridYZ = 65535;      // CUDA's limit on grid.y and grid.z
constexpr std::int64_t kMaxWidth = 1 << 24;     // in and out below this: tile_product's int offsets

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

template <class T, class Tl>
struct __align__(16) SharedTiles {
  T a[Tl::K][Tl::M + Tl::Pad];  // a[k][m] = A[m][k0 + k]  (+1: no bank conflicts on the stores)
  T b[Tl::K][Tl::N + Tl::Pad];  // b[k][n] = B[k0 + k][n]
};

// The tile row (or column) of a thread's i-th register row: ty + 16 i, or, in the vector layout,
// ty * 4 + i for i < 4 and half + ty * 4 + (i - 4) after.
template <class Tl>
__device__ __forceinline__ int register_row(int t, int i, int half) {
  if constexpr (Tl::Vec) return (i / 4) * half + t * 4 + i % 4;
  return t + i * Tl::ThreadsY;
}

// One Tl::M x Tl::N tile C = A @ B by the whole block (call it from every thread of a 256-thread block):
//   A: [m_count, k_count], A[m][k] = a[kATransposed ? k * lda + m : m * lda + k], m_count <= Tl::M
//   B: [k_count, n_count], B[k][n] = b[kBTransposed ? n * ldb + k : k * ldb + n], n_count <= Tl::N
//   C: c[m * ldc + n] for m < m_count, n < n_count (written, never read; k_count = 0 writes zeros).
// The layout flags pick the load pattern that keeps consecutive threads on consecutive addresses.
// Each output element is one thread's sum over k = 0, 1, ... whatever the tile shape, so both
// shapes give the same bits.
template <class T, class Tl, bool kATransposed, bool kBTransposed>
__device__ void tile_product(const T* a, std::int64_t lda, const T* b, std::int64_t ldb, int m_count, int n_count,
                             std::int64_t k_count, T* c, std::int64_t ldc) {
  __shared__ SharedTiles<T, Tl> tiles[Tl::Stages];
  const int tx = static_cast<int>(threadIdx.x) % Tl::ThreadsX, ty = static_cast<int>(threadIdx.x) / Tl::ThreadsX;
  T acc[Tl::RegM][Tl::RegN];
#pragma unroll
  for (int i = 0; i < Tl::RegM; ++i)
#pragma unroll
    for (int j = 0; j < Tl::RegN; ++j) acc[i][j] = T(0);

  // This thread's share of the k-step at k0: LoadsA elements of A and LoadsB of B, read from
  // global memory into registers (fetch), then written to a shared tile (stash). Offsets inside
  // a k-step are int (below 128 * lda + 16: the host keeps lda and ldb, the matrices' widths,
  // below kMaxWidth = 2^24), which spares the registers 64-bit index arithmetic would take.
  T a_next[Tl::LoadsA], b_next[Tl::LoadsB];
  const auto fetch = [&](std::int64_t k0) {
    const T* a_step = kATransposed ? a + k0 * lda : a + k0;  // A[.][k0], B[k0][.]
    const T* b_step = kBTransposed ? b + k0 : b + k0 * ldb;
    const int k_left = k_count - k0 < Tl::K ? static_cast<int>(k_count - k0) : Tl::K;
    const int lda32 = static_cast<int>(lda), ldb32 = static_cast<int>(ldb);
#pragma unroll
    for (int l = 0; l < Tl::LoadsA; ++l) {
      const int at = static_cast<int>(threadIdx.x) + l * Tl::Threads;
      const int m = kATransposed ? at % Tl::M : at / Tl::K;  // transposed: m is the contiguous index
      const int k = kATransposed ? at / Tl::M : at % Tl::K;
      T v = T(0);
      if (m < m_count && k < k_left) v = a_step[kATransposed ? k * lda32 + m : m * lda32 + k];
      a_next[l] = v;
    }
#pragma unroll
    for (int l = 0; l < Tl::LoadsB; ++l) {
      const int at = static_cast<int>(threadIdx.x) + l * Tl::Threads;
      const int n = kBTransposed ? at / Tl::K : at % Tl::N;  // not transposed: n is the contiguous index
      const int k = kBTransposed ? at % Tl::K : at / Tl::N;
      T v = T(0);
      if (n < n_count && k < k_left) v = b_step[kBTransposed ? n * ldb32 + k : k * ldb32 + n];
      b_next[l] = v;
    }
  };
  const auto stash = [&](SharedTiles<T, Tl>& tile) {
#pragma unroll
    for (int l = 0; l < Tl::LoadsA; ++l) {
      const int at = static_cast<int>(threadIdx.x) + l * Tl::Threads;
      tile.a[kATransposed ? at / Tl::M : at % Tl::K][kATransposed ? at % Tl::M : at / Tl::K] = a_next[l];
    }
#pragma unroll
    for (int l = 0; l < Tl::LoadsB; ++l) {
      const int at = static_cast<int>(threadIdx.x) + l * Tl::Threads;
      tile.b[kBTransposed ? at % Tl::K : at / Tl::N][kBTransposed ? at / Tl::K : at % Tl::N] = b_next[l];
    }
  };
  // acc += this k-step's A tile @ B tile, k = 0, 1, ..., 15 in order.
  const auto multiply = [&](const SharedTiles<T, Tl>& tile) {
#pragma unroll
    for (int k = 0; k < Tl::K; ++k) {
      T a_reg[Tl::RegM], b_reg[Tl::RegN];
      if constexpr (Tl::Vec) {
        const float4 a0 = *reinterpret_cast<const float4*>(&tile.a[k][ty * 4]);
        const float4 a1 = *reinterpret_cast<const float4*>(&tile.a[k][Tl::M / 2 + ty * 4]);
        const float4 b0 = *reinterpret_cast<const float4*>(&tile.b[k][tx * 4]);
        const float4 b1 = *reinterpret_cast<const float4*>(&tile.b[k][Tl::N / 2 + tx * 4]);
        a_reg[0] = a0.x, a_reg[1] = a0.y, a_reg[2] = a0.z, a_reg[3] = a0.w;
        a_reg[4] = a1.x, a_reg[5] = a1.y, a_reg[6] = a1.z, a_reg[7] = a1.w;
        b_reg[0] = b0.x, b_reg[1] = b0.y, b_reg[2] = b0.z, b_reg[3] = b0.w;
        b_reg[4] = b1.x, b_reg[5] = b1.y, b_reg[6] = b1.z, b_reg[7] = b1.w;
      } else {
#pragma unroll
        for (int i = 0; i < Tl::RegM; ++i) a_reg[i] = tile.a[k][register_row<Tl>(ty, i, Tl::M / 2)];
#pragma unroll
        for (int j = 0; j < Tl::RegN; ++j) b_reg[j] = tile.b[k][register_row<Tl>(tx, j, Tl::N / 2)];
      }
#pragma unroll
      for (int i = 0; i < Tl::RegM; ++i)
#pragma unroll
        for (int j = 0; j < Tl::RegN; ++j) acc[i][j] += a_reg[i] * b_reg[j];
    }
  };

  if constexpr (Tl::Stages == 1) {
    for (std::int64_t k0 = 0; k0 < k_count; k0 += Tl::K) {
      fetch(k0);
      stash(tiles[0]);
      __syncthreads();
      multiply(tiles[0]);
      __syncthreads();  // the tile is overwritten by the next step
    }
  } else {
    // Step s multiplies out of tiles[s % 2] while step s + 1's elements travel from global memory
    // into registers, then stores them into tiles[(s + 1) % 2]: nobody reads that tile during
    // step s (its last readers were in step s - 1, before the barrier that ended it), and the
    // barrier at the end of step s makes the stores visible to step s + 1.
    if (k_count > 0) {
      fetch(0);
      stash(tiles[0]);
    }
    __syncthreads();
    int current = 0;
    for (std::int64_t k0 = 0; k0 < k_count; k0 += Tl::K) {
      const bool more = k0 + Tl::K < k_count;  // the same in every thread: the barrier is uniform
      if (more) fetch(k0 + Tl::K);
      multiply(tiles[current]);
      if (more) stash(tiles[current ^ 1]);
      __syncthreads();
      current ^= 1;
    }
  }

#pragma unroll
  for (int i = 0; i < Tl::RegM; ++i) {
    const int m = register_row<Tl>(ty, i, Tl::M / 2);
    if (m >= m_count) continue;
#pragma unroll
    for (int j = 0; j < Tl::RegN; ++j) {
      const int n = register_row<Tl>(tx, j, Tl::N / 2);
      if (n < n_count) c[m * ldc + n] = acc[i][j];
    }
  }
}

// ---------------------------------------------------------------- forward

// x: [rows, in], w: [groups, in, out] (or [groups, out, in] when kTransW), out: [rows, out].
// grid = (row-tile slots, column tiles); see the header for how a block finds its group.
template <class T, class Tl, bool kTransW>
__global__ void __launch_bounds__(kTileThreads, 2)
    grouped_forward_kernel(const T* x, const T* w, const std::int32_t* offsets, std::int64_t groups,
                           std::int64_t rows, std::int64_t in, std::int64_t out_dim, T* out) {
  std::int64_t slot = blockIdx.x;
  std::int64_t group = -1, tile_row = 0, group_end = 0;
  std::int64_t r0 = clamped_offset(offsets, 0, rows);
  for (std::int64_t e = 0; e < groups; ++e) {  // the same walk in every thread: no divergence
    const std::int64_t r1 = clamped_offset(offsets, e + 1, rows);
    const std::int64_t tiles = r1 > r0 ? (r1 - r0 + Tl::M - 1) / Tl::M : 0;
    if (slot < tiles) {
      group = e;
      tile_row = r0 + slot * Tl::M;
      group_end = r1;
      break;
    }
    slot -= tiles;
    r0 = r1;
  }
  if (group < 0) return;  // a spare slot (the grid is an upper bound); the whole block leaves
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.y) * Tl::N;
  const T* w_e = w + group * in * out_dim;
  // B = op(w[e]) restricted to columns n0..: B[k][n] = w_e[k * out + n0 + n], or w_e[(n0 + n) * in + k].
  const T* b = kTransW ? w_e + n0 * in : w_e + n0;
  const std::int64_t ldb = kTransW ? in : out_dim;
  const int m_count = static_cast<int>(group_end - tile_row < Tl::M ? group_end - tile_row : Tl::M);
  const int n_count = static_cast<int>(out_dim - n0 < Tl::N ? out_dim - n0 : Tl::N);
  tile_product<T, Tl, false, kTransW>(x + tile_row * in, in, b, ldb, m_count, n_count, in,
                                      out + tile_row * out_dim + n0, out_dim);
}

// out rows offsets[groups] .. rows-1 (clamped) := 0; out: [rows, out_dim].
template <class T>
__global__ void zero_rows_past_groups_kernel(const std::int32_t* offsets, std::int64_t groups, std::int64_t rows,
                                             std::int64_t out_dim, T* out) {
  const std::int64_t begin = clamped_offset(offsets, groups, rows) * out_dim, end = rows * out_dim;
  for (std::int64_t i = begin + cuda::first_index(); i < end; i += cuda::grid_stride()) out[i] = T(0);
}

// ---------------------------------------------------------------- weight gradient

// x: [rows, in], dy: [rows, out]; grid = (column tiles, row tiles of in, groups * splits).
// Block (j, i, e * splits + c) sums the c-th of `splits` equal runs of group e's rows:
//   dw_part[c][e] = x_e[run c]^T @ dy_e[run c]   dw_part: [splits, groups, in, out]
// (splits = 1: dw_part is dw itself; otherwise sum_splits_kernel adds the runs in order c = 0, 1, ...).
template <class T, class Tl>
__global__ void __launch_bounds__(kTileThreads, 2)
    grouped_weight_grad_kernel(const T* x, const T* dy, const std::int32_t* offsets, std::int64_t groups,
                               std::int64_t splits, std::int64_t rows, std::int64_t in, std::int64_t out_dim,
                               T* dw_part) {
  const std::int64_t e = blockIdx.z / splits, c = blockIdx.z % splits;
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.y) * Tl::M;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.x) * Tl::N;
  const std::int64_t g0 = clamped_offset(offsets, e, rows), g1 = clamped_offset(offsets, e + 1, rows);
  const std::int64_t length = g1 > g0 ? g1 - g0 : 0;  // 0: an empty group, the tile is written as zeros
  const std::int64_t r0 = g0 + length * c / splits, k_count = g0 + length * (c + 1) / splits - r0;
  const int m_count = static_cast<int>(in - i0 < Tl::M ? in - i0 : Tl::M);
  const int n_count = static_cast<int>(out_dim - n0 < Tl::N ? out_dim - n0 : Tl::N);
  T* dw = dw_part + c * groups * in * out_dim;
  // A[m][k] = x_e^T[i0 + m][k] = x[(r0 + k) * in + i0 + m]; B[k][n] = dy[(r0 + k) * out + n0 + n].
  tile_product<T, Tl, true, false>(x + r0 * in + i0, in, dy + r0 * out_dim + n0, out_dim, m_count, n_count, k_count,
                                   dw + (e * in + i0) * out_dim + n0, out_dim);
}

// dw[i] = part[0][i] + part[1][i] + ... + part[splits - 1][i], in that order; part: [splits, count].
template <class T>
__global__ void sum_splits_kernel(const T* part, std::int64_t splits, std::int64_t count, T* dw) {
  for (std::int64_t i = cuda::first_index(); i < count; i += cuda::grid_stride()) {
    T total = part[i];
    for (std::int64_t c = 1; c < splits; ++c) total += part[c * count + i];
    dw[i] = total;
  }
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The tile of the float32 forward and weight-gradient kernels (float64 always uses 64 x 64: a
// 128 x 128 tile's 64 double accumulators a thread would spill): MOELAB_GROUPED_TILE=SHAPE or
// =FORWARD,WEIGHT_GRAD with each one of 64 (SmallTile), 128 (LargeTile), 128v (WideTile), 128d (PipelinedTile), for
// benchmarks and for the parity tests that run every shape. Results are bitwise the same for
// every choice (see tile_product); the weight gradient's splits (below) do change them.
enum class TileShape { Small, Large, Wide, Pipelined };

struct GroupedTiles {  // the default: see the header
  TileShape forward = TileShape::Wide;
  TileShape weight_grad = TileShape::Wide;
};

GroupedTiles grouped_tiles() {
  static const GroupedTiles tiles = [] {
    GroupedTiles chosen;
    const char* value = std::getenv("MOELAB_GROUPED_TILE");
    if (value == nullptr || *value == '\0') return chosen;
    const std::string text(value);
    const std::size_t comma = text.find(',');
    const std::string first = text.substr(0, comma), second = comma == std::string::npos ? first : text.substr(comma + 1);
    const auto shape = [&](const std::string& part) {
      MOELAB_CHECK(part == "64" || part == "128" || part == "128v" || part == "128d", "grouped_matmul",
                   "MOELAB_GROUPED_TILE='", text,
                   "': expected 64, 128, 128v, 128d or FORWARD,WEIGHT_GRAD with each one of those");
      return part == "64"     ? TileShape::Small
             : part == "128"  ? TileShape::Large
             : part == "128v" ? TileShape::Wide
                              : TileShape::Pipelined;
    };
    chosen.forward = shape(first);
    chosen.weight_grad = shape(second);
    return chosen;
  }();
  return tiles;
}

// Calls body.template operator()<Tl>() with the tile type of `shape` (float; float64: SmallTile).
template <class T, class Body>
void with_tile(TileShape shape, Body&& body) {
  if constexpr (std::is_same_v<T, float>) {
    switch (shape) {
      case TileShape::Small: body.template operator()<SmallTile>(); return;
      case TileShape::Large: body.template operator()<LargeTile>(); return;
      case TileShape::Wide: body.template operator()<WideTile>(); return;
      case TileShape::Pipelined: body.template operator()<PipelinedTile>(); return;
    }
  }
  body.template operator()<SmallTile>();
}

// out = grouped x @ op(w) with tile Tl; the grid covers the worst case (see the header).
template <class T, class Tl>
void launch_grouped_forward(const T* x, const T* w, const std::int32_t* offsets, std::int64_t groups,
                            std::int64_t rows, std::int64_t in, std::int64_t out_dim, bool trans_w, T* out) {
  const std::int64_t slots = ceil_div(rows, Tl::M) + groups, column_tiles = ceil_div(out_dim, Tl::N);
  MOELAB_CHECK(slots <= INT_MAX && column_tiles <= kMaxGridYZ && in < kMaxWidth && out_dim < kMaxWidth,
               "grouped_matmul", "N = ", rows, ", E = ", groups, ", in = ", in, ", out = ", out_dim,
               " need more thread blocks (or wider offsets) than the CUDA backend's tiling allows");
  const dim3 grid(static_cast<unsigned int>(slots), static_cast<unsigned int>(column_tiles));
  if (trans_w)
    grouped_forward_kernel<T, Tl, true>
        <<<grid, kTileThreads, 0, cuda::stream()>>>(x, w, offsets, groups, rows, in, out_dim, out);
  else
    grouped_forward_kernel<T, Tl, false>
        <<<grid, kTileThreads, 0, cuda::stream()>>>(x, w, offsets, groups, rows, in, out_dim, out);
  MOELAB_CUDA_CHECK_LAUNCH();
}

// dw[e] = x_e^T @ dy_e with tile Tl. With few tiles (E * tiles of dw[e] below kTargetBlocks: 128
// blocks for E = 8 and d = 512, on a GPU with 132 SMs) each block would sum thousands of rows
// while most of the GPU idles, so each group's rows are cut into `splits` runs whose products go
// to a scratch buffer and are added in a fixed order: deterministic, and a function of the shapes
// alone (not of the GPU), so every GPU gives the same bits. MOELAB_GROUPED_SPLIT=1 turns it off.
constexpr std::int64_t kTargetBlocks = 512;
constexpr std::int64_t kMaxSplits = 8;

std::int64_t max_splits() {
  static const std::int64_t limit = [] {
    const char* value = std::getenv("MOELAB_GROUPED_SPLIT");
    if (value == nullptr || *value == '\0') return kMaxSplits;
    const std::string text(value);
    MOELAB_CHECK(text.size() == 1 && text[0] >= '1' && text[0] <= '8', "grouped_matmul_weight_grad",
                 "MOELAB_GROUPED_SPLIT='", text, "': expected a number from 1 to 8 (the most runs a group's rows are cut into)");
    return static_cast<std::int64_t>(text[0] - '0');
  }();
  return limit;
}

template <class T, class Tl>
void launch_grouped_weight_grad(const T* x, const T* dy, const std::int32_t* offsets, std::int64_t groups,
                                std::int64_t rows, std::int64_t in, std::int64_t out_dim, T* dw) {
  const std::int64_t column_tiles = ceil_div(out_dim, Tl::N), row_tiles = ceil_div(in, Tl::M);
  const std::int64_t tiles = column_tiles * row_tiles * groups;
  std::int64_t splits = std::min(max_splits(), std::max<std::int64_t>(1, ceil_div(kTargetBlocks, tiles)));
  // Runs of fewer than 2 k-steps of rows are not worth a scratch buffer (rows / groups: the mean group).
  splits = std::max<std::int64_t>(1, std::min(splits, rows / std::max<std::int64_t>(groups, 1) / (2 * Tl::K)));
  MOELAB_CHECK(column_tiles <= INT_MAX && row_tiles <= kMaxGridYZ && groups * splits <= kMaxGridYZ && in < kMaxWidth &&
                   out_dim < kMaxWidth,
               "grouped_matmul_weight_grad", "E = ", groups, ", in = ", in, ", out = ", out_dim,
               " need more thread blocks (or wider offsets) than the CUDA backend's tiling allows");
  const dim3 grid(static_cast<unsigned int>(column_tiles), static_cast<unsigned int>(row_tiles),
                  static_cast<unsigned int>(groups * splits));
  const std::int64_t count = groups * in * out_dim;
  if (splits == 1) {
    grouped_weight_grad_kernel<T, Tl>
        <<<grid, kTileThreads, 0, cuda::stream()>>>(x, dy, offsets, groups, 1, rows, in, out_dim, dw);
    MOELAB_CUDA_CHECK_LAUNCH();
    return;
  }
  cuda::DeviceBuffer<T> part(static_cast<std::size_t>(splits * count));
  grouped_weight_grad_kernel<T, Tl>
      <<<grid, kTileThreads, 0, cuda::stream()>>>(x, dy, offsets, groups, splits, rows, in, out_dim, part.get());
  MOELAB_CUDA_CHECK_LAUNCH();
  sum_splits_kernel<T><<<cuda::blocks_for(count), cuda::kThreads, 0, cuda::stream()>>>(part.get(), splits, count, dw);
  MOELAB_CUDA_CHECK_LAUNCH();
}

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
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    T* po = out.data<T>();
    if (groups > 0) {  // in == 0 is fine: every tile is a sum over nothing and is written as zeros
      with_tile<T>(grouped_tiles().forward, [&]<class Tl>() {
        launch_grouped_forward<T, Tl>(px, pw, off, groups, rows, in, out_dim, trans_w, po);
      });
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
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    const T* pdy = dy.data<T>();
    T* pdw = dw.data<T>();
    with_tile<T>(grouped_tiles().weight_grad, [&]<class Tl>() {
      launch_grouped_weight_grad<T, Tl>(px, pdy, off, groups, rows, in, out_dim, pdw);
    });
  });
}

}  // namespace moelab
