// core/cpu/gemm_f32.cpp — a cache-blocked float32 GEMM in the style of BLIS / GotoBLAS.
//
// The matrix product is where a training step spends most of its time, and a naive triple loop
// reaches a few percent of what the CPU can do. Fast GEMMs all share one structure (Goto & van de
// Geijn, "Anatomy of high-performance matrix multiplication", 2008; the BLIS papers):
//
//   for each block of NC columns of B and C                        (jc)
//     for each slice of KC of the inner dimension                  (pc)
//       pack B[pc:pc+KC, jc:jc+NC] into column panels NR wide      -> stays in L2, shared by threads
//       for each MR-row panel of A and C (this thread's rows)      (ir)
//         for each NR-column panel of B                            (jr)
//           micro-kernel: C[MR, NR] (+)= A[MR, KC] @ Bpanel[KC, NR]
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
// step's A has 128 columns or fewer and meets few columns of B, so packing it (and blocking its rows by MC for
// L2, as BLIS does for large matrices) did not pay: with it, the driver outside the micro-kernel
// took 26% of a 2048 x 128 @ 128 x 128 product's time (perf, one thread).
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
constexpr std::int64_t kInPlaceRowFloats = 512;  // nor when B's rows are at most this long (2 KiB)

// The columns of one packed B block: NC rounded down to whole NR panels (NR = 24 on AVX2 does not
// divide 1024), so that a block's panels fill the packed buffer exactly and only the last block of
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

// Scratch that lives as long as the thread: products run thousands of times a step, and a fresh
// allocation each time (with its page faults) cost more than small products themselves.
// (On a cache line: the micro-kernels read the panels with whole-vector loads, core/cpu/cache_line_allocator.h.)
float* packed_b_buffer(std::size_t floats) {
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
    // Rows a multiple of 256 bytes apart (d = 64, 128, 512) fall in a few of L1's sets, and in a
    // loop over one product packing such a B won 1.16-1.59x on an AVX2 EPYC; in the training step
    // it changed nothing (the dense step 0.99x: docs/results/bench.md, 2026-12-03), so it is not done.
    const bool b_in_place = team == 1 && op_b.col_stride == 1 &&
                            (last_panel - first_panel <= kInPlaceRowPanels || op_b.row_stride <= kInPlaceRowFloats);
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
        for (std::int64_t i = row_begin; i < row_end; i += MR) {
          const std::int64_t rows = std::min<std::int64_t>(MR, row_end - i);
          // A's panel, read in place; the bottom edge's panel of rows < MR rows takes the tile of
          // that many rows (GemmTiles::edge), so no padding rows are computed.
          const float* a_panel = &op_a.data[i * op_a.row_stride + pc * op_a.col_stride];
          const std::int64_t a_stride = a_row_major ? op_a.row_stride : op_a.col_stride;
          const MicroKernel tile = rows == MR ? (a_row_major ? tiles.tile_rows : tiles.tile)
                                              : (a_row_major ? tiles.edge_rows[rows] : tiles.edge[rows]);
          for (std::int64_t jr = 0; jr < nc; jr += NR) {
            const std::int64_t cols = std::min<std::int64_t>(NR, nc - jr);
            float* c = out + i * ldc + jc + jr;
            const bool b_here = b_in_place && cols == NR;  // a full panel of B, read where it is
            const float* b_panel = b_here ? &op_b.data[pc * op_b.row_stride + jc + jr] : packed_b + jr * kc;
            const std::int64_t b_stride = b_here ? op_b.row_stride : NR;
            if (cols == NR) {
              tile(kc, a_panel, a_stride, b_panel, b_stride, c, ldc, accumulate);
            } else {  // the right edge: the whole tile into scratch, then its valid part copied (or added)
              alignas(64) float part[kMaxMR * kMaxNR];
              tile(kc, a_panel, a_stride, b_panel, b_stride, part, NR, false);
              for (std::int64_t r = 0; r < rows; ++r)
                for (std::int64_t j = 0; j < cols; ++j)
                  c[r * ldc + j] = (accumulate ? c[r * ldc + j] : 0.0f) + part[r * NR + j];
            }
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
