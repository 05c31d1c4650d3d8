// core/cpu/gemm_micro_kernel.h — the GEMM's two inner kernels as one template over the
// instruction set; included only by core/cpu/gemm_kernels_<isa>.cpp, each compiled for its set.
//
// An instruction set is described by a small traits struct, defined in the anonymous namespace of
// its .cpp file:
//
//   struct Avx512 {
//     static constexpr CpuIsa isa = CpuIsa::Avx512;
//     static constexpr int lanes = 16, mr = 12, nr = 32;   // floats per vector; the C tile
//     static constexpr int narrow_mr = 24;                 // the narrow tile: narrow_mr x lanes
//     typedef float Vec __attribute__((vector_size(64)));  // one vector register
//     static Vec broadcast(float x);                       // x in every lane
//     static float fma(float a, float b, float c);         // a * b + c, as the tile rounds it
//   };
//
// Because that struct has internal linkage, so has every function below instantiated with it:
// the avx512, avx2 and generic copies of a kernel are separate functions that the linker never
// merges (had they been ordinary inline functions, it could keep the AVX-512 copy for everyone,
// and an AVX2 machine would crash on it).
//
// The micro-kernel keeps the whole mr x nr tile of C in vector registers and, for each p, loads
// one row of the B panel (nr floats = nr / lanes vectors), broadcasts each of the mr values of
// A's column p (from a packed panel or straight from A), and does mr * nr / lanes fused multiply-adds: `acc += a * b` on vector types, which
// the compiler turns into FMA instructions (the .cpp files are compiled with -ffp-contract=fast).
// With AVX-512 the tile is 12 x 32 (24 accumulator registers of 32); with AVX2 6 x 16 (12 of 16).
// Products at most one vector wide (routing logits [T, d] @ [d, 8], Soft MoE's experts of width 6)
// use a narrow tile, one vector wide and twice as tall (24 x 16, 12 x 8), which computes a third or
// a half of the padding columns the wide tile would.
#pragma once

#include <cstdint>
#include <utility>

#include "core/cpu/gemm_kernels.h"

namespace moelab::cpu::gemm_detail {

template <class Isa>
inline typename Isa::Vec load(const float* p) {
  typename Isa::Vec v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

template <class Isa>
inline void store(float* p, typename Isa::Vec v) {
  __builtin_memcpy(p, &v, sizeof(v));
}

// How many steps of p ahead the micro-kernel prefetches A's and B's values (see the loop). In the
// step's weight gradient 8/8, 16/8, 16/16 and 32/16 ran within noise of one another; no prefetch
// at all ran 20% slower there.
constexpr std::int64_t kPrefetchA = 16, kPrefetchB = 8;

// A prefetch of the cache line holding p[floats]. The address is computed as an integer: it may
// lie past the operand's end, where pointer arithmetic would be undefined (a prefetch itself never
// faults).
inline void prefetch_float(const float* p, std::int64_t floats) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) +
                                                   static_cast<std::uintptr_t>(floats) * sizeof(float)));
}

