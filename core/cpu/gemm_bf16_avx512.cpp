// core/cpu/gemm_bf16_avx512.cpp — the bf16 GEMM's 12 x 32 tile on VDPBF16PS (AVX512_BF16).
//
// Compiled with -mavx512f -mavx512bf16 (CMakeLists.txt) and only called where the CPU has
// AVX512_BF16 (core/cpu/gemm_bf16.cpp checks). The 12 x 32 float32 tile of C lives in 24 zmm
// registers; for each pair q, two loads give B's 32 columns (one 32-bit word, two bf16 values, per
// column), and for each of the 12 rows one broadcast of A's word feeds two VDPBF16PS: 24
// instructions doing 768 bf16 multiply-adds. What each computes is core/cpu/gemm_bf16.h's chain.
// Two entry points share the loop: A from a packed panel, or read in place from a row-major A;
// B comes from a packed panel, or (avx512_bf16_tile_b_in_place) from a row-major B in place, its
// rows 2q and 2q + 1 interleaved in registers by the packer's permute. Edge blocks of C (fewer
// rows or columns) have tiles of their own, with masked loads and stores of C.
//
// The packer (avx512_pack_pairs, also -mavx512bw) writes pack_panel's words with whole-vector moves;
// pack_panel's own loops move one word or one element at a time, and on the small products of a
// MoE layer (64 rows an expert) packing took two thirds as long as the tiles. Its two layouts:
//   rows contiguous (a row-major B, a transposed A): pair q of rows r = 0 .. 31 interleaves
//     elements r of operand rows 2q and 2q + 1; two masked 64-byte loads and one two-source
//     permute of 16-bit words (VPERMT2W) give the 32 words, and masked loads read zero past
//     `rows`, so the panel's padding words come out zero as well;
//   inner contiguous (a row-major A, a transposed B): row r's pairs q .. q + 15 are the 16 words
//     at its elements 2q .. 2q + 31, one load; 16 such rows are a 16 x 16 matrix of words to
//     transpose (four rounds of unpack and 128-bit shuffles), whose rows are the panel's rows
//     q .. q + 15 for those 16 operand rows.
// The AMX kernel (core/cpu/gemm_bf16_amx.cpp) wants A the other way round, a row of words per row
// of C; for a transposed A (rows contiguous) avx512_pack_pair_rows builds 16 pairs of 16 rows as
// 16 vectors (pair j: the two operand rows' elements widened to words, the odd one shifted up) and
// transposes them with the same 16 x 16 transpose.
#include <immintrin.h>

#include <algorithm>

#include "core/cpu/gemm_bf16.h"

namespace moelab::cpu::gemm_bf16_detail {
namespace {

// The lowest `count` bits set (count in 0 .. 32).
inline std::uint32_t low_bits(std::int64_t count) {
  return count >= 32 ? ~0u : (1u << static_cast<unsigned>(count)) - 1u;
}

// VPERMT2W indices that interleave two rows of 16-bit elements into 32-bit words: word r of
// `low` takes element r of the first source and element r of the second (16-bit elements 2r, 2r + 1
// of the result), `high` the same for elements 16 + r. Built once.
struct PairPicks {
  alignas(64) std::uint16_t low[32], high[32];
};
const PairPicks& pair_picks() {
  static const PairPicks picks = [] {
    PairPicks p{};
    for (int r = 0; r < 16; ++r) {
      p.low[2 * r] = static_cast<std::uint16_t>(r), p.low[2 * r + 1] = static_cast<std::uint16_t>(32 + r);
      p.high[2 * r] = static_cast<std::uint16_t>(16 + r), p.high[2 * r + 1] = static_cast<std::uint16_t>(48 + r);
    }
    return p;
  }();
  return picks;
}

// B's pair q for the tile's 32 columns, as two vectors of words (columns 0..15, 16..31): from a
// packed panel [pairs][NR], or (RowMajorB) from a row-major B read in place, interleaving its rows
// 2q and 2q + 1 with the packer's permutes (avx512_pack_pairs below), columns past `cols` zero.
struct PackedB {
  const std::uint32_t* panel;
  void load(std::int64_t q, __m512bh& b0, __m512bh& b1) const {
    b0 = (__m512bh)_mm512_loadu_si512(panel + q * NR);
    b1 = (__m512bh)_mm512_loadu_si512(panel + q * NR + 16);
  }
};
struct RowMajorB {
  const std::uint16_t* b;  // element (2q, j) at b[2q * ldb + j]
  std::int64_t ldb;
  __mmask32 present;       // the columns there are
  __m512i low_pick, high_pick;
  void load(std::int64_t q, __m512bh& b0, __m512bh& b1) const {
    const __m512i e = _mm512_maskz_loadu_epi16(present, b + 2 * q * ldb);
    const __m512i o = _mm512_maskz_loadu_epi16(present, b + (2 * q + 1) * ldb);
    b0 = (__m512bh)_mm512_permutex2var_epi16(e, low_pick, o);
    b1 = (__m512bh)_mm512_permutex2var_epi16(e, high_pick, o);
  }
};

// The tile over `pairs` pairs; word(r, q) gives row r's pair q of A (a packed panel's or a
// row-major A's in place), bpairs B's (PackedB or RowMajorB).
template <class AWord, class BPairs = PackedB>
inline void tile_over(std::int64_t pairs, AWord word, const BPairs& bpairs, float* c, std::int64_t ldc,
                      bool accumulate) {
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < 2; ++v)
      acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + v * 16) : _mm512_setzero_ps();
  for (std::int64_t q = 0; q < pairs; ++q) {
    __m512bh b0, b1;  // columns 0..15 and 16..31, pair q
    bpairs.load(q, b0, b1);
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(word(r, q)));  // row r's pair, every lane
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, b1);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < 2; ++v) _mm512_storeu_ps(c + r * ldc + v * 16, acc[r][v]);
}

