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
// Intel CPUs since Sapphire Rapids also have AMX: eight tile registers of 16 rows x 64 bytes and
// TDPBF16PS, which multiplies a 16 x 32 bf16 tile by a 32 x 16 one into a 16 x 16 float32 tile,
// 16 384 FLOPs an instruction (a 2-core Xeon VM ran 3.1 TFLOP/s on one core, against 218 GFLOP/s
// of float32 FMAs and 107 of VDPBF16PS: on that CPU VDPBF16PS is slower than float32).
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
//   Amx         TDPBF16PS on 32 x 32 blocks of C (core/cpu/gemm_bf16_amx.cpp), where the CPU has
//               AMX-BF16 and Linux lets the process use the tiles. Its sums are not the chain
//               above: each instruction adds 16 pairs of products to C, and the order in which
//               the hardware sums within one instruction is not the manual's pseudo-code (measured
//               on a Xeon VM: a lone pair gave fl(c + fl(p0 + p1)) for all of 512 000 elements,
//               16 pairs matched no sequential order tried). It is deterministic, and its error
//               was within 8.0 x 2^-24 x (|c| + sum |products|) over 256 000 elements of 33 terms,
//               inside the bound of any float32 summation in round-to-nearest; the tests compare
//               it with the emulated chain to that bound. Inner dimensions are padded with zero
//               pairs to multiples of 16.
// The chain differs from the widened float32 GEMM's (which sums k in order, in blocks of 256) by
// float32 rounding only, so a bf16 run on a CPU with AVX512_BF16 is not bitwise the run on a CPU
// without it, nor a run on a CPU with AMX; float32 runs are untouched. MOELAB_CPU_BF16 picks the
// kernel: unset or "native" the fastest the CPU has (amx, else vdpbf16ps, else widen), "amx" or
// "vdpbf16ps" that one, "widen" the float32 GEMM as on CPUs without either (for comparisons).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/cpu/cache_line_allocator.h"

