// core/cpu/gemm_f32.cpp — a cache-blocked float32 GEMM in the style of BLIS / GotoBLAS.
//
// The matrix product is where a training step spends most of its time, and a naive triple loop
// reaches a few percent of what the CPU can do. Fast GEMMs all share one structure (Goto & van de
// Geijn, "Anatomy of high-performance matrix multiplication", 2008; the BLIS papers):
//
//   for each block of NC columns of B and C                        (jc)
//     for each slice of KC of the inner dimension                  (pc)
//       pack B[pc:pc+KC, jc:jc+NC] into column panels NR wide      -> stays in L2, shared by threads
//       for each block of MC rows of A and C (this thread's rows)  (ic)
//         pack A[ic:ic+MC, pc:pc+KC] into row panels MR tall       -> one panel stays in L1
//         for each MR-row panel of A                               (ir)
//           for each NR-column panel of B                          (jr)
//             micro-kernel: C[MR, NR] (+)= Apanel[MR, KC] @ Bpanel[KC, NR]
//
// Packing copies the operands into the exact order the micro-kernel reads them (contiguous, zero
// padded at the edges), which also makes transposed operands free: only the packing loop knows
// the layout. The micro-kernel keeps the whole MR x NR tile of C in vector registers and, for
// each k, loads one row of the B panel (NR floats = NR/16 vectors), broadcasts each of the MR
// values of the A panel, and does MR * NR/16 fused multiply-adds. With AVX-512 the tile is
// 12 x 32 (24 accumulator registers of 32); with AVX2 it is 6 x 16 (12 of 16).
//
// The vectors are GCC/Clang vector extensions (`float __attribute__((vector_size(...)))`): the
// compiler turns `acc += a * b` into FMA instructions (this file is compiled with
// -ffp-contract=fast) for whatever the target supports, so there are no intrinsics to read.
//
// Threads split the rows of C into contiguous ranges (whole MR panels) and share the packed B.
// Every element of C is summed over k in the same order whatever the thread count, so results are
// bitwise identical for 1, 2 or 16 threads.
#include "core/cpu/gemm_f32.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#if defined(__AVX__)
#include <immintrin.h>
#endif
#include <omp.h>

#include <vector>

namespace moelab::cpu {
namespace {

#if defined(__AVX512F__)
constexpr int kLanes = 16;  // floats per vector register
constexpr int MR = 12;      // rows of the C tile
constexpr int NR = 32;      // columns of the C tile (2 vectors)
#else
constexpr int kLanes = 8;
constexpr int MR = 6;
constexpr int NR = 16;
#endif
constexpr int kVectorsPerRow = NR / kLanes;
constexpr std::int64_t KC = 256;   // inner-dimension slice: an A panel (MR x KC) fits in L1
constexpr std::int64_t NC = 1024;  // columns per packed B block (KC x NC floats = 1 MiB, in L2/L3)
constexpr std::int64_t MC = 96;    // rows per packed A block (MC x KC floats = 96 KiB, in L2)

typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(Vec));
  return v;
}
inline void store(float* p, Vec v) { std::memcpy(p, &v, sizeof(Vec)); }
// Every lane = x: one vbroadcastss from memory. (The portable spelling `Vec{} + x` makes GCC add
// 0.0f first and broadcast from a register, which costs a shuffle-port slot per row.)
inline Vec broadcast(float x) {
#if defined(__AVX512F__)
  return reinterpret_cast<Vec>(_mm512_set1_ps(x));
#elif defined(__AVX__)
  return reinterpret_cast<Vec>(_mm256_set1_ps(x));
#else
  return Vec{} + x;
#endif
}

