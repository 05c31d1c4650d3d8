// cuda/grouped_matmul.cu — grouped matrix products whose group offsets stay on the GPU, the MoE
// expert layers (mirrors core/cpu/grouped_matmul.cpp).
//
// Group e owns rows r0 = offsets[e] .. r1 - 1 = offsets[e+1] - 1 of x; offsets: int32 [E + 1],
// made on the device by routing (cuda/routing.cu) and never read back to the host:
//   forward:      out[r0:r1] = x[r0:r1] @ op(w[e])   x_e: [rows, in], w[e]: [in, out] (stored
//                                                    [out, in] when trans_w) -> [rows, out]
//                 out[offsets[E]:N] = 0               (rows in no group: what a capacity dropped)
//   weight grad:  dw[e] = x_e^T @ dy_e                [in, rows] @ [rows, out] -> [in, out]
//                 (zeros for a group with no rows; rows past offsets[E] are not read)
//
// Why not cuBLAS. cuBLAS takes every size (here the rows of each group) as a host integer, so a
// loop of cuBLAS GEMMs (what this file used to be) or cublasGemmGroupedBatchedEx first copies the
// offsets to the host, and that copy drains the stream: every MoE layer, forward and backward,
// would wait for the GPU to finish all the work queued before it. So the products here are our
// own tiled GEMM, in which every thread block reads the offsets itself, on the device:
//
//   forward   grid.x = ceil(N / M) + E "row-tile slots", grid.y = ceil(out / N) column tiles
//             (an M x N tile: 128 x 128 for float32 by default, 64 x 64 for float64).
//             Group e needs ceil(rows_e / M) row tiles, and since sum_e rows_e <= N,
//             sum_e ceil(rows_e / M) <= ceil(N / M) + E: that many slots always suffice.
//             Block (s, j) walks the groups adding up their tile counts until it reaches its
//             slot s: that gives its group e and its M rows; slots past the last tile exit at
//             once. Each block computes one M x N tile of out from x's rows and w[e].
//             A second small kernel zeroes rows offsets[E] .. N-1.
//   weight    grid = (ceil(out / N), ceil(in / M), E * splits): block (j, i, e * splits + c)
//   grad      computes one M x N tile of dw[e] over the c-th of `splits` runs of group e's rows
//             (none: it writes zeros). With splits > 1 (too few tiles to fill the GPU) the runs'
//             tiles go to a scratch buffer and a second kernel adds them in order c = 0, 1, ...
//
// The tile GEMM and its tile shapes: cuda/tile_gemm.cuh.
// MOELAB_GROUPED_TILE picks one per kernel (GroupedTiles below). On an H100 (the GPU preset's
// step, 8 experts top-2, d 512; docs/results/gpu-h100-2026-11-26) the step ran at 168.5k tokens/s
// with 64 x 64 tiles and no split, 169.5k with 128 x 128, 188.0k with 128 x 128 and the split
// weight gradient, 197.8k with 128 x 128v: the 64 x 64 weight gradient had run at about 15 TFLOP/s,
// the forward at 28 (ncu), cuBLAS's float32 GEMMs at about 45 on the same card.
//
// Determinism: each output element is summed over k = 0, 1, ... in that order by exactly one
// thread, with no atomics, so the result is bitwise the same run after run and for every tile
// shape; the weight gradient's splits, a function of the shapes only (never of the GPU), add the
// runs' sums in a fixed order. Not bitwise the CPU's: nvcc contracts the multiply-adds into FMAs,
// the CPU's blocked GEMM sums in another order. The tensor-core tiles (below) are deterministic
// too, run after run, but with bits of their own.
//
// The offsets are checked on the device (check_group_offsets, cuda/group_offsets.cuh): a bad
// entry is reported at the next synchronisation, and every kernel reads them clamped to [0, N]
// (a group that ends before it starts is empty), so bad offsets can give a wrong result (with
// groups that overlap, more tiles than slots: some rows are then left unwritten) but never a
// read or write outside the tensors.
//
// The tensor cores. bfloat16 operands (--precision bf16), and float32 ones when core/backend.h's
// CudaFloat32Products asks for TF32 or 3xTF32 (--precision tf32 / tf32x3), run on the tensor-core
// tile of cuda/mma_tile_gemm.cuh (WMMA fragments, float32 accumulation, float32 results) in the
// same two kernels, the same grid and the same split; MOELAB_GROUPED_TILE then does not apply. Their
// registers are sized for 2 resident blocks per SM (128 a thread; the forward kernels spill up to
// 312 bytes): on an H200 that was 9-10% faster than 1 block with 255 registers and no spill
// (docs/results/gpu-h200-2026-11-30, measured at 87b8e8c with both compiled in).
//
// Cost, honestly. The float32 default runs on the CUDA cores in FP32/FP64 FMAs; the tensor-core
// tile is plain WMMA: no asynchronous copies (cp.async, TMA), no Hopper wgmma, one shared tile.
// What it all buys is a MoE layer with no host round trip.
// A faster version (wgmma tiles, cp.async pipelining, or cuBLASLt grouped GEMM with device-side
// size arrays if a future CUDA allows it) would change only this file and its tile headers.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "cuda/caching_allocator.h"
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_errors.cuh"
#include "cuda/device_utils.cuh"
#include "cuda/group_offsets.cuh"
#include "cuda/mma_tile_gemm.cuh"
#include "cuda/tile_gemm.cuh"

