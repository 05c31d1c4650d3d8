// core/cpu/gemm_bf16.h — bfloat16 matrix products on the CPU's bf16 dot-product instruction.
//
// A bf16 GEMM multiplies bfloat16 operands and sums in float32 (autograd/precision.h). Every CPU
// can do that by widening the operands to float32 (exact) and running the float32 GEMM, which is
// what core/cpu/matmul.cpp does by default. CPUs with AVX512_BF16 (Intel since Cooper Lake, AMD
// since Zen 4) have an instruction for it, VDPBF16PS, which handles twice as many products per
// instruction as a float32 FMA. Intel's manual defines it, for each float32 lane j, as two fused
// multiply-adds on a PAIR of bf16 values, the odd one first:
//
//   acc_j = fma(a[2j+1], b[2j+1], acc_j);   acc_j = fma(a[2j], b[2j], acc_j)
//
// with bf16 subnormal inputs read as zero (DAZ), subnormal results flushed to zero (FTZ), and round
// to nearest even. The products are exact (8-bit mantissas), so each step rounds once.
//
// So this GEMM sums each element of C over k in pairs: for q = 0, 1, ...: the step above with
// (a(i, 2q+1), b(2q+1, j)) then (a(i, 2q), b(2q, j)), one chain from 0 over all of k (an odd k
// gets a zero partner). Operands are packed so that each 32-bit word holds a pair (element 2q in
// the low half, as the instruction reads it): A panels [pairs][MR] broadcast one word per row (a
// row-major A with k even is read in place, its pairs being such words already), B panels
// [pairs][NR] give NR lanes per pair. Two kernels compute exactly that chain:
//   Avx512Bf16  VDPBF16PS on 12 x 32 tiles (core/cpu/gemm_bf16_avx512.cpp), where the CPU has it
//   Emulated    the same chain written out in C++ (std::fma, DAZ and FTZ by hand), slow: it lets
//               every machine test the packing and the tiles, and a CPU with the instruction test
//               the instruction against the definition (tests/test_gemm_bf16.cpp)
// The chain differs from the widened float32 GEMM's (which sums k in order, in blocks of 256) by
// float32 rounding only, so a bf16 run on a CPU with AVX512_BF16 is not bitwise the run on a CPU
// without it; float32 runs are untouched. MOELAB_CPU_BF16=widen makes a CPU with the instruction
// widen as the others do (for comparisons).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace moelab::cpu {

enum class Bf16DotKernel { Emulated, Avx512Bf16 };

// Whether this CPU has AVX512_BF16 (and the OS saves the 512-bit registers).
bool cpu_has_avx512_bf16();

// Whether CpuBackend::matmul multiplies bfloat16 operands with gemm_bf16 (Avx512Bf16): the CPU has
// the instruction, the kernels run at avx512 (MOELAB_CPU_ISA=avx2 or generic runs as such a CPU
// does: widened) and MOELAB_CPU_BF16 is unset or "native"; "widen" says no. Read once. Throws
// moelab::Error for another value, or for "native" on a CPU without the instruction or below avx512.
bool use_native_bf16_gemm();

// out [m, n] (float32, row-major, overwritten) = op(A) [m, k] @ op(B) [k, n]; a and b hold
// bfloat16 bit patterns (core/bfloat16.h), row-major: A is [m, k] ([k, m] when trans_a), B is
// [k, n] ([n, k] when trans_b). The pairwise chain of the header, with the given kernel (throws
// moelab::Error for Avx512Bf16 on a CPU without it). Threads: as gemm_f32 (core/cpu/thread_count.h);
// no bit depends on their number.
void gemm_bf16(Bf16DotKernel kernel, const std::uint16_t* a, const std::uint16_t* b, float* out, std::int64_t m,
               std::int64_t k, std::int64_t n, bool trans_a, bool trans_b);
// The same on blocks of larger matrices: A's rows (stored rows: columns of op(A) when trans_a) lda
// elements apart, B's ldb, out's ldc floats (attention's heads inside [B, T, H, hd] tensors).
void gemm_bf16_strided(Bf16DotKernel kernel, const std::uint16_t* a, std::int64_t lda, const std::uint16_t* b,
                       std::int64_t ldb, float* out, std::int64_t ldc, std::int64_t m, std::int64_t k, std::int64_t n,
                       bool trans_a, bool trans_b);

