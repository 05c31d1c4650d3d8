// core/cpu/gemm_f32.cpp — a cache-blocked float32 GEMM in the style of BLIS / GotoBLAS.
//
// The matrix product is where a training step spends most of its time, and a naive triple loop
// reaches a few percent of what the CPU can do. Fast GEMMs all share one structure (Goto & van de
// Geijn, "Anatomy of high-performance matrix multiplication", 2008; the BLIS papers):
//
//   for each block of NC columns of B and C                        (jc)
//     for each slice of KC of the inner dimension                  (pc)
//       pack B[pc:pc+KC, jc:jc+NC] into column panels NR wide      -> stays in L2, shared by threads
//       for each block of MB row panels (this thread's rows)       (ib)
//         for each NR-column panel of B                            (jr)  -> that panel stays in L1
//           for each MR-row panel of A and C in the block          (ir)  -> the block's A in L1/L2
//             micro-kernel: C[MR, NR] (+)= A[MR, KC] @ Bpanel[KC, NR]
//
// Packing copies B into the exact order the micro-kernel reads it (contiguous, zero padded at the
// right edge), which also makes a transposed B free: only the packing loop knows the layout. A is
// read in place: the micro-kernel broadcasts one element of A per row and step, and takes A's
// layout as a stride (row-major A through GemmKernels::tile_rows, a transposed A through tile);
// the partial panel at the bottom edge runs a tile of its own row count (GemmKernels: edge,
// edge_rows). It used to be packed with zero rows, computed whole into scratch and copied: with
// the AVX2 tile, one expert's products of 45-83 rows by 64 ran 1.04-1.15x faster without that, a
// narrow product of 50 rows 1.5x, and a [2048, 128] @ [128, 128] one within 3% (the same process
// alternating the two codes in 5 ms slices, medians of 40; the bits the same). The training
// step's A has 128 columns or fewer and meets few columns of B, so packing it did not pay: with
// it, the driver outside the micro-kernel took 26% of a 2048 x 128 @ 128 x 128 product's time
// (perf, one thread). Its row panels are still taken in blocks of MB, for the B panel's sake (the
// loops in Blocked::run say why). The exception is a transposed A whose stored rows are far apart
// (a weight gradient h^T @ g with h 256 or more wide): its panel then maps to a few cache sets and
// cannot stay in L1 between the column panels that reuse it, so a thread packs its rows of each
// KC slice first (pack_a_block).
// The micro-kernel keeps the whole MR x NR tile of C in vector registers and, for each k, does
// MR * NR fused multiply-adds (core/cpu/gemm_micro_kernel.h). Its arithmetic depends on the vector
// width, so it is compiled once per instruction set (core/cpu/gemm_kernels_*.cpp) and the widest
// the CPU supports is chosen at run time (core/cpu/cpu_features.h): 12 x 32 tiles with AVX-512,
// 6 x 16 with AVX2. This file, the blocking, the packing and the threads, is the same for all.
//
// Threads split the rows of C into contiguous ranges (whole MR panels) and share the packed B. A
// product called inside a parallel region (matmul.cpp gives each thread whole products of a batch)
// runs on its thread alone, without opening a region of its own. Every element of C is summed over
// k in the same order whatever the thread count and whichever way A is read, so results are
// bitwise identical for 1, 2 or 16 threads. Each product is timed by shape while the profile of
// core/cpu/gemm_profile.h is on (bench/train_step_bench --gemm-profile).
#include "core/cpu/gemm_f32.h"

#include <omp.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include <algorithm>
#include <vector>

#include "core/cpu/cache_line_allocator.h"
#include "core/cpu/gemm_kernels.h"
#include "core/cpu/gemm_profile.h"
#include "core/cpu/thread_count.h"
#include "core/error.h"