namespace moelab {
namespace {

using cuda::LargeTile;
using cuda::PipelinedTile;
using cuda::SmallTile;
using cuda::WideTile;
using cuda::tile_product;

constexpr int kTileThreads = 256;               // every tile's block size
constexpr int kCheckThreads = 256;              // threads of the offsets check (one block)
constexpr unsigned int kMaxGridYZ = 65535;      // CUDA's limit on grid.y and grid.z
constexpr std::int64_t kMaxWidth = 1 << 24;     // in and out below this: tile_product's int offsets

using cuda::clamped_offset;

// The tensor-core tiles (cuda/mma_tile_gemm.cuh): float32 operands as TF32 or 3xTF32, bfloat16
// operands as they are; all three write float32.
using Tf32Tile = cuda::MmaTile<float, cuda::MmaKind::TF32>;
using Tf32x3Tile = cuda::MmaTile<float, cuda::MmaKind::TF32x3>;
using Bf16Tile = cuda::MmaTile<__nv_bfloat16, cuda::MmaKind::BF16>;

template <class Tl>
struct IsMmaTile : std::false_type {};
template <class In, cuda::MmaKind kKind>
struct IsMmaTile<cuda::MmaTile<In, kKind>> : std::true_type {};

// The element type a tile writes: float32 for the tensor-core tiles, the operands' T otherwise.
template <class T, class Tl>
using ProductOut = std::conditional_t<IsMmaTile<Tl>::value, float, T>;

// tile_product or mma_tile_product, by the tile type (same operands and counts).
template <class T, class Tl, bool kATransposed, bool kBTransposed>
__device__ __forceinline__ void any_tile_product(const T* a, std::int64_t lda, const T* b, std::int64_t ldb,
                                                 int m_count, int n_count, std::int64_t k_count,
                                                 ProductOut<T, Tl>* c, std::int64_t ldc) {
  if constexpr (IsMmaTile<Tl>::value)
    cuda::mma_tile_product<T, Tl, kATransposed, kBTransposed>(a, lda, b, ldb, m_count, n_count, k_count, c, ldc);
  else
    tile_product<T, Tl, kATransposed, kBTransposed>(a, lda, b, ldb, m_count, n_count, k_count, c, ldc);
}

// ---------------------------------------------------------------- the offsets check

// One block: records the first e where 0 = offsets[0] <= ... <= offsets[groups] <= rows fails.
__global__ void check_offsets_kernel(const std::int32_t* offsets, std::int64_t groups, std::int64_t rows, int op,
                                     cuda::DeviceError* error) {
  __shared__ unsigned long long first_bad;
  if (threadIdx.x == 0) first_bad = ULLONG_MAX;
  __syncthreads();
  for (std::int64_t e = threadIdx.x; e <= groups; e += blockDim.x) {
    const std::int64_t v = offsets[e];
    const bool bad = (e == 0 ? v != 0 : v < offsets[e - 1]) || v > rows;
    if (bad) atomicMin(&first_bad, static_cast<unsigned long long>(e));
  }
  __syncthreads();
  if (threadIdx.x == 0 && first_bad != ULLONG_MAX) {
    const auto e = static_cast<std::int64_t>(first_bad);
    cuda::report_index_error(error, op, e, offsets[e], rows);
  }
}

// ---------------------------------------------------------------- forward

// x: [rows, in], w: [groups, in, out] (or [groups, out, in] when kTransW), out: [rows, out].
// grid = (row-tile slots, column tiles); see the header for how a block finds its group.
template <class T, class Tl, bool kTransW>
__global__ void __launch_bounds__(kTileThreads, Tl::BlocksPerSM)
    grouped_forward_kernel(const T* x, const T* w, const std::int32_t* offsets, std::int64_t groups,
                           std::int64_t rows, std::int64_t in, std::int64_t out_dim, ProductOut<T, Tl>* out) {
  std::int64_t slot = blockIdx.x;
  std::int64_t group = -1, tile_row = 0, group_end = 0;
  std::int64_t r0 = clamped_offset(offsets, 0, rows);
  for (std::int64_t e = 0; e < groups; ++e) {  // the same walk in every thread: no divergence
    const std::int64_t r1 = clamped_offset(offsets, e + 1, rows);
    const std::int64_t tiles = r1 > r0 ? (r1 - r0 + Tl::M - 1) / Tl::M : 0;
    if (slot < tiles) {
      group = e;
      tile_row = r0 + slot * Tl::M;
      group_end = r1;
      break;
    }
    slot -= tiles;
    r0 = r1;
  }
  if (group < 0) return;  // a spare slot (the grid is an upper bound); the whole block leaves
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.y) * Tl::N;
  const T* w_e = w + group * in * out_dim;
  // B = op(w[e]) restricted to columns n0..: B[k][n] = w_e[k * out + n0 + n], or w_e[(n0 + n) * in + k].
  const T* b = kTransW ? w_e + n0 * in : w_e + n0;
  const std::int64_t ldb = kTransW ? in : out_dim;
  const int m_count = static_cast<int>(group_end - tile_row < Tl::M ? group_end - tile_row : Tl::M);
  const int n_count = static_cast<int>(out_dim - n0 < Tl::N ? out_dim - n0 : Tl::N);
  any_tile_product<T, Tl, false, kTransW>(x + tile_row * in, in, b, ldb, m_count, n_count, in,
                                          out + tile_row * out_dim + n0, out_dim);
}

// out rows offsets[groups] .. rows-1 (clamped) := 0; out: [rows, out_dim].
template <class T>
__global__ void zero_rows_past_groups_kernel(const std::int32_t* offsets, std::int64_t groups, std::int64_t rows,
                                             std::int64_t out_dim, T* out) {
  const std::int64_t begin = clamped_offset(offsets, groups, rows) * out_dim, end = rows * out_dim;
  for (std::int64_t i = begin + cuda::first_index(); i < end; i += cuda::grid_stride()) out[i] = T(0);
}

// ---------------------------------------------------------------- weight gradient

// x: [rows, in], dy: [rows, out]; grid = (column tiles, row tiles of in, groups * splits).
// Block (j, i, e * splits + c) sums the c-th of `splits` equal runs of group e's rows:
//   dw_part[c][e] = x_e[run c]^T @ dy_e[run c]   dw_part: [splits, groups, in, out]
// (splits = 1: dw_part is dw itself; otherwise sum_splits_kernel adds the runs in order c = 0, 1, ...).
template <class T, class Tl>
__global__ void __launch_bounds__(kTileThreads, Tl::BlocksPerSM)
    grouped_weight_grad_kernel(const T* x, const T* dy, const std::int32_t* offsets, std::int64_t groups,
                               std::int64_t splits, std::int64_t rows, std::int64_t in, std::int64_t out_dim,
                               ProductOut<T, Tl>* dw_part) {
  const std::int64_t e = blockIdx.z / splits, c = blockIdx.z % splits;
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.y) * Tl::M;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.x) * Tl::N;
  const std::int64_t g0 = clamped_offset(offsets, e, rows), g1 = clamped_offset(offsets, e + 1, rows);
  const std::int64_t length = g1 > g0 ? g1 - g0 : 0;  // 0: an empty group, the tile is written as zeros
  const std::int64_t r0 = g0 + length * c / splits, k_count = g0 + length * (c + 1) / splits - r0;
  const int m_count = static_cast<int>(in - i0 < Tl::M ? in - i0 : Tl::M);
  const int n_count = static_cast<int>(out_dim - n0 < Tl::N ? out_dim - n0 : Tl::N);
  ProductOut<T, Tl>* dw = dw_part + c * groups * in * out_dim;
  // A[m][k] = x_e^T[i0 + m][k] = x[(r0 + k) * in + i0 + m]; B[k][n] = dy[(r0 + k) * out + n0 + n].
  any_tile_product<T, Tl, true, false>(x + r0 * in + i0, in, dy + r0 * out_dim + n0, out_dim, m_count, n_count,
                                       k_count, dw + (e * in + i0) * out_dim + n0, out_dim);
}

