// core/cpu/gemm_kernels.h — the float32 GEMM's inner kernels, one set per instruction set.
//
// core/cpu/gemm_f32.cpp does the blocking, packing and threading; the arithmetic happens in
// kernels whose speed depends on the vector width, so they are compiled once per instruction set
// (gemm_kernels_generic.cpp, gemm_kernels_avx2.cpp, gemm_kernels_avx512.cpp, from the one template
// in gemm_micro_kernel.h) and chosen at run time (core/cpu/cpu_features.h):
//
//   tile(kc, a, a_stride, b_panel, b_stride, c, ldc, accumulate)
//       C tile [mr, nr] (row stride ldc) = or += A [mr, kc] @ B panel [kc][nr], A(r, p) =
//       a[p * a_stride + r]: a packed A panel [kc][mr] (a_stride = mr), or A^T read in place;
//       B(p, j) = b_panel[p * b_stride + j]: a packed panel (b_stride = nr) or a row-major B
//       read in place (b_stride = its row stride)
//   tile_rows(kc, a, a_stride, b_panel, b_stride, c, ldc, accumulate)
//       the same with A(r, p) = a[r * a_stride + p]: a row-major A read in place, unpacked
//   edge[r], edge_rows[r]   (1 <= r < mr)
//       tile and tile_rows for a tile of only r rows: the bottom edge of a product whose rows are
//       not a multiple of mr (128 = 21 x 6 + 2 with the AVX2 tile; one expert's ~64 rows)
//   small(a, a_rs, a_cs, b, b_rs, b_cs, c, m, k, n)
//       C [m, n] = op(A) [m, k] @ op(B) [k, n] without packing, for tiny products; element (i, p)
//       of op(A) is a[i * a_rs + p * a_cs], element (p, j) of op(B) is b[p * b_rs + j * b_cs]
//
// Every element of C is one chain of multiply-adds over p = 0, 1, ..., k - 1 from 0, in every
// kernel and in every instruction set, so the choice of kernel changes the speed, not the bits
// (fused multiply-adds on avx2 and avx512; on generic, whatever the baseline compiles to).
#pragma once

#include <cstdint>

#include "core/cpu/cpu_features.h"

namespace moelab::cpu {

using MicroKernel = void (*)(std::int64_t kc, const float* a, std::int64_t a_stride, const float* b_panel,
                             std::int64_t b_stride, float* c, std::int64_t ldc, bool accumulate);

constexpr int kMaxMR = 24, kMaxNR = 32;

// One tile shape: C tiles of mr x nr, A read as a packed panel or a transposed A (tile) or as a
// row-major A (tile_rows), and the same for the bottom edge's tiles of fewer rows. b_panel's kc
// rows of nr floats are b_stride floats apart: nr when B was packed, B's own row stride when a
// row-major B is read in place.
struct GemmTiles {
  int mr, nr;
  MicroKernel tile, tile_rows;
  MicroKernel edge[kMaxMR], edge_rows[kMaxMR];  // [r]: r rows, 1 <= r < mr ([0] unused)
};

struct GemmKernels {
  CpuIsa isa;
  GemmTiles wide;    // the register tile for most products (12 x 32 on AVX-512, 6 x 16 on AVX2)
  GemmTiles narrow;  // one vector wide, taller (24 x 16, 12 x 8): for products with n <= narrow.nr
  void (*small)(const float* a, std::int64_t a_rs, std::int64_t a_cs, const float* b, std::int64_t b_rs,
                std::int64_t b_cs, float* c, std::int64_t m, std::int64_t k, std::int64_t n);
};

// The kernels for one instruction set; throws moelab::Error for a set this build or CPU lacks.
const GemmKernels& gemm_kernels(CpuIsa isa);

// Per instruction set (the x86 ones exist only in x86-64 builds).
const GemmKernels& gemm_kernels_generic();
const GemmKernels& gemm_kernels_avx2();
const GemmKernels& gemm_kernels_avx512();

}  // namespace moelab::cpu