namespace moelab::cpu {
namespace {

constexpr std::int64_t KC = 256;   // inner-dimension slice: an A panel (MR x KC) fits in L1
constexpr std::int64_t NC = 1024;  // columns per packed B block (KC x NC floats = 1 MiB, in L2/L3)
constexpr std::int64_t kInPlaceRowPanels = 2;  // at most this many A panels: B is not packed
constexpr std::int64_t kInPlaceRowFloats = 512;  // nor when B's rows are at most this long (2 KiB),
constexpr std::int64_t kPackedAliasedRowPanels = 16;  // unless exactly 2 KiB and this many A panels
constexpr std::int64_t kPackedARowFloats = 256;  // a transposed A with rows this far apart is packed
constexpr std::int64_t kPackedAColumnPanels = 4;  // when at least this many B panels reuse it
constexpr std::int64_t kPackedManyRowPanels = 64;  // this many A panels: B packed whatever its rows
constexpr std::int64_t kRowBlockPanels = 8;  // MB: A panels per block, each B panel run against all

// The columns of one packed B block: NC rounded down to whole NR panels (for a tile width that
// does not divide 1024), so that a block's panels fill the packed buffer exactly and only the last block of
// a product has a partial panel.
constexpr std::int64_t column_block(std::int64_t nr) { return NC / nr * nr; }

// op(A) or op(B), whatever the storage: element (i, j) is data[i * row_stride + j * col_stride].
struct Operand {
  const float* data;
  std::int64_t row_stride, col_stride;
};

#ifdef __AVX2__
// r[0..7] as the rows of an 8 x 8 matrix -> its transpose, in place (the usual unpack / shuffle /
// lane-permute sequence: pairs, then quads, then the two 128-bit halves).
inline void transpose_8x8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
#endif

// Packs one nr-wide column panel of op(B): columns [j0, j0+cols) x inner [p0, p0+kc) as panel[p][c],
// zero padded. A full row is copied 8 floats at a time with fixed-size copies, which compile to
// vector moves: a memcpy call per row of 32 floats (what GCC makes of a plain copy loop) cost more
// than the copy, a tenth of the dense training step.
void pack_b_panel(const Operand& b, int nr, std::int64_t p0, std::int64_t kc, std::int64_t j0, std::int64_t cols,
                  float* __restrict out) {
  if (b.col_stride == 1) {  // rows of op(B) contiguous: copy kc runs of cols floats
    const float* src = b.data + p0 * b.row_stride + j0;
    for (std::int64_t p = 0; p < kc; ++p, src += b.row_stride, out += nr) {
      if (cols == nr) {  // nr is a multiple of 8
        for (std::int64_t c = 0; c < nr; c += 8) __builtin_memcpy(out + c, src + c, 8 * sizeof(float));
        continue;
      }
      for (std::int64_t c = 0; c < cols; ++c) out[c] = src[c];
      for (std::int64_t c = cols; c < nr; ++c) out[c] = 0.0f;
    }
    return;
  }
  // op(B) = stored B^T (row_stride 1): column c of the panel is a contiguous run of B's row j0 + c.
  // Every x @ W^T (a Linear's forward) and attention's q @ k^T packs this way, so it is done in
  // 8 x 8 blocks transposed in AVX2 registers (the baseline every build targets): eight loads of
  // eight p from eight columns, eight stores of eight columns for one p. It is a copy, so the
  // packed values, and every result, are the same bits as the scalar loop's, which does the edges.
  std::int64_t c_done = 0, p_done = 0;
  // The padding columns, zeroed in one pass over the panel before the copy fills the others: a
  // loop per p over the nr - cols padding floats compiled to a memset call each, and cost a
  // partial panel's product ([24, 32] @ [32, 24]^T, attention's first block) 1.19x its time.
  if (cols < nr) std::fill_n(out, kc * nr, 0.0f);
#ifdef __AVX2__
  c_done = cols - cols % 8, p_done = kc - kc % 8;
  for (std::int64_t c = 0; c < c_done; c += 8) {
    const float* src = b.data + (j0 + c) * b.col_stride + p0;
    for (std::int64_t p = 0; p < p_done; p += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * b.col_stride + p);  // column c + i, p .. p+7
      transpose_8x8(r);                                                               // r[i]: p + i, columns c .. c+7
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(out + (p + i) * nr + c, r[i]);
    }
  }
#endif
  for (std::int64_t c = 0; c < cols; ++c) {
    const float* src = b.data + (j0 + c) * b.col_stride + p0;
    for (std::int64_t p = c < c_done ? p_done : 0; p < kc; ++p) out[p * nr + c] = src[p];
  }
}

// Packs this thread's rows [row_begin, row_end) of a transposed A (element (i, p) at
// data[i + p * col_stride]) for inner [p0, p0 + kc) into MR-row panels, panel q at
// out + q * panel_stride as [kc][MR] (a partial last panel: [kc][MR] with its rows < MR unused),
// what the micro-kernel reads with a_stride = MR. It walks the stored A row by row (p), so its loads
// stream; read in place instead, each tile fetched a panel's kc lines of A again, since lines
// kc rows of 256+ floats apart fall in 4 or fewer of L1's 64 sets and cannot stay there while B
// streams past. On a Zen 3 this took [256 | 512, 2048]^T @ [2048, 64 | 128 | 256] from 1.10x to
// 1.32x faster (one process alternating both, cold copies, an A/A control within 2%), while
// with rows 32-128 floats apart it went 0.91-1.03x, so those are read in place. A copy: the bits
// of C are the same.
template <int MR>
void pack_a_rows(const float* row, float* out) {
  for (int r = 0; r < MR; ++r) out[r] = row[r];  // a fixed count: vector moves
}
void pack_a_block(const Operand& a, int mr, std::int64_t p0, std::int64_t kc, std::int64_t row_begin,
                  std::int64_t row_end, float* __restrict out, std::int64_t panel_stride) {
  const std::int64_t full_end = row_begin + (row_end - row_begin) / mr * mr;
  const float* src = a.data + p0 * a.col_stride;
  for (std::int64_t p = 0; p < kc; ++p, src += a.col_stride) {
    float* dst = out + p * mr;
    std::int64_t i = row_begin;
    for (; i < full_end; i += mr, dst += panel_stride) {
      if (mr == 6) pack_a_rows<6>(src + i, dst);
      else if (mr == 12) pack_a_rows<12>(src + i, dst);
      else for (int r = 0; r < mr; ++r) dst[r] = src[i + r];
    }
    for (std::int64_t r = 0; r < row_end - i; ++r) dst[r] = src[i + r];
  }
}

// Scratch that lives as long as the thread: products run thousands of times a step, and a fresh
// allocation each time (with its page faults) cost more than small products themselves.
// (On a cache line: the micro-kernels read the panels with whole-vector loads, core/cpu/cache_line_allocator.h.)
float* packed_b_buffer(std::size_t floats) {
  thread_local std::vector<float, CacheLineAllocator<float>> buffer;
  if (floats > buffer.size()) buffer.resize(floats);
  return buffer.data();
}
float* packed_a_buffer(std::size_t floats) {  // this thread's own: each packs only its rows
  thread_local std::vector<float, CacheLineAllocator<float>> buffer;
  if (floats > buffer.size()) buffer.resize(floats);
  return buffer.data();
}

// One product cut into the blocks of the header. Thread `t` of `team` computes its rows of C and
// packs its share of each B block; with team > 1 it runs inside the product's own parallel region,
// whose barriers separate the packing of a B block from its use and from the next block.
struct Blocked {
  const GemmTiles& tiles;
  Operand op_a, op_b;
  bool a_row_major;  // op(A)'s rows contiguous (read with tile_rows), else its columns (tile)
  float* out;
  std::int64_t m, k, n, ldc;  // ldc: out's row stride (n for a contiguous C)
  float* packed_b;

