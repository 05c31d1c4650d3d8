// core/cpu/gemm_bf16.cpp — packing, blocking and threads of the pairwise bf16 GEMM, its emulated
// tile and the choice of kernel (what is computed: core/cpu/gemm_bf16.h).
//
// The structure is gemm_f32's (core/cpu/gemm_f32.cpp), simpler: for each block of KP pairs of the
// inner dimension, B's block is packed into panels of NR columns ([pairs][NR] words), then each
// thread takes whole MR-row panels of C, packs its A panel ([pairs][MR] words) and runs the tile
// over every B panel. (A product of few rows reads a row-major B in place instead, on VDPBF16PS:
// gemm_bf16_strided.) A row-major A with k even needs no packing: its pairs already are the words
// at their elements, so full row panels read it in place (the tile's second entry point). The
// tile reads C back as its starting value for every block after the first, so each element of C
// is one chain over all of k, whatever the blocking and the thread count.
// Edge tiles (fewer than MR rows or NR columns) run in place on the VDPBF16PS kernel's edge
// tiles (masked), and on a padded copy of C for the emulated and AMX kernels.
// The AMX kernel shares the B panels (padded to whole steps of 16 pairs) and the blocking over k,
// with C in 32-row panels of 32 x 32 blocks (BlockProduct::run_amx) and its A as rows of words:
// read in place from a row-major A, else packed so (pack_amx_rows). Which kernel runs:
// core/cpu/gemm_bf16_choice.cpp.
#include "core/cpu/gemm_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu/cache_line_allocator.h"
#include "core/cpu/thread_count.h"
#include "core/error.h"

namespace moelab::cpu {
namespace {

using gemm_bf16_detail::MR;
using gemm_bf16_detail::NR;
constexpr std::int64_t KP = 128;  // pairs per block: an A panel of 12 x 128 words (6 KiB) stays in L1
constexpr std::int64_t kBInPlaceRows = 8 * gemm_bf16_detail::MR;  // products of at most 8 row panels

// One step of the instruction, as Intel's manual defines it: a float32 FMA of two bf16 values
// with subnormal inputs read as zero and a subnormal result flushed to zero, keeping the sign.
inline float daz(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }
inline float bf16_value(std::uint16_t bits) {
  const std::uint32_t word = static_cast<std::uint32_t>(bits) << 16;
  float x;
  std::memcpy(&x, &word, sizeof(x));
  return daz(x);
}
inline float dot_step(float a, float b, float acc) { return daz(std::fma(a, b, daz(acc))); }

// The tile without the instruction: the same steps in the same order, one element at a time;
// word(r, q) gives row r's pair q of A (from a packed panel, or in place).
template <class AWord>
void emulated_tile_over(std::int64_t pairs, AWord word, const std::uint32_t* b_panel, float* c, std::int64_t ldc,
                        bool accumulate) {
  float acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) acc[r][j] = accumulate ? c[r * ldc + j] : 0.0f;
  for (std::int64_t q = 0; q < pairs; ++q, b_panel += NR)
    for (int r = 0; r < MR; ++r) {
      const std::uint32_t a_word = word(r, q);
      const float a_even = bf16_value(static_cast<std::uint16_t>(a_word));
      const float a_odd = bf16_value(static_cast<std::uint16_t>(a_word >> 16));
      for (int j = 0; j < NR; ++j) {
        const float b_even = bf16_value(static_cast<std::uint16_t>(b_panel[j]));
        const float b_odd = bf16_value(static_cast<std::uint16_t>(b_panel[j] >> 16));
        acc[r][j] = dot_step(a_even, b_even, dot_step(a_odd, b_odd, acc[r][j]));  // the odd one first
      }
    }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) c[r * ldc + j] = acc[r][j];
}

void emulated_tile(std::int64_t pairs, const std::uint32_t* a_panel, const std::uint32_t* b_panel, float* c,
                   std::int64_t ldc, bool accumulate) {
  emulated_tile_over(pairs, [a_panel](int r, std::int64_t q) { return a_panel[q * MR + r]; }, b_panel, c, ldc,
                     accumulate);
}