// dw[i] = part[0][i] + part[1][i] + ... + part[splits - 1][i], in that order; part: [splits, count].
template <class T>
__global__ void sum_splits_kernel(const T* part, std::int64_t splits, std::int64_t count, T* dw) {
  for (std::int64_t i = cuda::first_index(); i < count; i += cuda::grid_stride()) {
    T total = part[i];
    for (std::int64_t c = 1; c < splits; ++c) total += part[c * count + i];
    dw[i] = total;
  }
}

using cuda::ceil_div;

// The tile of the float32 forward and weight-gradient kernels (float64 always uses 64 x 64: a
// 128 x 128 tile's 64 double accumulators a thread would spill): MOELAB_GROUPED_TILE=SHAPE or
// =FORWARD,WEIGHT_GRAD with each one of 64 (SmallTile), 128 (LargeTile), 128v (WideTile), 128d (PipelinedTile), for
// benchmarks and for the parity tests that run every shape. Results are bitwise the same for
// every choice (see tile_product); the weight gradient's splits (below) do change them.
enum class TileShape { Small, Large, Wide, Pipelined };

struct GroupedTiles {  // the default: see the header
  TileShape forward = TileShape::Wide;
  TileShape weight_grad = TileShape::Wide;
};

GroupedTiles grouped_tiles() {
  static const GroupedTiles tiles = [] {
    GroupedTiles chosen;
    const char* value = std::getenv("MOELAB_GROUPED_TILE");
    if (value == nullptr || *value == '\0') return chosen;
    const std::string text(value);
    const std::size_t comma = text.find(',');
    const std::string first = text.substr(0, comma), second = comma == std::string::npos ? first : text.substr(comma + 1);
    const auto shape = [&](const std::string& part) {
      MOELAB_CHECK(part == "64" || part == "128" || part == "128v" || part == "128d", "grouped_matmul",
                   "MOELAB_GROUPED_TILE='", text,
                   "': expected 64, 128, 128v, 128d or FORWARD,WEIGHT_GRAD with each one of those");
      return part == "64"     ? TileShape::Small
             : part == "128"  ? TileShape::Large
             : part == "128v" ? TileShape::Wide
                              : TileShape::Pipelined;
    };
    chosen.forward = shape(first);
    chosen.weight_grad = shape(second);
    return chosen;
  }();
  return tiles;
}