  void run(int t, int team) const {
    const int MR = tiles.mr, NR = tiles.nr;
    const std::int64_t row_panels = (m + MR - 1) / MR;
    // This thread's rows of C: a contiguous range of whole MR-row panels.
    const std::int64_t first_panel = row_panels * t / team, last_panel = row_panels * (t + 1) / team;
    const std::int64_t row_begin = first_panel * MR, row_end = std::min(m, last_panel * MR);
    // B read in place: one thread (nobody shares a packed B), B's rows contiguous, and either at
    // most kInPlaceRowPanels A panels to use each B panel or B's rows at most kInPlaceRowFloats
    // apart. Short rows stream well from L1/L2 as they are: on one thread (perf, CPU time) the
    // training step's g @ W and g^T @ x ([2048, 128] @ [128, 128], [128, 2048] @ [2048, 128]) took
    // 8-10% less time unpacked, products with n = 512 and k = 2048 up to 20% less; with rows of
    // 1024 floats (4 KiB apart) packing still won, by ~10%. The same multiply-adds in the same order
    // as with a packed B: only where B is read from changes, never a bit of C.
    // Rows exactly 2 KiB apart (a 4d FFN's h, f = 512) are the exception when many A panels read
    // them: a panel's one cache line per row then falls in 2 of the 64 sets of the L1 (4 KiB a way
    // on these x86 cores). On a Zen 3 (L1 8-way, L2 512 KiB 8-way) such a B read in place lost to a
    // packed one by 1.08-1.30x with 16 or more A panels ([2048, 64 | 128 | 256] @ [.., 512], 144
    // rows, [128 | 256, 2048]^T @ [2048, 512]: one process alternating both on cold copies, an A/A
    // control within 1-3%), while rows 520 floats apart ran in place within 7% of packed: the
    // stride, not the length. With 3-12 panels it went either way (0.80-1.20x), so those stay in
    // place; where the rule above was tuned (another CPU, under load) a 128-row weight gradient
    // with n = 512 ran faster in place, and on AVX-512 (mr 12) that product has 11 panels and still
    // does. Rows of 128 or 256 floats gained nothing from packing here (0.98-1.01x; the step 0.99x,
    // bench.md 2026-12-03). AVX-512 CPUs have not measured this case.
    // And with 64 or more A panels (the 2048-row g @ W of the benchmark step) B is packed whatever
    // its rows, so that the loops below can keep one B panel in L1 for a block of A panels: on the
    // Zen 3, [2048, 128] @ [128, 128] 1.02-1.08x, [2048, 64] @ [64, 64] 1.15-1.17x, 384-1024 rows
    // 0.98-1.06x (and below 64 panels packing lost: 48-192 rows 0.87-0.97x).
    const std::int64_t a_panels = last_panel - first_panel;
    const bool b_in_place = team == 1 && op_b.col_stride == 1 && a_panels < kPackedManyRowPanels &&
                            (a_panels <= kInPlaceRowPanels || op_b.row_stride < kInPlaceRowFloats ||
                             (op_b.row_stride == kInPlaceRowFloats && a_panels < kPackedAliasedRowPanels));
    // A transposed A far-strided, reused by enough column panels: packed per slice (pack_a_block).
    const bool pack_a = !a_row_major && op_a.col_stride >= kPackedARowFloats && n >= kPackedAColumnPanels * NR;
    const std::int64_t a_panel_stride = MR * std::min(KC, k);
    float* a_packed = pack_a ? packed_a_buffer(static_cast<std::size_t>(a_panels * a_panel_stride)) : nullptr;
    const std::int64_t nc_block = column_block(NR);
    for (std::int64_t jc = 0; jc < n; jc += nc_block) {
      const std::int64_t nc = std::min(nc_block, n - jc);
      for (std::int64_t pc = 0; pc < k; pc += KC) {
        const std::int64_t kc = std::min(KC, k - pc);
        const bool accumulate = pc > 0;
        // Pack B[pc:pc+kc, jc:jc+nc], one NR panel per iteration, shared by the team. Or, when few
        // A panels will read it (b_in_place), read a row-major B where it is and pack only the
        // partial panel at its right edge: a copy that is used once or twice costs as much as the
        // product itself (Soft MoE's [4, 128] @ [128, 196] per example, n = 128, was 2/5 packing).
        const std::int64_t panels = (nc + NR - 1) / NR;
        if (b_in_place) {
          if (nc % NR != 0)
            pack_b_panel(op_b, NR, pc, kc, jc + (panels - 1) * NR, nc % NR, packed_b + (panels - 1) * NR * kc);
        } else if (team == 1) {
          for (std::int64_t q = 0; q < panels; ++q)
            pack_b_panel(op_b, NR, pc, kc, jc + q * NR, std::min<std::int64_t>(NR, nc - q * NR), packed_b + q * NR * kc);
        } else {
#pragma omp for schedule(static)
          for (std::int64_t q = 0; q < panels; ++q)
            pack_b_panel(op_b, NR, pc, kc, jc + q * NR, std::min<std::int64_t>(NR, nc - q * NR), packed_b + q * NR * kc);
          // (implicit barrier: B is packed before anyone reads it)
        }
        if (pack_a) pack_a_block(op_a, MR, pc, kc, row_begin, row_end, a_packed, a_panel_stride);
        // A's row panel i, read in place (or packed): where and with what stride the tile reads
        // it, and the tile for its row count (the bottom edge's panel of rows < MR rows takes the
        // tile of that many rows, GemmTiles::edge, so no padding rows are computed).
        struct APanel {
          const float* data;
          std::int64_t stride, rows;
          MicroKernel tile;
        };
        const auto a_panel_at = [&](std::int64_t i) {
          const std::int64_t rows = std::min<std::int64_t>(MR, row_end - i);
          return APanel{pack_a ? a_packed + (i - row_begin) / MR * a_panel_stride
                               : &op_a.data[i * op_a.row_stride + pc * op_a.col_stride],
                        pack_a ? MR : a_row_major ? op_a.row_stride : op_a.col_stride, rows,
                        rows == MR ? (a_row_major ? tiles.tile_rows : tiles.tile)
                                   : (a_row_major ? tiles.edge_rows[rows] : tiles.edge[rows])};
        };
        // C[i : i+rows, jc+jr : +NR] (+)= A's panel a (rows i ..) @ B's column panel jr. Inlined by
        // force: as a call per tile it took a point more of the 64-expert step (perf) than the loop
        // it replaced.
        const auto tile_at = [&](const APanel& a, std::int64_t i, std::int64_t jr) __attribute__((always_inline)) {
          const std::int64_t cols = std::min<std::int64_t>(NR, nc - jr);
          float* c = out + i * ldc + jc + jr;
          const bool b_here = b_in_place && cols == NR;  // a full panel of B, read where it is
          const float* b_panel = b_here ? &op_b.data[pc * op_b.row_stride + jc + jr] : packed_b + jr * kc;
          const std::int64_t b_stride = b_here ? op_b.row_stride : NR;
          if (cols == NR) {
            a.tile(kc, a.data, a.stride, b_panel, b_stride, c, ldc, accumulate);
          } else {  // the right edge: the whole tile into scratch, then its valid part copied (or added)
            alignas(64) float part[kMaxMR * kMaxNR];
            a.tile(kc, a.data, a.stride, b_panel, b_stride, part, NR, false);
            for (std::int64_t r = 0; r < a.rows; ++r)
              for (std::int64_t j = 0; j < cols; ++j)
                c[r * ldc + j] = (accumulate ? c[r * ldc + j] : 0.0f) + part[r * NR + j];
          }
        };
        // The order of the tiles. A packed B panel (kc x NR, contiguous) stays in L1 while it runs
        // against a block of kRowBlockPanels A panels (8 x 6 x 256 floats on AVX2, 48 KiB, from
        // L2), so each tile streams A's MR values a step from L2 instead of B's NR. With the
        // other order (every B panel against one A panel, in this driver) the Zen 3 ran x @ W^T
        // ([2048 | 512, 128] @ [128, 128]^T, [2048, 128] @ [128, 512]^T) 1.01-1.10x slower, two
        // shapes 0.98-0.99x (blocks of 4-64 panels all alike). In the training step, against the
        // loop before this one (each A panel against every B panel, 2026-12-04's d563e1e), the
        // whole GEMM of this file took 0.93-0.94x the time with a 4d FFN (d 128, dense or 8
        // experts), 0.87-0.89x at d 256 with f 1024, and came out even on the benchmark models
        // (0.98-1.01x); without this order, 0.95-0.97x, 0.89x and even (steps alternating in one
        // process, 50-100 pairs, A/A within 1.5%). A B read in place cannot stay in L1 (its rows'
        // lines share a few sets), so then each A panel runs against every B panel instead, and
        // it is A's panel that stays in L1.
        if (b_in_place) {
          for (std::int64_t i = row_begin; i < row_end; i += MR) {
            const APanel a = a_panel_at(i);
            for (std::int64_t jr = 0; jr < nc; jr += NR) tile_at(a, i, jr);
          }
        } else {
          for (std::int64_t block = row_begin; block < row_end; block += kRowBlockPanels * MR) {
            APanel block_panels[kRowBlockPanels];
            const int count = static_cast<int>((std::min(row_end, block + kRowBlockPanels * MR) - block + MR - 1) / MR);
            for (int q = 0; q < count; ++q) block_panels[q] = a_panel_at(block + q * MR);
            for (std::int64_t jr = 0; jr < nc; jr += NR)
              for (int q = 0; q < count; ++q) tile_at(block_panels[q], block + q * MR, jr);
          }
        }
        if (team > 1) {
#pragma omp barrier
          // (everyone is done reading this packed B before the next slice overwrites it)
        }
      }
    }
  }
};

// Products with m * n * k at most this, k <= KC and B not transposed skip packing
// (GemmKernels::small). Its loop keeps rows of C in memory, so it only wins on tiny products; with
// a transposed B it is a scalar dot product per element, and even Soft MoE's [8, 196] @ [196, 4]
// ran faster blocked, where packing transposes B once.
constexpr std::int64_t kSmallProduct = 16 * 1024;

}  // namespace

