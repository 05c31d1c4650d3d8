// cuda/tile_gemm.cuh — the tiled GEMM inside the grouped matrix products (cuda/grouped_matmul.cu):
// one thread block computes one output tile from shared-memory tiles of its two operands.
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
//
// Which tile each kernel uses, and what that measured, is in cuda/grouped_matmul.cu's header.
#pragma once

#include <cstdint>

namespace moelab::cuda {

// A tile shape: kM x kN outputs per 256-thread block (16 x 16 threads, each owning a
// (kM / 16) x (kN / 16) block of registers), k advancing 16 at a time. Four are instantiated
// (cuda/grouped_matmul.cu's GroupedTiles picks one per kernel; above, what each costs).
template <int kM, int kN, bool kVec = false, int kStages = 1>
struct Tile {
  static constexpr int M = kM;                    // output rows per block tile
  static constexpr int N = kN;                    // output columns per block tile
  static constexpr int K = 16;                    // k per shared-memory step
  static constexpr int ThreadsX = 16;             // threads along a tile's columns
  static constexpr int ThreadsY = 16;             // threads along a tile's rows
  static constexpr int Threads = ThreadsX * ThreadsY;  // 256
  static constexpr int BlocksPerSM = 2;           // the kernels' __launch_bounds__: at most 128 registers
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

template <class T, class Tl>
struct __align__(32) SharedTiles {  // 32: the alignment WMMA loads need (cuda/mma_tile_gemm.cuh)
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

// One thread's share of a block's k-steps (the operands as tile_product describes them): fetch(k0)
// reads LoadsA elements of A and LoadsB of B of the k-step at k0 from global memory into
// registers, stash(tile) writes them into a shared tile. Consecutive threads read consecutive
// addresses of the row-major source (coalesced); out-of-range elements (past m_count, n_count or
// k_count) load as 0. Offsets inside a k-step are int (below 128 * lda + 16: the host keeps lda
// and ldb, the matrices' widths, below 2^24), which spares the registers 64-bit index
// arithmetic would take. Shared by tile_product and the tensor-core tile (cuda/mma_tile_gemm.cuh).
template <class T, class Tl, bool kATransposed, bool kBTransposed>
struct TileLoads {
  const T* a;
  std::int64_t lda;
  const T* b;
  std::int64_t ldb;
  int m_count, n_count;
  std::int64_t k_count;
  T a_next[Tl::LoadsA], b_next[Tl::LoadsB];

  __device__ __forceinline__ void fetch(std::int64_t k0) {
    const T* a_step = kATransposed ? a + k0 * lda : a + k0;  // A[.][k0], B[k0][.]
    const T* b_step = kBTransposed ? b + k0 : b + k0 * ldb;
    const int k_left = k_count - k0 < Tl::K ? static_cast<int>(k_count - k0) : Tl::K;
    const int lda32 = static_cast<int>(lda), ldb32 = static_cast<int>(ldb);
#pragma unroll
    for (int l = 0; l < Tl::LoadsA; ++l) {
      const int at = static_cast<int>(threadIdx.x) + l * Tl::Threads;
      const int m = kATransposed ? at % Tl::M : at / Tl::K;  // transposed: m is the contiguous index
      const int k = kATransposed ? at / Tl::M : at % Tl::K;
      T v{};  // zero (also for __nv_bfloat16, whose T(0) would be ambiguous)
      if (m < m_count && k < k_left) v = a_step[kATransposed ? k * lda32 + m : m * lda32 + k];
      a_next[l] = v;
    }
#pragma unroll
    for (int l = 0; l < Tl::LoadsB; ++l) {
      const int at = static_cast<int>(threadIdx.x) + l * Tl::Threads;
      const int n = kBTransposed ? at / Tl::K : at % Tl::N;  // not transposed: n is the contiguous index
      const int k = kBTransposed ? at % Tl::K : at / Tl::N;
      T v{};  // zero (also for __nv_bfloat16, whose T(0) would be ambiguous)
      if (n < n_count && k < k_left) v = b_step[kBTransposed ? n * ldb32 + k : k * ldb32 + n];
      b_next[l] = v;
    }
  }

  __device__ __forceinline__ void stash(SharedTiles<T, Tl>& tile) const {
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
  }
};

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

  TileLoads<T, Tl, kATransposed, kBTransposed> loads{a, lda, b, ldb, m_count, n_count, k_count};
  const auto fetch = [&](std::int64_t k0) { loads.fetch(k0); };
  const auto stash = [&](SharedTiles<T, Tl>& tile) { loads.stash(tile); };
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

}  // namespace moelab::cuda