// The same on an edge block of C: ROWS (< MR, or MR with fewer than NR columns) rows and `cols`
// columns, in place. Rows past ROWS are not computed and columns past `cols` neither read nor
// written (masked loads and stores); every element gets the full tile's chain, so its bits.
template <int ROWS, class AWord, class BPairs>
inline void edge_tile_over(std::int64_t pairs, AWord word, const BPairs& bpairs, float* c, std::int64_t ldc,
                           bool accumulate, int cols) {
  const __mmask16 m0 = static_cast<__mmask16>(low_bits(std::min(cols, 16)));
  const __mmask16 m1 = static_cast<__mmask16>(low_bits(std::max(cols - 16, 0)));
  __m512 acc[ROWS][2];
#pragma GCC unroll 12
  for (int r = 0; r < ROWS; ++r) {
    acc[r][0] = accumulate ? _mm512_maskz_loadu_ps(m0, c + r * ldc) : _mm512_setzero_ps();
    acc[r][1] = accumulate ? _mm512_maskz_loadu_ps(m1, c + r * ldc + 16) : _mm512_setzero_ps();
  }
  for (std::int64_t q = 0; q < pairs; ++q) {
    __m512bh b0, b1;
    bpairs.load(q, b0, b1);
#pragma GCC unroll 12
    for (int r = 0; r < ROWS; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(word(r, q)));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, b1);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < ROWS; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, acc[r][0]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc[r][1]);
  }
}

// edge_tile_over for a row count known at run time (1 .. MR).
template <class AWord, class BPairs>
void edge_tile(int rows, std::int64_t pairs, AWord word, const BPairs& bpairs, float* c, std::int64_t ldc,
               bool accumulate, int cols) {
  switch (rows) {
#define MOELAB_EDGE_ROWS(R) \
  case R: return edge_tile_over<R>(pairs, word, bpairs, c, ldc, accumulate, cols);
    MOELAB_EDGE_ROWS(1) MOELAB_EDGE_ROWS(2) MOELAB_EDGE_ROWS(3) MOELAB_EDGE_ROWS(4) MOELAB_EDGE_ROWS(5)
    MOELAB_EDGE_ROWS(6) MOELAB_EDGE_ROWS(7) MOELAB_EDGE_ROWS(8) MOELAB_EDGE_ROWS(9) MOELAB_EDGE_ROWS(10)
    MOELAB_EDGE_ROWS(11) MOELAB_EDGE_ROWS(12)
#undef MOELAB_EDGE_ROWS
    default: return;
  }
}