void emulated_tile_rows(std::int64_t pairs, const std::uint16_t* a, std::int64_t lda, const std::uint32_t* b_panel,
                        float* c, std::int64_t ldc, bool accumulate) {
  const auto word = [a, lda](int r, std::int64_t q) { return gemm_bf16_detail::pair_in_place(a, lda, r, q); };
  emulated_tile_over(pairs, word, b_panel, c, ldc, accumulate);
}

// Element (i, p) of op(X) for a row-major X with `cols` columns, transposed or not; 0 past `inner`.
struct Bf16Operand {
  const std::uint16_t* data;
  std::int64_t rows_stride, inner_stride, inner;  // op(X)(i, p) = data[i * rows_stride + p * inner_stride]
  std::uint32_t at(std::int64_t i, std::int64_t p) const {
    return p < inner ? data[i * rows_stride + p * inner_stride] : 0u;
  }
  // The word of pair q for row i: element 2q in the low half, 2q + 1 in the high half.
  std::uint32_t pair(std::int64_t i, std::int64_t q) const { return at(i, 2 * q) | at(i, 2 * q + 1) << 16; }
};

// Words [q0, q0 + kp) of `rows` rows from row i0 as panel[q][r] with `width` words a row, zero rows
// past `rows`. The two layouts the products use have a fast path each (the same words as
// Bf16Operand::pair; a profile of the bf16 training step had the element-wise packing take more
// time than the tile):
//   inner contiguous (a row-major A, a transposed B): a pair is the 32-bit word at its two
//     elements (little-endian: element 2q in the low half), so packing gathers words;
//   rows contiguous (a transposed A, a row-major B): the words of pair q interleave two rows of
//     the operand, element by element.
// Only the last pair of an odd k lacks a partner (zero). With `wide` (the VDPBF16PS kernel's
// packer, core/cpu/gemm_bf16_avx512.cpp) the whole pairs are packed with AVX-512 moves where it
// has a path for the layout, into the same words.
void pack_panel(const Bf16Operand& x, std::int64_t i0, std::int64_t rows, int width, std::int64_t q0, std::int64_t kp,
                gemm_bf16_detail::Bf16PairPacker wide, std::uint32_t* out) {
  const std::int64_t whole = std::clamp<std::int64_t>(x.inner / 2 - q0, 0, kp);  // pairs with both elements
  std::int64_t done = 0;  // pairs packed by a fast path; the rest element by element
  if (wide && wide(x.data, x.rows_stride, x.inner_stride, i0, rows, width, q0, whole, out)) {
    done = whole;
  } else if (x.inner_stride == 1) {
    // Pair by pair, the words of every row: the writes are contiguous, the reads one stream a row.
    const std::uint16_t* src = x.data + i0 * x.rows_stride + 2 * q0;
    for (std::int64_t q = 0; q < whole; ++q) {
      std::uint32_t* word = out + q * width;
      for (std::int64_t r = 0; r < rows; ++r) std::memcpy(word + r, src + r * x.rows_stride + 2 * q, sizeof(*word));
    }
    done = whole;
  } else if (x.rows_stride == 1) {
    for (std::int64_t q = 0; q < whole; ++q) {
      const std::uint16_t* even = x.data + 2 * (q0 + q) * x.inner_stride + i0;
      const std::uint16_t* odd = even + x.inner_stride;
      std::uint32_t* word = out + q * width;
      for (std::int64_t r = 0; r < rows; ++r) word[r] = even[r] | static_cast<std::uint32_t>(odd[r]) << 16;
    }
    done = whole;
  }
  for (std::int64_t q = done; q < kp; ++q)
    for (std::int64_t r = 0; r < rows; ++r) out[q * width + r] = x.pair(i0 + r, q0 + q);
  for (std::int64_t q = 0; q < kp; ++q)
    for (std::int64_t r = rows; r < width; ++r) out[q * width + r] = 0u;
}