// Calls body.template operator()<Tl>() with the tile type of `shape` (float; float64: SmallTile).
template <class T, class Body>
void with_tile(TileShape shape, Body&& body) {
  if constexpr (std::is_same_v<T, float>) {
    switch (shape) {
      case TileShape::Small: body.template operator()<SmallTile>(); return;
      case TileShape::Large: body.template operator()<LargeTile>(); return;
      case TileShape::Wide: body.template operator()<WideTile>(); return;
      case TileShape::Pipelined: body.template operator()<PipelinedTile>(); return;
    }
  }
  body.template operator()<SmallTile>();
}

// out = grouped x @ op(w) with tile Tl; the grid covers the worst case (see the header).
template <class T, class Tl>
void launch_grouped_forward(const T* x, const T* w, const std::int32_t* offsets, std::int64_t groups,
                            std::int64_t rows, std::int64_t in, std::int64_t out_dim, bool trans_w,
                            ProductOut<T, Tl>* out) {
  const std::int64_t slots = ceil_div(rows, Tl::M) + groups, column_tiles = ceil_div(out_dim, Tl::N);
  MOELAB_CHECK(slots <= INT_MAX && column_tiles <= kMaxGridYZ && in < kMaxWidth && out_dim < kMaxWidth,
               "grouped_matmul", "N = ", rows, ", E = ", groups, ", in = ", in, ", out = ", out_dim,
               " need more thread blocks (or wider offsets) than the CUDA backend's tiling allows");
  const dim3 grid(static_cast<unsigned int>(slots), static_cast<unsigned int>(column_tiles));
  if (trans_w)
    grouped_forward_kernel<T, Tl, true>
        <<<grid, kTileThreads, 0, cuda::stream()>>>(x, w, offsets, groups, rows, in, out_dim, out);
  else
    grouped_forward_kernel<T, Tl, false>
        <<<grid, kTileThreads, 0, cuda::stream()>>>(x, w, offsets, groups, rows, in, out_dim, out);
  MOELAB_CUDA_CHECK_LAUNCH();
}

