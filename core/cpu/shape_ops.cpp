// core/cpu/shape_ops.cpp — block copies (concat/split/narrow) and axis permutation on the host.
//
// copy_block: x seen as [outer, n, inner], out as [outer, out_n, inner]. For every outer slice o
//   the rows [start, start+len) of x are one contiguous run of len*inner elements, and so is their
//   destination at out_start: one memcpy per slice. Bytes only, so every dtype works unchanged.
//
// permute: out axis i is x axis order[i]. out is written in its own row-major order; for each
//   output element we need the offset of its source, sum_i out_index[i] * stride_x[order[i]].
//   Two simplifications make the loop short and fast:
//   1. Coalesce: neighbouring output axes i, i+1 whose source strides satisfy
//      stride[i] == stride[i+1] * size[i+1] are one axis in disguise (they were already adjacent
//      and in order in x), so they merge; size-1 axes vanish. [B, T, H, D] -> [B, H, T, D] stays
//      4-d, but a permutation that moves nothing collapses to a single axis: a plain copy.
//   2. The last output axis becomes the inner loop, with source stride s: when s == 1 (the last
//      axis stays last) the inner loop is a contiguous copy.
//   Each output row (all axes but the last) finds its source offset by dividing its flat number
//   by the sizes, so rows are independent and run in parallel for large tensors.
#include <cstring>
#include <vector>

#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"

namespace moelab {
namespace {

// Output axes after coalescing: sizes[i] and the source stride of each.
struct Walk {
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
};

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
    if (!walk.sizes.empty() && walk.strides.back() == src_stride * size) {
      walk.sizes.back() *= size;  // merge with the previous output axis
      walk.strides.back() = src_stride;
    } else {
      walk.sizes.push_back(size);
      walk.strides.push_back(src_stride);
    }
  }
  if (walk.sizes.empty()) {  // every axis had size 1: one element
    walk.sizes.push_back(1);
    walk.strides.push_back(1);
  }
  return walk;
}

template <class T>
void permute_typed(const T* x, const Walk& walk, std::int64_t numel, T* out) {
  const int rank = static_cast<int>(walk.sizes.size());
  const std::int64_t len = walk.sizes.back(), step = walk.strides.back();
  const std::int64_t rows = numel / len;
#pragma omp parallel for schedule(static) if (numel > cpu::kParallelMinElements)
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t source = 0, rest = r;  // r's multi-index over the leading output axes
    for (int i = rank - 2; i >= 0; --i) {
      const std::int64_t size = walk.sizes[static_cast<std::size_t>(i)];
      source += (rest % size) * walk.strides[static_cast<std::size_t>(i)];
      rest /= size;
    }
    T* dst = out + r * len;
    const T* src = x + source;
    if (step == 1) {
      std::memcpy(dst, src, static_cast<std::size_t>(len) * sizeof(T));
    } else {
      for (std::int64_t j = 0; j < len; ++j) dst[j] = src[j * step];
    }
  }
}

}  // namespace

void CpuBackend::copy_block(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner,
                            std::int64_t start, std::int64_t len, Tensor& out, std::int64_t out_n,
                            std::int64_t out_start) {
  const std::size_t elem = dtype_size(x.dtype());
  const std::size_t run = static_cast<std::size_t>(len * inner) * elem;
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(out.raw());
#pragma omp parallel for schedule(static) if (outer * len * inner > cpu::kParallelMinElements && outer > 1)
  for (std::int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + static_cast<std::size_t>((o * out_n + out_start) * inner) * elem,
                src + static_cast<std::size_t>((o * n + start) * inner) * elem, run);
}

void CpuBackend::permute(const Tensor& x, const std::vector<int>& order, Tensor& out) {
  const Walk walk = coalesce(x.shape(), order);
  dispatch_all(x.dtype(), [&]<class T>() { permute_typed(x.data<T>(), walk, x.numel(), out.data<T>()); });
}

}  // namespace moelab