// The kernel's two tiles (A from a packed panel, A in place) and its packer of whole pairs (none:
// pack_panel's own loops). The emulated kernel packs with the portable loops only, so the tests'
// comparison of the two kernels (tests/test_gemm_bf16.cpp) also checks the AVX-512 packer.
struct Bf16Tiles {
  gemm_bf16_detail::Bf16Tile packed;
  gemm_bf16_detail::Bf16TileRows rows;
  gemm_bf16_detail::Bf16PairPacker packer;
  bool amx = false;  // the AMX kernel: amx_bf16_block on 32 x 32 blocks instead of the two tiles
  // Edge blocks of C in place (none: the full tile on a padded copy, on_c_block). The emulated
  // kernel keeps the copy, so the tests' comparison of the kernels also checks these.
  gemm_bf16_detail::Bf16EdgeTile edge = nullptr;
  gemm_bf16_detail::Bf16EdgeTileRows edge_rows = nullptr;
  gemm_bf16_detail::Bf16TileBInPlace b_in_place = nullptr;  // a row-major B read where it is
};

Bf16Tiles tiles_for(Bf16DotKernel kernel) {
  if (kernel == Bf16DotKernel::Emulated) return {&emulated_tile, &emulated_tile_rows, nullptr};
  MOELAB_CHECK(kernel != Bf16DotKernel::Amx || cpu_has_amx_bf16(), "gemm_bf16",
               "the amx kernel needs a CPU with AMX-BF16 whose tiles Linux grants");
  MOELAB_CHECK(cpu_has_avx512_bf16(), "gemm_bf16", "the avx512_bf16 kernel needs a CPU with AVX512_BF16");
#if defined(__x86_64__)
  return {&gemm_bf16_detail::avx512_bf16_tile, &gemm_bf16_detail::avx512_bf16_tile_rows,
          &gemm_bf16_detail::avx512_pack_pairs, kernel == Bf16DotKernel::Amx, &gemm_bf16_detail::avx512_bf16_edge_tile,
          &gemm_bf16_detail::avx512_bf16_edge_tile_rows, &gemm_bf16_detail::avx512_bf16_tile_b_in_place};
#else
  fail("gemm_bf16", "this build has no avx512_bf16 kernel");
#endif
}

// Pairs a block of kp pairs takes in a packed panel: AMX steps over 16 pairs at a time, so its
// blocks are padded to a multiple of 16 with zero words (+0 products). KP being a multiple of 16,
// the steps always start at pair 0, 16, 32, ... and only the last one of k is padded: which pairs
// share an instruction depends on k alone, not on the blocking or the threads.
std::int64_t stored_pairs(const Bf16Tiles& tiles, std::int64_t kp) {
  const std::int64_t step = tiles.amx ? gemm_bf16_detail::AMX_PAIRS : 1;
  return (kp + step - 1) / step * step;
}

// B's block of pairs [q0, q0 + kp): panels of NR columns, `stored` words apart a column.
void pack_b_block(const Bf16Tiles& tiles, const Bf16Operand& op_bt, std::int64_t n, std::int64_t q0, std::int64_t kp,
                  std::uint32_t* block) {
  const std::int64_t stored = stored_pairs(tiles, kp), col_panels = (n + NR - 1) / NR;
  for (std::int64_t jp = 0; jp < col_panels; ++jp) {
    std::uint32_t* panel = block + jp * NR * stored;
    pack_panel(op_bt, jp * NR, std::min<std::int64_t>(NR, n - jp * NR), NR, q0, kp, tiles.packer, panel);
    std::fill(panel + kp * NR, panel + stored * NR, 0u);
  }
}

