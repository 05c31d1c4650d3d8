// cuda/mma_tile_gemm.cuh — the grouped products' tile GEMM on the tensor cores (WMMA): one thread
// block computes one 128 x 128 output tile, as tile_product (cuda/tile_gemm.cuh) does on the
// CUDA cores, with the same operand layouts, the same loads and the same shared tiles.
//
// Three kinds of product (MmaKind), all with float32 accumulation and float32 results:
//   TF32     float32 operands rounded to TF32 (10 mantissa bits, __float_to_tf32: to nearest,
//            ties away from zero) and multiplied on the tensor cores, m16n16k8. Each product of
//            two TF32 values is exact in float32, so the result is the float32 sum of the
//            rounded operands' products: about 1e-3 relative error against float32 operands
//            (--precision tf32; cuBLAS's TF32 math mode does the same to the dense products).
//   TF32x3   float32 accuracy on TF32 tensor cores ("3xTF32", as in CUTLASS): each operand is
//            split as x = big + small with big = tf32(x), small = tf32(x - big), and
//            a b ~ a_small b_big + a_big b_small + a_big b_big (the small x small term, about
//            2^-22 relative, is dropped): three MMAs instead of one, small terms first.
//   BF16     bfloat16 operands as they are, m16n16k16: bf16 x bf16 products are exact in float32
//            (mixed precision: autograd/precision.h hands the products bf16 copies).
//
// Layout. 256 threads = 8 warps as 2 (rows) x 4 (columns); a warp owns a 64 x 32 block of the
// tile: 4 x 2 accumulator fragments of 16 x 16. k advances 16 per shared-memory step (one bf16
// MMA, or two TF32 MMAs of k 8). The shared tiles are tile_product's: a[k][m] is A stored column
// by column (WMMA's col_major matrix_a with leading dimension M + Pad), b[k][n] is B row by row
// (row_major matrix_b, N + Pad). WMMA wants 32-byte aligned fragment addresses and leading
// dimensions of 16 bytes: Pad = 4 floats / 8 bf16 keeps both (132 floats = 528 bytes a row, and
// the k offsets used, 0 and 8 rows, are multiples of 32 bytes).
// The accumulators leave through a 16 x 16 float staging square per warp in shared memory, so
// that the tile's edges (m_count, n_count) are written element by element, never past them.
//
// Determinism: a fragment's sums are done by the tensor cores in a fixed order, so results are
// bitwise the same run after run; they are not tile_product's bits (other precision, other order).
#pragma once

#include <cuda_bf16.h>
#include <mma.h>

#include <cstdint>
#include <type_traits>

#include "cuda/tile_gemm.cuh"