// C tile (MR x NR at c, row stride ldc) = or += A panel [kc][MR] @ B panel [kc][NR].
void micro_kernel(std::int64_t kc, const float* a_panel, const float* b_panel, float* c, std::int64_t ldc,
                  bool accumulate) {
  Vec acc[MR][kVectorsPerRow] = {};
  for (std::int64_t p = 0; p < kc; ++p) {
    Vec b[kVectorsPerRow];
    for (int v = 0; v < kVectorsPerRow; ++v) b[v] = load(b_panel + v * kLanes);
    for (int r = 0; r < MR; ++r) {
      const Vec a = broadcast(a_panel[r]);  // A[r, p] in every lane
      for (int v = 0; v < kVectorsPerRow; ++v) acc[r][v] += a * b[v];
    }
    a_panel += MR;
    b_panel += NR;
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < kVectorsPerRow; ++v) {
      float* dst = c + r * ldc + v * kLanes;
      store(dst, accumulate ? load(dst) + acc[r][v] : acc[r][v]);
    }
}

// The same for a partial tile at the right or bottom edge: compute a full tile into a scratch
// buffer, then copy (or add) its valid rows x cols into C.
void edge_kernel(std::int64_t kc, const float* a_panel, const float* b_panel, float* c, std::int64_t ldc,
                 std::int64_t rows, std::int64_t cols, bool accumulate) {
  alignas(64) float tile[MR * NR];
  micro_kernel(kc, a_panel, b_panel, tile, NR, false);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) c[r * ldc + j] = (accumulate ? c[r * ldc + j] : 0.0f) + tile[r * NR + j];
}

// Element (i, p) of op(A) and (p, j) of op(B), whatever the storage.
struct Operand {
  const float* data;
  std::int64_t row_stride, col_stride;
  float at(std::int64_t i, std::int64_t j) const { return data[i * row_stride + j * col_stride]; }
};

// Packs rows [i0, i0+mc) x inner [p0, p0+kc) of op(A) as panels of MR rows: panel[p][r].
void pack_a(const Operand& a, std::int64_t i0, std::int64_t mc, std::int64_t p0, std::int64_t kc, float* out) {
  for (std::int64_t panel = 0; panel < mc; panel += MR) {
    const std::int64_t rows = std::min<std::int64_t>(MR, mc - panel);
    for (std::int64_t p = 0; p < kc; ++p) {
      for (std::int64_t r = 0; r < rows; ++r) out[r] = a.at(i0 + panel + r, p0 + p);
      for (std::int64_t r = rows; r < MR; ++r) out[r] = 0.0f;
      out += MR;
    }
  }
}

// Packs one NR-wide column panel of op(B): columns [j0, j0+cols) x inner [p0, p0+kc) as panel[p][c].
void pack_b_panel(const Operand& b, std::int64_t p0, std::int64_t kc, std::int64_t j0, std::int64_t cols, float* out) {
  for (std::int64_t p = 0; p < kc; ++p) {
    if (cols == NR && b.col_stride == 1) {
      std::memcpy(out, b.data + (p0 + p) * b.row_stride + j0, NR * sizeof(float));
    } else {
      for (std::int64_t c = 0; c < cols; ++c) out[c] = b.at(p0 + p, j0 + c);
      for (std::int64_t c = cols; c < NR; ++c) out[c] = 0.0f;
    }
    out += NR;
  }
}

// Products too small for packing to pay off (Soft MoE's per-example ones: [8, 4] @ [4, 196],
// [4, 8] @ [8, 196] and their gradients, 256 of them per batch): a direct loop, no packing, no
// OpenMP region. Each element of C is the same chain of fused multiply-adds over p = 0, 1, ...,
// k-1 starting from 0 as in the micro-kernel, so for k <= KC (one slice) the result is bitwise
// the blocked path's.
constexpr std::int64_t kSmallProduct = 64 * 1024;  // m * n * k at most

void small_gemm(const Operand& a, const Operand& b, float* c, std::int64_t m, std::int64_t k, std::int64_t n) {
  if (b.col_stride == 1) {  // B's rows are contiguous: C row i = sum over p of A[i, p] * B row p
    for (std::int64_t i = 0; i < m; ++i) {
      float* ci = c + i * n;
      std::fill(ci, ci + n, 0.0f);
      for (std::int64_t p = 0; p < k; ++p) {
        const float aip = a.at(i, p);
        const float* bp = b.data + p * b.row_stride;
        for (std::int64_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
      }
    }
  } else {  // B transposed: its columns are contiguous, so each C element is one dot product
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        // std::fma spelled out: GCC leaves this scalar chain as a multiply and an add otherwise.
        for (std::int64_t p = 0; p < k; ++p) acc = std::fma(a.at(i, p), b.at(p, j), acc);
        c[i * n + j] = acc;
      }
  }
}

}  // namespace