// dw[e] = x_e^T @ dy_e with tile Tl. With few tiles (E * tiles of dw[e] below kTargetBlocks: 128
// blocks for E = 8 and d = 512, on a GPU with 132 SMs) each block would sum thousands of rows
// while most of the GPU idles, so each group's rows are cut into `splits` runs whose products go
// to a scratch buffer and are added in a fixed order: deterministic, and a function of the shapes
// alone (not of the GPU), so every GPU gives the same bits. MOELAB_GROUPED_SPLIT=1 turns it off.
constexpr std::int64_t kTargetBlocks = 512;
constexpr std::int64_t kMaxSplits = 8;

std::int64_t max_splits() {
  static const std::int64_t limit = [] {
    const char* value = std::getenv("MOELAB_GROUPED_SPLIT");
    if (value == nullptr || *value == '\0') return kMaxSplits;
    const std::string text(value);
    MOELAB_CHECK(text.size() == 1 && text[0] >= '1' && text[0] <= '8', "grouped_matmul_weight_grad",
                 "MOELAB_GROUPED_SPLIT='", text, "': expected a number from 1 to 8 (the most runs a group's rows are cut into)");
    return static_cast<std::int64_t>(text[0] - '0');
  }();
  return limit;
}

template <class T, class Tl>
void launch_grouped_weight_grad(const T* x, const T* dy, const std::int32_t* offsets, std::int64_t groups,
                                std::int64_t rows, std::int64_t in, std::int64_t out_dim, ProductOut<T, Tl>* dw) {
  using Out = ProductOut<T, Tl>;
  const std::int64_t column_tiles = ceil_div(out_dim, Tl::N), row_tiles = ceil_div(in, Tl::M);
  const std::int64_t tiles = column_tiles * row_tiles * groups;
  std::int64_t splits = std::min(max_splits(), std::max<std::int64_t>(1, ceil_div(kTargetBlocks, tiles)));
  // Runs of fewer than 2 k-steps of rows are not worth a scratch buffer (rows / groups: the mean group).
  splits = std::max<std::int64_t>(1, std::min(splits, rows / std::max<std::int64_t>(groups, 1) / (2 * Tl::K)));
  MOELAB_CHECK(column_tiles <= INT_MAX && row_tiles <= kMaxGridYZ && groups * splits <= kMaxGridYZ && in < kMaxWidth &&
                   out_dim < kMaxWidth,
               "grouped_matmul_weight_grad", "E = ", groups, ", in = ", in, ", out = ", out_dim,
               " need more thread blocks (or wider offsets) than the CUDA backend's tiling allows");
  const dim3 grid(static_cast<unsigned int>(column_tiles), static_cast<unsigned int>(row_tiles),
                  static_cast<unsigned int>(groups * splits));
  const std::int64_t count = groups * in * out_dim;
  if (splits == 1) {
    grouped_weight_grad_kernel<T, Tl>
        <<<grid, kTileThreads, 0, cuda::stream()>>>(x, dy, offsets, groups, 1, rows, in, out_dim, dw);
    MOELAB_CUDA_CHECK_LAUNCH();
    return;
  }
  cuda::DeviceBuffer<Out> part(static_cast<std::size_t>(splits * count));
  grouped_weight_grad_kernel<T, Tl>
      <<<grid, kTileThreads, 0, cuda::stream()>>>(x, dy, offsets, groups, splits, rows, in, out_dim, part.get());
  MOELAB_CUDA_CHECK_LAUNCH();
  sum_splits_kernel<Out><<<cuda::blocks_for(count), cuda::kThreads, 0, cuda::stream()>>>(part.get(), splits, count, dw);
  MOELAB_CUDA_CHECK_LAUNCH();
}

}  // namespace