// C tile [mr, nr] (row stride ldc) = or += A [mr, kc] @ B panel [kc][nr], where A(r, p) is
//   kRowMajor:  a[r * a_stride + p]   (A's rows are contiguous: a row-major A read in place)
//   otherwise:  a[p * a_stride + r]   (A's columns are contiguous: a packed panel, a_stride = mr, or
//                                      a transposed A read in place, a_stride = its row length)
// Both read the same A(r, p) and do the same FMAs in the same order; only the addresses differ.
template <class Isa, int MR, int NR, bool kRowMajor>
void micro_kernel(std::int64_t kc, const float* a, std::int64_t a_stride, const float* b_panel, std::int64_t b_stride,
                  float* c, std::int64_t ldc, bool accumulate) {
  using Vec = typename Isa::Vec;
  constexpr int V = NR / Isa::lanes;  // V vectors per tile row
  Vec acc[MR][V] = {};
  // Each step prefetches what a step kPrefetchA / kPrefetchB later reads where the hardware's
  // prefetchers fall behind: a transposed A read in place (a step's MR values sit a whole row of the
  // stored A apart, a_stride floats) and a B read in place (its rows b_stride apart). Those are the
  // weight gradient's operands, x^T @ g, with x written in the forward and long gone from L1 and
  // L2: in the training step that product ran at 95-117 GFLOP/s with none, 123-141 with them,
  // and 148 -> 176 alone (128 x 2048T x 128; the dense step 1.04-1.09x; Xeon, AVX-512, one
  // thread). A packed B panel (stride nr) is contiguous and gets them too; small products alone
  // (64 x 64 x 64, 24 x 32 x 48T) stayed within the 4% that OpenBLAS moved between the same runs.
  // A row-major A read in place is prefetched a panel ahead instead: each step of the 16 that
  // cross a cache line of its rows fetches that line of one row of the next MR-row panel (rows
  // 0-15; the narrow tile's rows 16-23 get none), so the next call's first loads find A in cache.
  // In the 8-expert step's x @ W^T and g @ W (262-2048 x 128 x 128) that took the products from
  // 123-130 to 129-135 GFLOP/s (3 rounds; the dense step's gained 0-9%), the step 0.98x the time
  // (dense and 8 experts, medians of 9 pairs, each 0.94-1.03; 64 experts 1.00); alone, with A
  // evicted from the caches, 2048 x 128 x 128 went 128 -> 141-144 GFLOP/s.
  // A prefetch changes no arithmetic and never faults, past the operand's end too.
  // (Unrolled by force: left to itself, GCC rolls the 24-row loop of the narrow tile up and keeps
  // its accumulators in memory.)
  for (std::int64_t p = 0; p < kc; ++p) {
    if (kRowMajor && (p & 15) < MR) prefetch_float(a, (MR + (p & 15)) * a_stride + (p & ~std::int64_t{15}));
    if (!kRowMajor) {
      prefetch_float(a, kPrefetchA * a_stride);
      prefetch_float(a, kPrefetchA * a_stride + MR - 1);  // the row's MR values may end in the next line
    }
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) prefetch_float(b_panel, kPrefetchB * b_stride + v * Isa::lanes);
    Vec b[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) b[v] = load<Isa>(b_panel + v * Isa::lanes);
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      const Vec x = Isa::broadcast(kRowMajor ? a[r * a_stride + p] : a[r]);  // A(r, p) in every lane
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] += x * b[v];
    }
    if (!kRowMajor) a += a_stride;
    b_panel += b_stride;  // NR when packed
  }
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      float* dst = c + r * ldc + v * Isa::lanes;
      store<Isa>(dst, accumulate ? load<Isa>(dst) + acc[r][v] : acc[r][v]);
    }
}

// Products too small for packing to pay off (Soft MoE's per-example ones: [8, 4] @ [4, 196],
// [4, 8] @ [8, 196], 256 of them per batch): a direct loop, no packing. gemm_f32 sends only tiny
// products with an untransposed B here (its kSmallProduct). Each
// element of C is the same chain of fused multiply-adds over p = 0, 1, ..., k-1 from 0 as in the
// micro-kernel, so for k <= KC (one slice of the blocked path) the result is bitwise the blocked
// path's.
template <class Isa>
void small_gemm(const float* a, std::int64_t a_rs, std::int64_t a_cs, const float* b, std::int64_t b_rs,
                std::int64_t b_cs, float* c, std::int64_t m, std::int64_t k, std::int64_t n) {
  if (b_cs == 1) {  // B's rows are contiguous: C row i = sum over p of A[i, p] * B row p
    for (std::int64_t i = 0; i < m; ++i) {
      float* ci = c + i * n;
      for (std::int64_t j = 0; j < n; ++j) ci[j] = 0.0f;
      for (std::int64_t p = 0; p < k; ++p) {
        const float aip = a[i * a_rs + p * a_cs];
        const float* bp = b + p * b_rs;
        for (std::int64_t j = 0; j < n; ++j) ci[j] = Isa::fma(aip, bp[j], ci[j]);
      }
    }
  } else {  // B transposed: its columns are contiguous, so each C element is one dot product
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (std::int64_t p = 0; p < k; ++p) acc = Isa::fma(a[i * a_rs + p * a_cs], b[p * b_rs + j * b_cs], acc);
        c[i * n + j] = acc;
      }
  }
}

// The tile of MR x NR and its bottom-edge tiles of 1 .. MR-1 rows (the same loop, fewer rows).
template <class Isa, int MR, int NR, int... R>
constexpr GemmTiles tiles(std::integer_sequence<int, R...>) {
  static_assert(MR <= kMaxMR && NR <= kMaxNR && NR % Isa::lanes == 0);
  GemmTiles t{MR, NR, &micro_kernel<Isa, MR, NR, false>, &micro_kernel<Isa, MR, NR, true>, {}, {}};
  ((t.edge[R + 1] = &micro_kernel<Isa, R + 1, NR, false>,  //
    t.edge_rows[R + 1] = &micro_kernel<Isa, R + 1, NR, true>),
   ...);
  return t;
}
template <class Isa, int MR, int NR>
constexpr GemmTiles tiles() {
  return tiles<Isa, MR, NR>(std::make_integer_sequence<int, MR - 1>());
}

template <class Isa>
const GemmKernels& kernels_for() {
  static const GemmKernels kernels{Isa::isa, tiles<Isa, Isa::mr, Isa::nr>(), tiles<Isa, Isa::narrow_mr, Isa::lanes>(),
                                   &small_gemm<Isa>};
  return kernels;
}

}  // namespace moelab::cpu::gemm_detail