// AMX's A panel: pairs [q0, q0 + kp) of rows [i0, i0 + rows) as out[r][q], 32 rows of `stored`
// words, zero past the operand. Row-major A: each row's words copied; a transposed A (rows
// contiguous): the AVX-512 packer of interleaved rows; the odd last pair and other layouts one
// word at a time.
void pack_amx_rows(const Bf16Operand& x, std::int64_t i0, std::int64_t rows, std::int64_t q0, std::int64_t kp,
                   std::int64_t stored, std::uint32_t* out) {
  const std::int64_t whole = std::clamp<std::int64_t>(x.inner / 2 - q0, 0, kp);
  std::int64_t done = 0;
  if (x.inner_stride == 1) {
    for (std::int64_t r = 0; r < rows; ++r)
      std::memcpy(out + r * stored, x.data + (i0 + r) * x.rows_stride + 2 * q0, whole * sizeof(std::uint32_t));
    done = whole;
  } else if (x.rows_stride == 1) {
#if defined(__x86_64__)
    gemm_bf16_detail::avx512_pack_pair_rows(x.data, x.inner_stride, i0, rows, q0, whole, out, stored);
    done = whole;
#endif
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t q = done; q < kp; ++q) out[r * stored + q] = x.pair(i0 + r, q0 + q);
    std::fill(out + r * stored + kp, out + (r + 1) * stored, 0u);
  }
  std::fill(out + rows * stored, out + gemm_bf16_detail::AMX_ROWS * stored, 0u);
}

}  // namespace

void gemm_bf16(Bf16DotKernel kernel, const std::uint16_t* a, const std::uint16_t* b, float* out, std::int64_t m,
               std::int64_t k, std::int64_t n, bool trans_a, bool trans_b) {
  gemm_bf16_strided(kernel, a, trans_a ? m : k, b, trans_b ? k : n, out, n, m, k, n, trans_a, trans_b);
}

namespace {

// Runs tile(c_tile, ldc_tile) on C's block of rows x cols at c (row stride ldc) whose kernel always
// writes panel_rows x NR: in place when the block is whole, else on the padded copy `part`
// [panel_rows, NR], then its valid part copied back. The first block of k (accumulate false)
// starts from zero and reads nothing of the copy, which is then left as it is (zeroing it took a
// fifth of a 64 x 64 @ 64 x 32 product's time).
template <class Tile>
void on_c_block(float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols, std::int64_t panel_rows,
                bool accumulate, float* part, Tile&& tile) {
  if (rows == panel_rows && cols == NR) return tile(c, ldc);
  if (accumulate)
    for (std::int64_t r = 0; r < panel_rows; ++r)
      for (std::int64_t j = 0; j < NR; ++j) part[r * NR + j] = r < rows && j < cols ? c[r * ldc + j] : 0.0f;
  tile(part, std::int64_t{NR});
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) c[r * ldc + j] = part[r * NR + j];
}

// The product's part over pairs [q0, q0 + kp) of k: out (+)= op(A)[:, pairs] @ B's block, packed
// as panels [col_panels][kp][NR]; each thread takes whole MR-row panels of C.
struct BlockProduct {
  const Bf16Tiles& tiles;
  const Bf16Operand& op_a;
  const std::uint16_t* a;
  std::int64_t lda;
  bool a_rows_in_place;  // a row-major A with k even: every pair of a row is the word at its elements
  float* out;
  std::int64_t ldc, m, n;
  int threads;
  // B read in place (tiles.b_in_place): a row-major B, rows ldb apart, every pair whole (k even).
  const std::uint16_t* b = nullptr;
  std::int64_t ldb = 0;
  bool b_rows_in_place = false;

