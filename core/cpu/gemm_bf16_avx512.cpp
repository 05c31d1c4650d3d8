// core/cpu/gemm_bf16_avx512.cpp — the bf16 GEMM's 12 x 32 tile on VDPBF16PS (AVX512_BF16).
//
// Compiled with -mavx512f -mavx512bf16 (CMakeLists.txt) and only called where the CPU has
// AVX512_BF16 (core/cpu/gemm_bf16.cpp checks). The 12 x 32 float32 tile of C lives in 24 zmm
// registers; for each pair q, two loads give B's 32 columns (one 32-bit word, two bf16 values, per
// column), and for each of the 12 rows one broadcast of A's word feeds two VDPBF16PS: 24
// instructions doing 768 bf16 multiply-adds. What each computes is core/cpu/gemm_bf16.h's chain.
// Two entry points share the loop: A from a packed panel, or read in place from a row-major A.
#include <immintrin.h>

#include "core/cpu/gemm_bf16.h"

namespace moelab::cpu::gemm_bf16_detail {
namespace {

// The tile over `pairs` pairs; word(r, q) gives row r's pair q of A (a packed panel's or a
// row-major A's in place), b_panel [pairs][NR] B's.
template <class AWord>
inline void tile_over(std::int64_t pairs, AWord word, const std::uint32_t* b_panel, float* c, std::int64_t ldc,
                      bool accumulate) {
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < 2; ++v)
      acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + v * 16) : _mm512_setzero_ps();
  for (std::int64_t q = 0; q < pairs; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b_panel);       // columns 0..15, pair q
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b_panel + 16);  // columns 16..31
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(word(r, q)));  // row r's pair, every lane
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, b1);
    }
    b_panel += NR;
  }
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < 2; ++v) _mm512_storeu_ps(c + r * ldc + v * 16, acc[r][v]);
}

}  // namespace

void avx512_bf16_tile(std::int64_t pairs, const std::uint32_t* a_panel, const std::uint32_t* b_panel, float* c,
                      std::int64_t ldc, bool accumulate) {
  tile_over(pairs, [a_panel](int r, std::int64_t q) { return a_panel[q * MR + r]; }, b_panel, c, ldc, accumulate);
}

void avx512_bf16_tile_rows(std::int64_t pairs, const std::uint16_t* a, std::int64_t lda, const std::uint32_t* b_panel,
                           float* c, std::int64_t ldc, bool accumulate) {
  const auto word = [a, lda](int r, std::int64_t q) { return pair_in_place(a, lda, r, q); };
  tile_over(pairs, word, b_panel, c, ldc, accumulate);
}

}  // namespace moelab::cpu::gemm_bf16_detail