namespace moelab::cuda {

enum class MmaKind { TF32, TF32x3, BF16 };

// The tensor-core tile: 128 x 128, 256 threads, k 16 a step; In is the operands' element type
// (float for the TF32 kinds, __nv_bfloat16 for BF16). The members tile_product's loads read
// (M, N, K, Threads, LoadsA, LoadsB, Pad) have the same meaning as in Tile.
template <class In, MmaKind kKind>
struct MmaTile {
  static_assert((kKind == MmaKind::BF16) == std::is_same_v<In, __nv_bfloat16>,
                "BF16 takes __nv_bfloat16 operands, the TF32 kinds float");
  static constexpr MmaKind Kind = kKind;
  static constexpr int BlocksPerSM = 2;  // the kernels' __launch_bounds__ (cuda/grouped_matmul.cu says why)
  static constexpr int M = 128, N = 128, K = 16;
  static constexpr int Threads = 256;
  static constexpr int Warps = Threads / 32;
  static constexpr int WarpsM = 2, WarpsN = 4;          // the warps' grid over the tile
  static constexpr int WarpM = M / WarpsM;              // 64 rows a warp
  static constexpr int WarpN = N / WarpsN;              // 32 columns a warp
  static constexpr int Frag = 16;                       // a fragment's rows and columns
  static constexpr int FragsM = WarpM / Frag;           // 4
  static constexpr int FragsN = WarpN / Frag;           // 2
  static constexpr int FragK = kKind == MmaKind::BF16 ? 16 : 8;  // k of one MMA
  static constexpr int Pad = 16 / static_cast<int>(sizeof(In));  // 16 bytes: 4 floats, 8 bf16
  static constexpr int LoadsA = M * K / Threads;
  static constexpr int LoadsB = N * K / Threads;
  static_assert(WarpsM * WarpsN == Warps && K % FragK == 0, "the warps cover the tile");
};

// One MmaTile C = A @ B by the whole block (from every thread of a 256-thread block), with the
// operands, counts and output as tile_product's; C is float32 whatever In is.
template <class In, class Tl, bool kATransposed, bool kBTransposed>
__device__ void mma_tile_product(const In* a, std::int64_t lda, const In* b, std::int64_t ldb, int m_count,
                                 int n_count, std::int64_t k_count, float* c, std::int64_t ldc) {
  namespace wmma = nvcuda::wmma;
  constexpr bool kTf32 = Tl::Kind != MmaKind::BF16;
  using FragIn = std::conditional_t<kTf32, wmma::precision::tf32, __nv_bfloat16>;
  using FragA = wmma::fragment<wmma::matrix_a, 16, 16, Tl::FragK, FragIn, wmma::col_major>;
  using FragB = wmma::fragment<wmma::matrix_b, 16, 16, Tl::FragK, FragIn, wmma::row_major>;
  using FragC = wmma::fragment<wmma::accumulator, 16, 16, Tl::FragK, float>;

  __shared__ SharedTiles<In, Tl> tile;
  __shared__ __align__(32) float staging[Tl::Warps][Tl::Frag * Tl::Frag];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int row0 = (warp / Tl::WarpsN) * Tl::WarpM, col0 = (warp % Tl::WarpsN) * Tl::WarpN;

  FragC acc[Tl::FragsM][Tl::FragsN];
#pragma unroll
  for (int i = 0; i < Tl::FragsM; ++i)
#pragma unroll
    for (int j = 0; j < Tl::FragsN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  // big = tf32(x) and, for TF32x3, small = tf32(x - big), element by element (a fragment's
  // elements may be transformed in place: every element gets the same function).
  const auto split = [](auto& big, auto& small) {
#pragma unroll
    for (int t = 0; t < big.num_elements; ++t) {
      const float x = big.x[t];
      big.x[t] = wmma::__float_to_tf32(x);
      if constexpr (Tl::Kind == MmaKind::TF32x3) small.x[t] = wmma::__float_to_tf32(x - big.x[t]);
    }
  };

  TileLoads<In, Tl, kATransposed, kBTransposed> loads{a, lda, b, ldb, m_count, n_count, k_count};
  for (std::int64_t k0 = 0; k0 < k_count; k0 += Tl::K) {
    loads.fetch(k0);
    loads.stash(tile);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < Tl::K; kk += Tl::FragK) {
      FragB b_big[Tl::FragsN], b_small[Tl::FragsN];
#pragma unroll
      for (int j = 0; j < Tl::FragsN; ++j) {
        wmma::load_matrix_sync(b_big[j], &tile.b[kk][col0 + j * Tl::Frag], Tl::N + Tl::Pad);
        if constexpr (kTf32) split(b_big[j], b_small[j]);
      }
#pragma unroll
      for (int i = 0; i < Tl::FragsM; ++i) {
        FragA a_big, a_small;
        wmma::load_matrix_sync(a_big, &tile.a[kk][row0 + i * Tl::Frag], Tl::M + Tl::Pad);
        if constexpr (kTf32) split(a_big, a_small);
#pragma unroll
        for (int j = 0; j < Tl::FragsN; ++j) {
          if constexpr (Tl::Kind == MmaKind::TF32x3) {
            wmma::mma_sync(acc[i][j], a_small, b_big[j], acc[i][j]);
            wmma::mma_sync(acc[i][j], a_big, b_small[j], acc[i][j]);
          }
          wmma::mma_sync(acc[i][j], a_big, b_big[j], acc[i][j]);
        }
      }
    }
    __syncthreads();  // the tile is overwritten by the next step
  }

  // Out through this warp's staging square: 16 x 16 floats, then each lane writes 8 of them
  // (16 consecutive columns a row: coalesced), skipping what lies past m_count or n_count.
  float* square = staging[warp];
#pragma unroll
  for (int i = 0; i < Tl::FragsM; ++i)
#pragma unroll
    for (int j = 0; j < Tl::FragsN; ++j) {
      wmma::store_matrix_sync(square, acc[i][j], Tl::Frag, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < Tl::Frag * Tl::Frag; e += 32) {
        const int m = row0 + i * Tl::Frag + e / Tl::Frag, n = col0 + j * Tl::Frag + e % Tl::Frag;
        if (m < m_count && n < n_count) c[m * ldc + n] = square[e];
      }
      __syncwarp();  // the square is rewritten by the next fragment
    }
}

}  // namespace moelab::cuda
