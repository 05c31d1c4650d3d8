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

struct Walk {
  int rank = 0;
  std::int64_t sizes[kMaxWalk];
  std::int64_t strides[kMaxWalk];  // source stride of each output axis
};

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

template <class Word>
__global__ void permute_kernel(const Word* x, Walk walk, std::int64_t total, Word* out) {
  for (std::int64_t e = first_index(); e < total; e += grid_stride()) {
    std::int64_t source = 0, rest = e;
    for (int i = walk.rank - 1; i >= 0; --i) {
      const std::int64_t size = walk.sizes[i];
      const std::int64_t q = rest / size;
      source += (rest - q * size) * walk.strides[i];
      rest = q;
    }
    out[e] = x[source];
  }
}

// Calls body.template operator()<Word>() with the unsigned integer of the element's size.
template <class Body>
void with_word(DType dtype, Body&& body) {
  if (dtype_size(dtype) == 8) body.template operator()<std::uint64_t>();
  else body.template operator()<std::uint32_t>();
}

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
  with_word(x.dtype(), [&]<class Word>() {
    permute_kernel<Word><<<cuda::blocks_for(total), cuda::kThreads, 0, cuda::stream()>>>(
        static_cast<const Word*>(x.raw()), walk, total, static_cast<Word*>(out.raw()));
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace moelab