const GemmKernels& gemm_kernels(CpuIsa isa) {
  MOELAB_CHECK(isa <= detected_isa(), "gemm_f32", "the ", isa_name(isa), " kernels need a CPU with ", isa_name(isa),
               "; this one has ", isa_name(detected_isa()));
  switch (isa) {
#if defined(__x86_64__)
    case CpuIsa::Avx512: return gemm_kernels_avx512();
    case CpuIsa::Avx2: return gemm_kernels_avx2();
#endif
    case CpuIsa::Generic: return gemm_kernels_generic();
    default: fail("gemm_f32", "this build has no ", isa_name(isa), " kernels");
  }
}

void gemm_f32(const float* a, const float* b, float* out, std::int64_t m, std::int64_t k, std::int64_t n,
              bool trans_a, bool trans_b) {
  static const GemmKernels& active = gemm_kernels(active_isa());
  gemm_f32(active, a, b, out, m, k, n, trans_a, trans_b);
}

void gemm_f32(const GemmKernels& kern, const float* a, const float* b, float* out, std::int64_t m, std::int64_t k,
              std::int64_t n, bool trans_a, bool trans_b) {
  if (k <= KC && m * n * k <= kSmallProduct && !trans_b) {
    const GemmProfileScope profile(m, k, n, trans_a, false, false);
    return kern.small(a, trans_a ? 1 : k, trans_a ? m : 1, b, n, 1, out, m, k, n);
  }
  gemm_f32_strided(kern, a, trans_a ? m : k, b, trans_b ? k : n, out, n, m, k, n, trans_a, trans_b);
}

