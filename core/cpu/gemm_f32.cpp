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
// each k, does MR * NR fused multiply-adds (core/cpu/gemm_micro_kernel.h). Its arithmetic depends
// on the vector width, so it is compiled once per instruction set (core/cpu/gemm_kernels_*.cpp)
// and the widest the CPU supports is chosen at run time (core/cpu/cpu_features.h): 12 x 32 tiles
// with AVX-512, 6 x 16 with AVX2. This file, the blocking, the packing and the threads, is the
// same for all of them.
//
// Threads split the rows of C into contiguous ranges (whole MR panels) and share the packed B.
// Every element of C is summed over k in the same order whatever the thread count, so results are
// bitwise identical for 1, 2 or 16 threads.
#include "core/cpu/gemm_f32.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/cpu/gemm_kernels.h"
#include "core/error.h"

namespace moelab::cpu {
namespace {

constexpr std::int64_t KC = 256;   // inner-dimension slice: an A panel (MR x KC) fits in L1
constexpr std::int64_t NC = 1024;  // columns per packed B block (KC x NC floats = 1 MiB, in L2/L3)
constexpr std::int64_t MC = 96;    // rows per packed A block (MC x KC floats = 96 KiB, in L2); a multiple of every MR

// The same as the micro-kernel for a partial tile at the right or bottom edge: compute a full
// tile into a scratch buffer, then copy (or add) its valid rows x cols into C.
void edge_kernel(const GemmKernels& kern, std::int64_t kc, const float* a_panel, const float* b_panel, float* c,
                 std::int64_t ldc, std::int64_t rows, std::int64_t cols, bool accumulate) {
  alignas(64) float tile[kMaxMR * kMaxNR];
  kern.tile(kc, a_panel, b_panel, tile, kern.nr, false);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j)
      c[r * ldc + j] = (accumulate ? c[r * ldc + j] : 0.0f) + tile[r * kern.nr + j];
}

// Element (i, p) of op(A) and (p, j) of op(B), whatever the storage.
struct Operand {
  const float* data;
  std::int64_t row_stride, col_stride;
  float at(std::int64_t i, std::int64_t j) const { return data[i * row_stride + j * col_stride]; }
};

// Packs rows [i0, i0+mc) x inner [p0, p0+kc) of op(A) as panels of mr rows: panel[p][r].
void pack_a(const Operand& a, int mr, std::int64_t i0, std::int64_t mc, std::int64_t p0, std::int64_t kc,
            float* out) {
  for (std::int64_t panel = 0; panel < mc; panel += mr) {
    const std::int64_t rows = std::min<std::int64_t>(mr, mc - panel);
    for (std::int64_t p = 0; p < kc; ++p) {
      for (std::int64_t r = 0; r < rows; ++r) out[r] = a.at(i0 + panel + r, p0 + p);
      for (std::int64_t r = rows; r < mr; ++r) out[r] = 0.0f;
      out += mr;
    }
  }
}

// Packs one nr-wide column panel of op(B): columns [j0, j0+cols) x inner [p0, p0+kc) as panel[p][c].
void pack_b_panel(const Operand& b, int nr, std::int64_t p0, std::int64_t kc, std::int64_t j0, std::int64_t cols,
                  float* out) {
  for (std::int64_t p = 0; p < kc; ++p) {
    if (cols == nr && b.col_stride == 1) {
      std::memcpy(out, b.data + (p0 + p) * b.row_stride + j0, nr * sizeof(float));
    } else {
      for (std::int64_t c = 0; c < cols; ++c) out[c] = b.at(p0 + p, j0 + c);
      for (std::int64_t c = cols; c < nr; ++c) out[c] = 0.0f;
    }
    out += nr;
  }
}

// Products with m * n * k at most this and k <= KC skip packing (GemmKernels::small).
constexpr std::int64_t kSmallProduct = 64 * 1024;

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
  const Operand op_a = trans_a ? Operand{a, 1, m} : Operand{a, k, 1};
  const Operand op_b = trans_b ? Operand{b, 1, k} : Operand{b, n, 1};
  if (k <= KC && m * n * k <= kSmallProduct)
    return kern.small(a, op_a.row_stride, op_a.col_stride, b, op_b.row_stride, op_b.col_stride, out, m, k, n);
  const int MR = kern.mr, NR = kern.nr;
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
          pack_b_panel(op_b, NR, pc, kc, jc + jr, std::min<std::int64_t>(NR, nc - jr), packed_b.get() + jr * kc);
        // (implicit barrier: B is packed before anyone reads it)
        for (std::int64_t ic = row_begin; ic < row_end; ic += MC) {
          const std::int64_t mc = std::min(MC, row_end - ic);
          pack_a(op_a, MR, ic, mc, pc, kc, packed_a.get());
          for (std::int64_t ir = 0; ir < mc; ir += MR) {
            const std::int64_t rows = std::min<std::int64_t>(MR, mc - ir);
            const float* a_panel = packed_a.get() + ir * kc;
            for (std::int64_t jr = 0; jr < nc; jr += NR) {
              const std::int64_t cols = std::min<std::int64_t>(NR, nc - jr);
              float* c = out + (ic + ir) * n + jc + jr;
              if (rows == MR && cols == NR)
                kern.tile(kc, a_panel, packed_b.get() + jr * kc, c, n, accumulate);
              else
                edge_kernel(kern, kc, a_panel, packed_b.get() + jr * kc, c, n, rows, cols, accumulate);
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
