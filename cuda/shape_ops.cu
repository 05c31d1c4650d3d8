// cuda/shape_ops.cu — block copies (concat/split/narrow) and axis permutation on the GPU (mirrors
// core/cpu/shape_ops.cpp).
//
// copy_block: x seen as [outer, n, inner], out as [outer, out_n, inner]; rows [start, start+len)
//   of x's middle axis go to out's middle offset out_start. Each outer slice is one contiguous run
//   of len*inner elements on both sides, so the flat element e of the copy (o = e / run,
//   rest = e % run) moves from x[(o*n + start)*inner + rest] to out[(o*out_n + out_start)*inner + rest].
//   One thread per element, consecutive threads on consecutive elements: reads and writes are
//   coalesced.
//
// permute: out axis i is x axis order[i]. As on the CPU, the host first coalesces the output axes
//   (neighbours that were already adjacent and in order in x merge, size-1 axes vanish), which
//   leaves a short list of sizes and source strides ("walk"). One thread per output element then
//   turns its flat output number into a multi-index over the walk's sizes (last axis fastest)
//   and sums index * stride to find its source. Writes are coalesced; reads are strided when
//   the last axis moves (a tiled shared-memory transpose would coalesce those too: a possible
//   optimisation that changes no result). A permutation that moves nothing coalesces to one
//   axis of stride 1: a plain copy.
//   Two cheaper forms of the same walk, taken whenever they apply (MOELAB_CUDA_GENERIC=1 turns
//   them off, cuda/context.h): when the last output axis is contiguous in x and a multiple of 16
//   bytes long, with every stride and both pointers 16-byte aligned, a thread moves one 16-byte
//   word (uint4: 4 floats) instead of one element; and when the tensor has fewer than 2^31
//   elements the index arithmetic is 32-bit (a 64-bit division costs dozens of instructions, a
//   32-bit one a few). The attention's head split [B, S, H, Dh] -> [B, H, S, Dh] took 76 us for
//   8.4M floats on an H100 with one element per thread and 64-bit divisions (4x the time its
//   memory traffic needs; docs/results/gpu-h100-2026-11-26).
//
// Both ops move bits, not numbers: elements are copied as 4- or 8-byte words, so every dtype
// works unchanged.
#include <cstdint>
#include <vector>

#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"

namespace moelab {
namespace {

using cuda::first_index;
using cuda::grid_stride;

template <class Word>
__global__ void copy_block_kernel(const Word* x, std::int64_t n, std::int64_t inner, std::int64_t start,
                                  std::int64_t run, std::int64_t total, Word* out, std::int64_t out_n,
                                  std::int64_t out_start) {
  for (std::int64_t e = first_index(); e < total; e += grid_stride()) {
    const std::int64_t o = e / run, rest = e - o * run;
    out[(o * out_n + out_start) * inner + rest] = x[(o * n + start) * inner + rest];
  }
}

// After coalescing, every axis has size >= 2, so a tensor whose numel fits in int64 has at most 63.
constexpr int kMaxWalk = 64;

// The coalesced output axes: sizes and each one's source stride, in Index (int64, or uint32 when
// every index fits).
template <class Index>
struct WalkOf {
  int rank = 0;
  Index sizes[kMaxWalk];
  Index strides[kMaxWalk];  // source stride of each output axis
};
using Walk = WalkOf<std::int64_t>;

// The CPU's coalescing (core/cpu/shape_ops.cpp), into a fixed-size struct a kernel can take by value.
Walk coalesce(const Shape& x_shape, const std::vector<int>& order) {
  const int rank = x_shape.rank();
  std::vector<std::int64_t> x_strides(static_cast<std::size_t>(rank));
  std::int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    x_strides[static_cast<std::size_t>(i)] = stride;
    stride *= x_shape[i];
  }
  Walk walk;
  for (int a : order) {
    const std::int64_t size = x_shape[a], src_stride = x_strides[static_cast<std::size_t>(a)];
    if (size == 1) continue;
    if (walk.rank > 0 && walk.strides[walk.rank - 1] == src_stride * size) {
      walk.sizes[walk.rank - 1] *= size;  // merge with the previous output axis
      walk.strides[walk.rank - 1] = src_stride;
    } else {
      MOELAB_CHECK(walk.rank < kMaxWalk, "permute", "too many axes for the CUDA permute: ", x_shape);
      walk.sizes[walk.rank] = size;
      walk.strides[walk.rank] = src_stride;
      ++walk.rank;
    }
  }
  if (walk.rank == 0) {  // every axis had size 1: one element
    walk.sizes[0] = 1;
    walk.strides[0] = 1;
    walk.rank = 1;
  }
  return walk;
}

template <class Word, class Index>
__global__ void permute_kernel(const Word* x, WalkOf<Index> walk, Index total, Word* out) {
  const Index stride = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index e = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    Index source = 0, rest = e;
    for (int i = walk.rank - 1; i >= 0; --i) {
      const Index size = walk.sizes[i];
      const Index q = rest / size;
      source += (rest - q * size) * walk.strides[i];
      rest = q;
    }
    out[e] = x[source];
  }
}