void gemm_f32_strided(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* out, std::int64_t ldc,
                      std::int64_t m, std::int64_t k, std::int64_t n, bool trans_a, bool trans_b) {
  static const GemmKernels& active = gemm_kernels(active_isa());
  gemm_f32_strided(active, a, lda, b, ldb, out, ldc, m, k, n, trans_a, trans_b);
}

void gemm_f32_strided(const GemmKernels& kern, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                      float* out, std::int64_t ldc, std::int64_t m, std::int64_t k, std::int64_t n, bool trans_a,
                      bool trans_b) {
  const GemmProfileScope profile(m, k, n, trans_a, trans_b,
                                 lda != (trans_a ? m : k) || ldb != (trans_b ? k : n) || ldc != n);
  const Operand op_a = trans_a ? Operand{a, 1, lda} : Operand{a, lda, 1};
  const Operand op_b = trans_b ? Operand{b, 1, ldb} : Operand{b, ldb, 1};
  // A product at most one vector wide takes the narrow tile (core/cpu/gemm_kernels.h).
  const GemmTiles& tiles = n <= kern.narrow.nr ? kern.narrow : kern.wide;
  const std::int64_t row_panels = (m + tiles.mr - 1) / tiles.mr;
  // One thread per kGemmGrainFlops of work (core/cpu/thread_count.h), at most one per row panel;
  // inside a parallel region (a batch of products shared among threads) one thread, and then no
  // region of its own: an inactive nested region still costs a team's set-up.
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int threads = static_cast<int>(
      std::min<std::int64_t>(threads_for(flops, kGemmGrainFlops), std::max<std::int64_t>(1, row_panels)));
  const std::int64_t nc_max = std::min(column_block(tiles.nr), (n + tiles.nr - 1) / tiles.nr * tiles.nr);
  const Blocked job{tiles, op_a, op_b, !trans_a, out, m, k, n, ldc,
                    packed_b_buffer(static_cast<std::size_t>(std::min(KC, k) * nc_max))};
  if (threads == 1) return job.run(0, 1);
#pragma omp parallel num_threads(threads)
  job.run(omp_get_thread_num(), omp_get_num_threads());
}

}  // namespace moelab::cpu