// The 16 x 16 matrix of 32-bit words m[0..15] (a row each) -> its transpose, in place.
inline void transpose_16x16_words(__m512i m[16]) {
  __m512i t[16], u[16];
  for (int j = 0; j < 16; j += 2) {  // lane L of t[j]: m[j][4L], m[j+1][4L], m[j][4L+1], m[j+1][4L+1]
    t[j] = _mm512_unpacklo_epi32(m[j], m[j + 1]);
    t[j + 1] = _mm512_unpackhi_epi32(m[j], m[j + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // lane L of u[g + c]: rows g .. g + 3 of column 4L + c
    u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // column 4L + c: lane L of u[c], u[4 + c], u[8 + c], u[12 + c]
    const __m512i even_lanes_lo = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);  // lanes 0, 2 of each
    const __m512i odd_lanes_lo = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);   // lanes 1, 3 of each
    const __m512i even_lanes_hi = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
    const __m512i odd_lanes_hi = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
    m[c] = _mm512_shuffle_i32x4(even_lanes_lo, even_lanes_hi, 0x88);       // lane 0: column c
    m[8 + c] = _mm512_shuffle_i32x4(even_lanes_lo, even_lanes_hi, 0xDD);   // lane 2: column 8 + c
    m[4 + c] = _mm512_shuffle_i32x4(odd_lanes_lo, odd_lanes_hi, 0x88);     // lane 1: column 4 + c
    m[12 + c] = _mm512_shuffle_i32x4(odd_lanes_lo, odd_lanes_hi, 0xDD);    // lane 3: column 12 + c
  }
}

}  // namespace

bool avx512_pack_pairs(const std::uint16_t* data, std::int64_t rows_stride, std::int64_t inner_stride, std::int64_t i0,
                       std::int64_t rows, int width, std::int64_t q0, std::int64_t whole, std::uint32_t* out) {
  if (rows_stride == 1 && width <= 32) {
    // Word 2r of `low` / `high` takes element r / 16 + r of the even row, word 2r + 1 the odd row's
    // (VPERMT2W indices: 0-31 the first source, 32-63 the second). Built once, not per call.
    const __m512i low_pick = _mm512_load_si512(pair_picks().low), high_pick = _mm512_load_si512(pair_picks().high);
    const __mmask32 present = low_bits(rows);
    const __mmask16 low_words = static_cast<__mmask16>(low_bits(std::min(width, 16)));
    const __mmask16 high_words = static_cast<__mmask16>(low_bits(std::max(width - 16, 0)));
    for (std::int64_t q = 0; q < whole; ++q) {
      const std::uint16_t* even = data + 2 * (q0 + q) * inner_stride + i0;
      const __m512i e = _mm512_maskz_loadu_epi16(present, even);
      const __m512i o = _mm512_maskz_loadu_epi16(present, even + inner_stride);
      std::uint32_t* word = out + q * width;
      _mm512_mask_storeu_epi32(word, low_words, _mm512_permutex2var_epi16(e, low_pick, o));
      if (width > 16) _mm512_mask_storeu_epi32(word + 16, high_words, _mm512_permutex2var_epi16(e, high_pick, o));
    }
    return true;
  }
  if (inner_stride != 1 || width % 16 != 0) return false;
  // Groups of 16 operand rows (rows past `rows` read as zero words) by blocks of 16 pairs (a
  // shorter last block: masked loads, and only its columns stored).
  for (std::int64_t r0 = 0; r0 < rows; r0 += 16) {
    const std::int64_t present = std::min<std::int64_t>(16, rows - r0);
    for (std::int64_t q = 0; q < whole; q += 16) {
      const std::int64_t block = std::min<std::int64_t>(16, whole - q);
      const __mmask16 pairs = static_cast<__mmask16>(low_bits(block));
      __m512i m[16];
      for (int r = 0; r < 16; ++r)
        m[r] = r < present ? _mm512_maskz_loadu_epi32(pairs, data + (i0 + r0 + r) * rows_stride + 2 * (q0 + q))
                           : _mm512_setzero_si512();
      transpose_16x16_words(m);
      for (std::int64_t j = 0; j < block; ++j) _mm512_storeu_si512(out + (q + j) * width + r0, m[j]);
    }
  }
  return true;
}