// The walk over Word-sized elements, with 32-bit indices when they fit (total < 2^31: then
// e + the grid's stride, at most 2^31 + 65535 * 32 * 256, stays below 2^32 too).
template <class Word>
void launch_permute(const Word* x, const Walk& walk, std::int64_t total, Word* out) {
  if (total < (std::int64_t{1} << 31) && !cuda::generic_kernels()) {
    WalkOf<std::uint32_t> narrow;
    narrow.rank = walk.rank;
    for (int i = 0; i < walk.rank; ++i) {
      narrow.sizes[i] = static_cast<std::uint32_t>(walk.sizes[i]);
      narrow.strides[i] = static_cast<std::uint32_t>(walk.strides[i]);
    }
    permute_kernel<Word, std::uint32_t><<<cuda::blocks_for(total), cuda::kThreads, 0, cuda::stream()>>>(
        x, narrow, static_cast<std::uint32_t>(total), out);
  } else {
    permute_kernel<Word, std::int64_t><<<cuda::blocks_for(total), cuda::kThreads, 0, cuda::stream()>>>(x, walk, total,
                                                                                                       out);
  }
  MOELAB_CUDA_CHECK_LAUNCH();
}

// The walk in 16-byte words of `per_word` elements, when the last output axis is contiguous in x
// (stride 1) and every size and stride of it, and both pointers, allow it; else false.
bool walk_in_words(const Walk& walk, std::int64_t per_word, const void* x, const void* out, Walk& words) {
  if (cuda::generic_kernels() || walk.strides[walk.rank - 1] != 1 || walk.sizes[walk.rank - 1] % per_word != 0 ||
      reinterpret_cast<std::uintptr_t>(x) % 16 != 0 || reinterpret_cast<std::uintptr_t>(out) % 16 != 0)
    return false;
  words = walk;
  words.sizes[walk.rank - 1] /= per_word;
  for (int i = 0; i + 1 < walk.rank; ++i) {
    if (walk.strides[i] % per_word != 0) return false;
    words.strides[i] /= per_word;
  }
  return true;
}

using cuda::with_word;  // a dtype's element as an unsigned word (cuda/device_utils.cuh)

}  // namespace

void CudaBackend::copy_block(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner,
                             std::int64_t start, std::int64_t len, Tensor& out, std::int64_t out_n,
                             std::int64_t out_start) {
  const std::int64_t run = len * inner, total = outer * run;
  if (total == 0) return;
  with_word(x.dtype(), [&]<class Word>() {
    copy_block_kernel<Word><<<cuda::blocks_for(total), cuda::kThreads, 0, cuda::stream()>>>(
        static_cast<const Word*>(x.raw()), n, inner, start, run, total, static_cast<Word*>(out.raw()), out_n,
        out_start);
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::permute(const Tensor& x, const std::vector<int>& order, Tensor& out) {
  const Walk walk = coalesce(x.shape(), order);
  const std::int64_t total = x.numel();
  if (total == 0) return;
  const auto per_word = static_cast<std::int64_t>(16 / dtype_size(x.dtype()));
  Walk words;
  if (walk_in_words(walk, per_word, x.raw(), out.raw(), words)) {
    launch_permute(static_cast<const uint4*>(x.raw()), words, total / per_word, static_cast<uint4*>(out.raw()));
    return;
  }
  with_word(x.dtype(), [&]<class Word>() {
    launch_permute(static_cast<const Word*>(x.raw()), walk, total, static_cast<Word*>(out.raw()));
  });
}

}  // namespace moelab