void gemm_f32(const float* a, const float* b, float* out, std::int64_t m, std::int64_t k, std::int64_t n,
              bool trans_a, bool trans_b) {
  const Operand op_a = trans_a ? Operand{a, 1, m} : Operand{a, k, 1};
  const Operand op_b = trans_b ? Operand{b, 1, k} : Operand{b, n, 1};
  if (k <= KC && m * n * k <= kSmallProduct) return small_gemm(op_a, op_b, out, m, k, n);
  const std::int64_t row_panels = (m + MR - 1) / MR;
  const int threads = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(omp_get_max_threads(), row_panels)));
  const std::int64_t nc_max = std::min(NC, (n + NR - 1) / NR * NR);
  const std::int64_t kc_max = std::min(KC, k);
  // Packing buffers sized to this product, not to the blocking maxima, and not zero-filled (the
  // packers write every element the kernels read, padding included): small products, like Soft
  // MoE's per-example ones, would otherwise spend most of their time clearing 100 KiB buffers.
  std::unique_ptr<float[]> packed_b(new float[static_cast<std::size_t>(kc_max * nc_max) + 16]);

#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    const int team = omp_get_num_threads();
    // This thread's rows of C: a contiguous range of whole MR-row panels.
    const std::int64_t first_panel = row_panels * t / team, last_panel = row_panels * (t + 1) / team;
    const std::int64_t row_begin = first_panel * MR, row_end = std::min(m, last_panel * MR);
    const std::int64_t mc_max = std::min(MC, (std::max<std::int64_t>(row_end - row_begin, 0) + MR - 1) / MR * MR);
    std::unique_ptr<float[]> packed_a(new float[static_cast<std::size_t>(mc_max * kc_max) + 16]);

    for (std::int64_t jc = 0; jc < n; jc += NC) {
      const std::int64_t nc = std::min(NC, n - jc);
      for (std::int64_t pc = 0; pc < k; pc += KC) {
        const std::int64_t kc = std::min(KC, k - pc);
        const bool accumulate = pc > 0;
        // Pack B[pc:pc+kc, jc:jc+nc] together, one NR panel per iteration.
#pragma omp for schedule(static)
        for (std::int64_t jr = 0; jr < nc; jr += NR)
          pack_b_panel(op_b, pc, kc, jc + jr, std::min<std::int64_t>(NR, nc - jr), packed_b.get() + jr * kc);
        // (implicit barrier: B is packed before anyone reads it)
        for (std::int64_t ic = row_begin; ic < row_end; ic += MC) {
          const std::int64_t mc = std::min(MC, row_end - ic);
          pack_a(op_a, ic, mc, pc, kc, packed_a.get());
          for (std::int64_t ir = 0; ir < mc; ir += MR) {
            const std::int64_t rows = std::min<std::int64_t>(MR, mc - ir);
            const float* a_panel = packed_a.get() + ir * kc;
            for (std::int64_t jr = 0; jr < nc; jr += NR) {
              const std::int64_t cols = std::min<std::int64_t>(NR, nc - jr);
              float* c = out + (ic + ir) * n + jc + jr;
              if (rows == MR && cols == NR)
                micro_kernel(kc, a_panel, packed_b.get() + jr * kc, c, n, accumulate);
              else
                edge_kernel(kc, a_panel, packed_b.get() + jr * kc, c, n, rows, cols, accumulate);
            }
          }
        }
#pragma omp barrier
        // (everyone is done reading this packed B before the next slice overwrites it)
      }
    }
  }
}

}  // namespace moelab::cpu