namespace cuda {

void check_group_offsets(const std::int32_t* offsets, std::int64_t groups, std::int64_t rows, int op) {
  check_offsets_kernel<<<1, kCheckThreads, 0, stream()>>>(offsets, groups, rows, op, device_error());
  MOELAB_CUDA_CHECK_LAUNCH();
}

}  // namespace cuda

namespace {

// Calls body.template operator()<T, Tl>() with the operands' element type and the tile of a
// product whose operands have `dtype`: bfloat16 on the tensor cores (Bf16Tile, float32 out);
// float32 on the tensor cores when core/backend.h's CudaFloat32Products asks for them
// (Tf32Tile, Tf32x3Tile), else the CUDA-core tile `shape` (MOELAB_GROUPED_TILE); float64 on 64 x 64.
template <class Body>
void with_product_tile(DType dtype, TileShape shape, Body&& body) {
  if (dtype == DType::BFloat16) return body.template operator()<__nv_bfloat16, Bf16Tile>();
  if (dtype == DType::Float32) {
    switch (cuda_float32_products()) {
      case CudaFloat32Products::TF32: return body.template operator()<float, Tf32Tile>();
      case CudaFloat32Products::TF32x3: return body.template operator()<float, Tf32x3Tile>();
      case CudaFloat32Products::Float32: break;
    }
  }
  dispatch_float(dtype, [&]<class T>() { with_tile<T>(shape, [&]<class Tl>() { body.template operator()<T, Tl>(); }); });
}

// A tensor's elements as T; bfloat16 tensors hold core/bfloat16.h's 16 bits, which are
// __nv_bfloat16's.
template <class T>
const T* elements(const Tensor& t) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return static_cast<const __nv_bfloat16*>(t.raw());
  else return t.data<T>();
}

}  // namespace

void CudaBackend::grouped_matmul(const Tensor& x, const Tensor& w, const Tensor& offsets, bool trans_w,
                                 Tensor& out) {
  // x: [N, in], w: [E, in, out] or [E, out, in], offsets: int32 [E + 1] on the GPU, out: [N, out]
  // (float32 for bfloat16 x and w).
  const std::int64_t groups = w.size(0), rows = x.size(0), in = x.size(1), out_dim = out.size(1);
  const std::int32_t* off = offsets.data<std::int32_t>();
  cuda::check_group_offsets(off, groups, rows, cuda::kGroupedMatmul);  // also for empty sizes
  if (out.numel() == 0) return;
  with_product_tile(x.dtype(), grouped_tiles().forward, [&]<class T, class Tl>() {
    using Out = ProductOut<T, Tl>;
    Out* po = out.data<Out>();
    if (groups > 0)  // in == 0 is fine: every tile is a sum over nothing and is written as zeros
      launch_grouped_forward<T, Tl>(elements<T>(x), elements<T>(w), off, groups, rows, in, out_dim, trans_w, po);
    // The rows past offsets[E]: a grid-stride loop over at most all N rows (most threads of a
    // grid sized for the worst case find nothing to do; capped, since the count is unknown here).
    const unsigned int zero_blocks = std::min(cuda::blocks_for(rows * out_dim), 1024u);
    zero_rows_past_groups_kernel<Out><<<zero_blocks, cuda::kThreads, 0, cuda::stream()>>>(off, groups, rows, out_dim,
                                                                                           po);
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::grouped_matmul_weight_grad(const Tensor& x, const Tensor& dy, const Tensor& offsets, Tensor& dw) {
  // x: [N, in], dy: [N, out], offsets: int32 [E + 1] on the GPU, dw: [E, in, out] = x_e^T @ dy_e
  // (float32 for bfloat16 x and dy).
  const std::int64_t groups = dw.size(0), rows = x.size(0), in = x.size(1), out_dim = dy.size(1);
  const std::int32_t* off = offsets.data<std::int32_t>();
  cuda::check_group_offsets(off, groups, rows, cuda::kGroupedMatmulWeightGrad);  // also for empty sizes
  if (dw.numel() == 0) return;
  with_product_tile(x.dtype(), grouped_tiles().weight_grad, [&]<class T, class Tl>() {
    using Out = ProductOut<T, Tl>;
    launch_grouped_weight_grad<T, Tl>(elements<T>(x), elements<T>(dy), off, groups, rows, in, out_dim,
                                      dw.data<Out>());
  });
}

}  // namespace moelab