namespace moelab::cpu {

enum class Bf16DotKernel { Emulated, Avx512Bf16, Amx };

// Whether this CPU has AVX512_BF16 (and the OS saves the 512-bit registers).
bool cpu_has_avx512_bf16();
// Whether this CPU has AMX-BF16 and AVX512_BF16 (the AMX kernel packs with AVX-512) and Linux
// granted this process the tile registers (arch_prctl ARCH_REQ_XCOMP_PERM, asked once, here).
bool cpu_has_amx_bf16();

// Whether CpuBackend::matmul multiplies bfloat16 operands with gemm_bf16, and with which kernel
// (native_bf16_kernel: Amx or Avx512Bf16): the CPU has an instruction for it, the kernels run at
// avx512 (MOELAB_CPU_ISA=avx2 or generic runs as such a CPU does: widened) and MOELAB_CPU_BF16 does
// not say "widen" (values: the header). Read once. Throws moelab::Error for another value, or for
// one naming an instruction this CPU lacks or MOELAB_CPU_ISA below avx512.
bool use_native_bf16_gemm();
Bf16DotKernel native_bf16_kernel();  // meaningful where use_native_bf16_gemm()
const char* bf16_kernel_name(Bf16DotKernel kernel);  // "emulated", "vdpbf16ps", "amx"

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
  // For each block of pairs, the column panels gemm_bf16 packs; on a cache line, as the kernels'
  // vector and tile loads want (core/cpu/cache_line_allocator.h).
  std::vector<std::uint32_t, CacheLineAllocator<std::uint32_t>> words;
  std::int64_t k = 0, n = 0;         // op(B): [k, n]
  Bf16DotKernel kernel = Bf16DotKernel::Emulated;  // the kernel it was packed for (AMX pads pairs)
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
// The tiles on an edge block of C in place: `rows` (1 .. MR) rows and `cols` (1 .. NR) columns, the
// rest of the MR x NR tile neither computed nor read nor written (masked): the bits the full tile
// gives those elements. Without them an edge block ran the full tile on a padded copy of C (and a
// row-major A's last, partial row panel was packed): a 64-expert MoE's products have such a panel
// in nearly every product (some 64 rows an expert; 64 = 5 x 12 + 4 rows of a weight gradient). With
// them the 64-expert bf16 step ran 1.09-1.10x as fast as its float32 twin instead of 1.05-1.06x
// (train_step_bench --paired-fp32, builds in turn on a Zen 5).
using Bf16EdgeTile = void (*)(std::int64_t pairs, const std::uint32_t* a_panel, const std::uint32_t* b_panel, float* c,
                              std::int64_t ldc, bool accumulate, int rows, int cols);
using Bf16EdgeTileRows = void (*)(std::int64_t pairs, const std::uint16_t* a, std::int64_t lda,
                                  const std::uint32_t* b_panel, float* c, std::int64_t ldc, bool accumulate, int rows,
                                  int cols);
void avx512_bf16_edge_tile(std::int64_t pairs, const std::uint32_t* a_panel, const std::uint32_t* b_panel, float* c,
                           std::int64_t ldc, bool accumulate, int rows, int cols);
void avx512_bf16_edge_tile_rows(std::int64_t pairs, const std::uint16_t* a, std::int64_t lda,
                                const std::uint32_t* b_panel, float* c, std::int64_t ldc, bool accumulate, int rows,
                                int cols);
// The tile (full, or an edge block as above) with B read in place from a row-major B whose rows
// are ldb elements apart (b: element (2q, 0) of the block's first pair and column), each pair's two
// rows interleaved in registers instead of packed: A from a packed panel (a_panel), or in place
// (a_panel null: a, lda as for Bf16TileRows). The words, so the bits, of the packed B.
using Bf16TileBInPlace = void (*)(std::int64_t pairs, const std::uint32_t* a_panel, const std::uint16_t* a,
                                  std::int64_t lda, const std::uint16_t* b, std::int64_t ldb, float* c,
                                  std::int64_t ldc, bool accumulate, int rows, int cols);
void avx512_bf16_tile_b_in_place(std::int64_t pairs, const std::uint32_t* a_panel, const std::uint16_t* a,
                                 std::int64_t lda, const std::uint16_t* b, std::int64_t ldb, float* c, std::int64_t ldc,
                                 bool accumulate, int rows, int cols);
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

// The AMX kernel (core/cpu/gemm_bf16_amx.cpp, x86-64 builds). amx_tiles_begin loads the tile
// configuration (all eight tiles 16 rows x 64 bytes) on this thread if it has not yet, and it stays
// loaded for the thread's later products; amx_tiles_end releases the tiles (TILERELEASE: the OS then
// has no tile state to save for the thread) and the next begin loads the configuration again.
constexpr int AMX_ROWS = 32, AMX_PAIRS = 16;  // a block of C is 32 x NR; a step is 16 pairs of k
void amx_tiles_begin();
void amx_tiles_end();
// C block [32, 32] (row stride ldc floats) = (accumulate ? C : 0) + A [32 rows][16 chunks pairs]
// times B [16 chunks pairs][32 columns]: A's rows a_stride bytes apart (each a row of words, pair q
// at byte 4q), B a panel [16 chunks][NR] words as pack_panel writes it. tmm0..3 hold C's four
// 16 x 16 tiles, tmm4..5 A's two row tiles, tmm6..7 B's two column tiles.
void amx_bf16_block(std::int64_t chunks, const void* a, std::int64_t a_stride, const std::uint32_t* b_panel, float* c,
                    std::int64_t ldc, bool accumulate);
// Its top half: C [16, 32] from A's first 16 rows (tmm0..1, tmm4, tmm6..7), the bits the whole
// block gives those rows.
void amx_bf16_block_top(std::int64_t chunks, const void* a, std::int64_t a_stride, const std::uint32_t* b_panel, float* c,
                        std::int64_t ldc, bool accumulate);
// Pairs [q0, q0 + whole) of `rows` (at most 32) rows from row i0 of a bf16 operand whose rows are
// contiguous (element (i, p) at data[i + p * inner_stride]: a transposed A), as out[r][q] with rows
// out_stride words apart: the words of Bf16Operand::pair, rows past `rows` left as they are.
void avx512_pack_pair_rows(const std::uint16_t* data, std::int64_t inner_stride, std::int64_t i0, std::int64_t rows,
                           std::int64_t q0, std::int64_t whole, std::uint32_t* out, std::int64_t out_stride);
}  // namespace gemm_bf16_detail

}  // namespace moelab::cpu