// B packed once for several products that read it: attention multiplies each head's k_h^T (and
// v_h^T) by three or more blocks of query rows, which packed it again for each (gemm_bf16_strided
// packs B per call; a profile of the bf16 step had the packing at 8%, most of it these).
struct Bf16PackedB {
  std::vector<std::uint32_t> words;  // for each block of pairs, the column panels gemm_bf16 packs
  std::int64_t k = 0, n = 0;         // op(B): [k, n]
};
// Packs op(B) [k, n] (B row-major, rows ldb elements apart; stored [n, k] when trans_b) into
// `packed` (its words reused, resized to fit).
void pack_bf16_b(Bf16DotKernel kernel, const std::uint16_t* b, std::int64_t ldb, std::int64_t k, std::int64_t n,
                 bool trans_b, Bf16PackedB& packed);
// out [m, n] (row stride ldc) = op(A) [m, k] @ op(B)[:, :n] for B packed by pack_bf16_b with the
// same kernel, n at most its n: the bits gemm_bf16_strided gives for those columns.
void gemm_bf16_packed(Bf16DotKernel kernel, const std::uint16_t* a, std::int64_t lda, const Bf16PackedB& b,
                      std::int64_t n, float* out, std::int64_t ldc, std::int64_t m, bool trans_a);

namespace gemm_bf16_detail {
constexpr int MR = 12, NR = 32;  // the C tile: 24 zmm accumulators of 16 floats
// C tile [MR, NR] (row stride ldc) = (accumulate ? C : 0) + the pairwise chain over `pairs` words of
// a_panel [pairs][MR] and b_panel [pairs][NR].
using Bf16Tile = void (*)(std::int64_t pairs, const std::uint32_t* a_panel, const std::uint32_t* b_panel, float* c,
                          std::int64_t ldc, bool accumulate);
void avx512_bf16_tile(std::int64_t pairs, const std::uint32_t* a_panel, const std::uint32_t* b_panel, float* c,
                      std::int64_t ldc, bool accumulate);  // core/cpu/gemm_bf16_avx512.cpp (x86-64 builds)
// Row r's pair q of a row-major bf16 A whose rows are lda elements apart, read in place: the
// 32-bit word at its elements 2q, 2q + 1 (element 2q in the low half, as packed).
inline std::uint32_t pair_in_place(const std::uint16_t* a, std::int64_t lda, int r, std::int64_t q) {
  std::uint32_t word;
  std::memcpy(&word, a + r * lda + 2 * q, sizeof(word));
  return word;
}
// The same tile with A read in place instead of from a packed panel (pair_in_place): a row-major A
// of MR whole rows whose pairs are all whole (k even). It saves packing A, which for a product of
// many rows and few columns cost as much as a third of the tile's time.
using Bf16TileRows = void (*)(std::int64_t pairs, const std::uint16_t* a, std::int64_t lda,
                              const std::uint32_t* b_panel, float* c, std::int64_t ldc, bool accumulate);
void avx512_bf16_tile_rows(std::int64_t pairs, const std::uint16_t* a, std::int64_t lda, const std::uint32_t* b_panel,
                           float* c, std::int64_t ldc, bool accumulate);
// Pairs [q0, q0 + whole) of `rows` rows from row i0 of a bf16 operand (element (i, p) at
// data[i * rows_stride + p * inner_stride]; every one of these pairs has both elements), packed as
// panel[q][r] of `width` words a row: the words gemm_bf16.cpp's pack_panel writes, with AVX-512
// moves. Returns false, and packs nothing, for a layout it has no path for (neither rows nor inner
// dimension contiguous, or an inner-contiguous operand into panels not a multiple of 16 wide).
using Bf16PairPacker = bool (*)(const std::uint16_t* data, std::int64_t rows_stride, std::int64_t inner_stride,
                                std::int64_t i0, std::int64_t rows, int width, std::int64_t q0, std::int64_t whole,
                                std::uint32_t* out);
bool avx512_pack_pairs(const std::uint16_t* data, std::int64_t rows_stride, std::int64_t inner_stride, std::int64_t i0,
                       std::int64_t rows, int width, std::int64_t q0, std::int64_t whole, std::uint32_t* out);
}  // namespace gemm_bf16_detail

}  // namespace moelab::cpu