  void run(const std::uint32_t* packed_b, std::int64_t q0, std::int64_t kp) const {
    if (tiles.amx) return run_amx(packed_b, q0, kp);
    const std::int64_t row_panels = (m + MR - 1) / MR, col_panels = (n + NR - 1) / NR;
    const bool accumulate = q0 > 0;
    const auto row_panel = [&](std::int64_t ip) {
      alignas(64) std::uint32_t packed_a[MR * KP];
      alignas(64) float part[MR * NR];
      const std::int64_t i0 = ip * MR, rows = std::min<std::int64_t>(MR, m - i0);
      // A row-major A of whole pairs is read in place by its full row panels, and by the edge ones
      // where the kernel has edge tiles (which read only the panel's rows); others are packed.
      const bool a_in_place = a_rows_in_place && (rows == MR || tiles.edge_rows);
      if (!a_in_place) pack_panel(op_a, i0, rows, MR, q0, kp, tiles.packer, packed_a);
      const std::uint16_t* a_rows = a + i0 * lda + 2 * q0;
      const auto run_tile = [&](const std::uint32_t* b_panel, float* c_tile, std::int64_t ldc_tile) {
        if (a_in_place)
          tiles.rows(kp, a_rows, lda, b_panel, c_tile, ldc_tile, accumulate);
        else
          tiles.packed(kp, packed_a, b_panel, c_tile, ldc_tile, accumulate);
      };
      for (std::int64_t jp = 0; jp < col_panels; ++jp) {
        const std::int64_t j0 = jp * NR, cols = std::min<std::int64_t>(NR, n - j0);
        float* c = out + i0 * ldc + j0;
        if (b_rows_in_place) {
          tiles.b_in_place(kp, a_in_place ? nullptr : packed_a, a_rows, lda, b + 2 * q0 * ldb + j0, ldb, c, ldc,
                           accumulate, static_cast<int>(rows), static_cast<int>(cols));
          continue;
        }
        const std::uint32_t* b_panel = packed_b + jp * NR * kp;
        if ((rows < MR || cols < NR) && tiles.edge) {
          const int r = static_cast<int>(rows), j = static_cast<int>(cols);
          if (a_in_place)
            tiles.edge_rows(kp, a_rows, lda, b_panel, c, ldc, accumulate, r, j);
          else
            tiles.edge(kp, packed_a, b_panel, c, ldc, accumulate, r, j);
          continue;
        }
        on_c_block(c, ldc, rows, cols, MR, accumulate, part,
                   [&](float* c_tile, std::int64_t ldc_tile) { run_tile(b_panel, c_tile, ldc_tile); });
      }
    };
    // One thread runs the panels here: even an inactive parallel region sets up a team.
    if (threads == 1) {
      for (std::int64_t ip = 0; ip < row_panels; ++ip) row_panel(ip);
    } else {
#pragma omp parallel for schedule(static) num_threads(threads)
      for (std::int64_t ip = 0; ip < row_panels; ++ip) row_panel(ip);
    }
  }

  // The same on AMX: 32-row panels of C, B's panels [stored][NR] with kp's pairs padded to a
  // multiple of 16 (zero words), A read in place when its panel is 32 whole rows of whole chunks,
  // else packed as rows of words [32][stored] (zero past the operand).
  void run_amx(const std::uint32_t* packed_b, std::int64_t q0, std::int64_t kp) const {
#if defined(__x86_64__)
    using gemm_bf16_detail::AMX_ROWS;
    const std::int64_t stored = stored_pairs(tiles, kp), chunks = stored / gemm_bf16_detail::AMX_PAIRS;
    const std::int64_t row_panels = (m + AMX_ROWS - 1) / AMX_ROWS, col_panels = (n + NR - 1) / NR;
    const bool accumulate = q0 > 0;
    const auto row_panel = [&](std::int64_t ip) {
      alignas(64) std::uint32_t packed_a[AMX_ROWS * KP];
      alignas(64) float part[AMX_ROWS * NR];
      const std::int64_t i0 = ip * AMX_ROWS, rows = std::min<std::int64_t>(AMX_ROWS, m - i0);
      const void* a_rows = packed_a;
      std::int64_t a_stride = stored * static_cast<std::int64_t>(sizeof(std::uint32_t));
      if (a_rows_in_place && rows == AMX_ROWS && stored == kp) {
        a_rows = a + i0 * lda + 2 * q0;
        a_stride = lda * static_cast<std::int64_t>(sizeof(std::uint16_t));
      } else {
        pack_amx_rows(op_a, i0, rows, q0, kp, stored, packed_a);
      }
      for (std::int64_t jp = 0; jp < col_panels; ++jp) {
        const std::int64_t j0 = jp * NR, cols = std::min<std::int64_t>(NR, n - j0);
        const std::uint32_t* b_panel = packed_b + jp * NR * stored;
        const bool top = rows <= AMX_ROWS / 2;  // the block's top half is all there is
        on_c_block(out + i0 * ldc + j0, ldc, rows, cols, top ? AMX_ROWS / 2 : AMX_ROWS, accumulate, part,
                   [&](float* c_tile, std::int64_t ldc_tile) {
                     (top ? gemm_bf16_detail::amx_bf16_block_top : gemm_bf16_detail::amx_bf16_block)(
                         chunks, a_rows, a_stride, b_panel, c_tile, ldc_tile, accumulate);
                   });
      }
    };
    // Each thread configures its own tiles (once: they stay configured for its next products).
    if (threads == 1) {
      gemm_bf16_detail::amx_tiles_begin();
      for (std::int64_t ip = 0; ip < row_panels; ++ip) row_panel(ip);
    } else {
#pragma omp parallel num_threads(threads)
      {
        gemm_bf16_detail::amx_tiles_begin();
#pragma omp for schedule(static)
        for (std::int64_t ip = 0; ip < row_panels; ++ip) row_panel(ip);
      }
    }
#else
    (void)packed_b, (void)q0, (void)kp;
#endif
  }
};