void avx512_pack_pair_rows(const std::uint16_t* data, std::int64_t inner_stride, std::int64_t i0, std::int64_t rows,
                           std::int64_t q0, std::int64_t whole, std::uint32_t* out, std::int64_t out_stride) {
  // For 16 operand rows and 16 pairs: word r of m[j] is pair q + j of row r0 + r, the two
  // elements (rows 2(q0 + q + j) and the next of the stored matrix) widened to 32 bits and the
  // odd one shifted up; the transpose then gives each row its 16 pairs.
  for (std::int64_t r0 = 0; r0 < rows; r0 += 16) {
    const __mmask16 present = static_cast<__mmask16>(low_bits(std::min<std::int64_t>(16, rows - r0)));
    for (std::int64_t q = 0; q < whole; q += 16) {
      const std::int64_t block = std::min<std::int64_t>(16, whole - q);
      __m512i m[16];
      for (int j = 0; j < 16; ++j) {
        if (j >= block) {
          m[j] = _mm512_setzero_si512();
          continue;
        }
        const std::uint16_t* even = data + 2 * (q0 + q + j) * inner_stride + i0 + r0;
        const __m512i e = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(present, even));
        const __m512i o = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(present, even + inner_stride));
        m[j] = _mm512_or_si512(e, _mm512_slli_epi32(o, 16));
      }
      transpose_16x16_words(m);
      const __mmask16 pairs = static_cast<__mmask16>(low_bits(block));
      for (std::int64_t r = 0; r < std::min<std::int64_t>(16, rows - r0); ++r)
        _mm512_mask_storeu_epi32(out + (r0 + r) * out_stride + q, pairs, m[r]);
    }
  }
}

void avx512_bf16_tile(std::int64_t pairs, const std::uint32_t* a_panel, const std::uint32_t* b_panel, float* c,
                      std::int64_t ldc, bool accumulate) {
  tile_over(pairs, [a_panel](int r, std::int64_t q) { return a_panel[q * MR + r]; }, PackedB{b_panel}, c, ldc,
            accumulate);
}

void avx512_bf16_tile_rows(std::int64_t pairs, const std::uint16_t* a, std::int64_t lda, const std::uint32_t* b_panel,
                           float* c, std::int64_t ldc, bool accumulate) {
  const auto word = [a, lda](int r, std::int64_t q) { return pair_in_place(a, lda, r, q); };
  tile_over(pairs, word, PackedB{b_panel}, c, ldc, accumulate);
}

void avx512_bf16_edge_tile(std::int64_t pairs, const std::uint32_t* a_panel, const std::uint32_t* b_panel, float* c,
                           std::int64_t ldc, bool accumulate, int rows, int cols) {
  edge_tile(rows, pairs, [a_panel](int r, std::int64_t q) { return a_panel[q * MR + r]; }, PackedB{b_panel}, c, ldc,
            accumulate, cols);
}

void avx512_bf16_edge_tile_rows(std::int64_t pairs, const std::uint16_t* a, std::int64_t lda,
                                const std::uint32_t* b_panel, float* c, std::int64_t ldc, bool accumulate, int rows,
                                int cols) {
  const auto word = [a, lda](int r, std::int64_t q) { return pair_in_place(a, lda, r, q); };
  edge_tile(rows, pairs, word, PackedB{b_panel}, c, ldc, accumulate, cols);
}

void avx512_bf16_tile_b_in_place(std::int64_t pairs, const std::uint32_t* a_panel, const std::uint16_t* a,
                                 std::int64_t lda, const std::uint16_t* b, std::int64_t ldb, float* c, std::int64_t ldc,
                                 bool accumulate, int rows, int cols) {
  const RowMajorB bpairs{b, ldb, static_cast<__mmask32>(low_bits(cols)), _mm512_load_si512(pair_picks().low),
                         _mm512_load_si512(pair_picks().high)};
  const auto packed = [a_panel](int r, std::int64_t q) { return a_panel[q * MR + r]; };
  const auto in_place = [a, lda](int r, std::int64_t q) { return pair_in_place(a, lda, r, q); };
  if (rows == MR && cols == NR) {
    if (a_panel) return tile_over(pairs, packed, bpairs, c, ldc, accumulate);
    return tile_over(pairs, in_place, bpairs, c, ldc, accumulate);
  }
  if (a_panel) return edge_tile(rows, pairs, packed, bpairs, c, ldc, accumulate, cols);
  edge_tile(rows, pairs, in_place, bpairs, c, ldc, accumulate, cols);
}

}  // namespace moelab::cpu::gemm_bf16_detail