// Threads for an m x k x n product: one per grain of work, at most one per row panel.
int product_threads(const Bf16Tiles& tiles, std::int64_t m, std::int64_t k, std::int64_t n) {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const std::int64_t panel_rows = tiles.amx ? gemm_bf16_detail::AMX_ROWS : MR;
  const std::int64_t panels = (m + panel_rows - 1) / panel_rows;
  return static_cast<int>(std::min<std::int64_t>(threads_for(flops, kGemmGrainFlops), panels));
}

Bf16Operand operand_a(const std::uint16_t* a, std::int64_t lda, std::int64_t k, bool trans_a) {
  return trans_a ? Bf16Operand{a, 1, lda, k} : Bf16Operand{a, lda, 1, k};
}

}  // namespace

void gemm_bf16_strided(Bf16DotKernel kernel, const std::uint16_t* a, std::int64_t lda, const std::uint16_t* b,
                       std::int64_t ldb, float* out, std::int64_t ldc, std::int64_t m, std::int64_t k, std::int64_t n,
                       bool trans_a, bool trans_b) {
  const Bf16Tiles tiles = tiles_for(kernel);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (std::int64_t i = 0; i < m; ++i) std::fill(out + i * ldc, out + i * ldc + n, 0.0f);
    return;
  }
  // op(A)(i, p) and op(B)^T(j, p): both read as rows over the inner dimension p.
  const Bf16Operand op_a = operand_a(a, lda, k, trans_a);
  const Bf16Operand op_bt = trans_b ? Bf16Operand{b, ldb, 1, k} : Bf16Operand{b, 1, ldb, k};
  const std::int64_t pairs = (k + 1) / 2, col_panels = (n + NR - 1) / NR;
  const int threads = product_threads(tiles, m, k, n);
  // A row-major B with whole pairs is read in place by the VDPBF16PS tiles when few row panels
  // will read it (one thread, at most kBInPlaceRows rows: a MoE expert's product), each panel
  // interleaving its pairs of rows in registers instead of one packing pass: one thread, operands
  // in cache (gemm_bench --bf16), 64x64 @ 64x256 ran 387-398 -> 408-418 GFLOP/s, 40x64 @ 64x256
  // 367-370 -> 389-398, 96x128 @ 128x512 459-472 -> 462-489; the 64-expert bf16 step 1.06-1.07x
  // -> 1.085-1.09x its float32 twin. (The limit of 8 panels is not tuned further.)
  const bool b_in_place =
      tiles.b_in_place && !tiles.amx && !trans_b && k % 2 == 0 && threads == 1 && m <= kBInPlaceRows;
  const BlockProduct product{tiles, op_a, a, lda, !trans_a && k % 2 == 0, out, ldc, m, n, threads, b, ldb, b_in_place};
  if (b_in_place) {
    for (std::int64_t q0 = 0; q0 < pairs; q0 += KP) product.run(nullptr, q0, std::min(KP, pairs - q0));
    return;
  }
  // The packed B block lives as long as the thread, as gemm_f32's: a fresh allocation per product
  // (hundreds of KiB, so fresh pages from the OS each time) cost more than small products.
  // (The pointer is taken here: inside the parallel region a thread_local names each worker's own.)
  thread_local std::vector<std::uint32_t, CacheLineAllocator<std::uint32_t>> packed_b_buffer;
  const auto packed_size = static_cast<std::size_t>(col_panels * NR * stored_pairs(tiles, std::min(KP, pairs)));
  if (packed_b_buffer.size() < packed_size) packed_b_buffer.resize(packed_size);
  std::uint32_t* const packed_b = packed_b_buffer.data();
  for (std::int64_t q0 = 0; q0 < pairs; q0 += KP) {
    const std::int64_t kp = std::min(KP, pairs - q0);
    pack_b_block(tiles, op_bt, n, q0, kp, packed_b);
    product.run(packed_b, q0, kp);
  }
}

void pack_bf16_b(Bf16DotKernel kernel, const std::uint16_t* b, std::int64_t ldb, std::int64_t k, std::int64_t n,
                 bool trans_b, Bf16PackedB& packed) {
  const Bf16Tiles tiles = tiles_for(kernel);
  const Bf16Operand op_bt = trans_b ? Bf16Operand{b, ldb, 1, k} : Bf16Operand{b, 1, ldb, k};
  const std::int64_t pairs = (k + 1) / 2, col_panels = (n + NR - 1) / NR;
  packed.k = k, packed.n = n, packed.kernel = kernel;
  // Only the last block is padded (KP is a multiple of AMX's 16 pairs).
  static_assert(KP % gemm_bf16_detail::AMX_PAIRS == 0);
  const std::int64_t last = pairs > 0 ? (pairs - 1) / KP * KP : 0;
  packed.words.resize(static_cast<std::size_t>(col_panels * NR * (last + stored_pairs(tiles, pairs - last))));
  // Block q0's panels start after the earlier blocks' (col_panels * NR * q0 words).
  for (std::int64_t q0 = 0; q0 < pairs; q0 += KP)
    pack_b_block(tiles, op_bt, n, q0, std::min(KP, pairs - q0), packed.words.data() + col_panels * NR * q0);
}

void gemm_bf16_packed(Bf16DotKernel kernel, const std::uint16_t* a, std::int64_t lda, const Bf16PackedB& b,
                      std::int64_t n, float* out, std::int64_t ldc, std::int64_t m, bool trans_a) {
  MOELAB_CHECK(n >= 0 && n <= b.n, "gemm_bf16_packed", "uses ", n, " columns of a packed B of ", b.n);
  MOELAB_CHECK(kernel == b.kernel, "gemm_bf16_packed", "runs the ", bf16_kernel_name(kernel),
               " kernel on a B packed for ", bf16_kernel_name(b.kernel));
  const Bf16Tiles tiles = tiles_for(kernel);
  const std::int64_t k = b.k;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (std::int64_t i = 0; i < m; ++i) std::fill(out + i * ldc, out + i * ldc + n, 0.0f);
    return;
  }
  const Bf16Operand op_a = operand_a(a, lda, k, trans_a);
  const std::int64_t pairs = (k + 1) / 2, packed_panels = (b.n + NR - 1) / NR;
  // The first columns' panels of each block: a panel's columns past n are computed and not stored.
  const BlockProduct product{tiles, op_a, a, lda, !trans_a && k % 2 == 0, out, ldc, m, n,
                             product_threads(tiles, m, k, n)};
  for (std::int64_t q0 = 0; q0 < pairs; q0 += KP)
    product.run(b.words.data() + packed_panels * NR * q0, q0, std::min(KP, pairs - q0));
}

}  // namespace moelab::cpu
