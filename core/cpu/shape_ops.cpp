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
//   2. When the last output axis keeps stride 1 in x (x's last axis stays last), every output
//      row (all axes but the last) is one contiguous run of x: one memcpy per row. Chunks of rows
//      run in parallel for large tensors; each chunk finds its first row's source offset by
//      dividing the row's flat number by the sizes, then steps the multi-index like an odometer.
//   3. Otherwise the last output axis walks x with a stride s > 1, and another output axis c is
//      x's contiguous one. Row by row, each element read would sit on its own cache line (for
//      long strides, its own page). So x is copied in kTile x kTile squares of the (c, last) plane:
//      the square's kTile source lines and kTile destination lines stay in L1 while it is copied.
//      [B, m, S] -> [B, S, m] (Soft MoE's logits, m = 4) and [E, d, f] -> [d, f, E] (its expert
//      weights in token order) take this path.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu/accumulate.h"
#include "core/cpu/chunks.h"
#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"
#include "core/cpu/thread_count.h"

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

// Case 2 above: walk.strides.back() == 1.
template <class T>
void permute_rows(const T* x, const Walk& walk, std::int64_t numel, T* out) {
  const int lead = static_cast<int>(walk.sizes.size()) - 1;  // output axes before the last
  const std::int64_t len = walk.sizes.back();
  const std::int64_t rows = numel / len;
  // Chunks of about kChunk elements (at least one row).
  const std::int64_t rows_per_chunk = std::max<std::int64_t>(1, cpu::kChunk / len);
  cpu::for_chunks(rows * len, rows_per_chunk * len, [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::int64_t> index(static_cast<std::size_t>(std::max(lead, 1)), 0);
    std::int64_t source = 0, rest = begin / len;
    for (int i = lead - 1; i >= 0; --i) {
      const std::int64_t size = walk.sizes[static_cast<std::size_t>(i)];
      index[static_cast<std::size_t>(i)] = rest % size;
      source += index[static_cast<std::size_t>(i)] * walk.strides[static_cast<std::size_t>(i)];
      rest /= size;
    }
    for (std::int64_t r = begin / len; r < end / len; ++r) {
      T* dst = out + r * len;
      const T* src = x + source;
      std::memcpy(dst, src, static_cast<std::size_t>(len) * sizeof(T));
      // Next row: the last leading axis moves by one; an axis that reaches its size goes back to
      // 0 and carries into the axis before it.
      for (int i = lead - 1; i >= 0; --i) {
        const std::size_t a = static_cast<std::size_t>(i);
        source += walk.strides[a];
        if (++index[a] < walk.sizes[a]) break;
        source -= walk.strides[a] * walk.sizes[a];
        index[a] = 0;
      }
    }
  });
}

inline constexpr std::int64_t kTile = 16;

// Case 3 above: walk.strides[c] == 1 and the last axis has stride > 1. Units of work: one
// multi-index of the other axes times one kTile-wide band of axis c.
template <class T>
void permute_tiled(const T* x, const Walk& walk, int c, std::int64_t numel, T* out) {
  const int last = static_cast<int>(walk.sizes.size()) - 1;
  std::vector<std::int64_t> out_strides(walk.sizes.size());  // out is row-major over walk.sizes
  std::int64_t stride = 1;
  for (int i = last; i >= 0; --i) {
    out_strides[static_cast<std::size_t>(i)] = stride;
    stride *= walk.sizes[static_cast<std::size_t>(i)];
  }
  const std::size_t cz = static_cast<std::size_t>(c), lz = static_cast<std::size_t>(last);
  const std::int64_t size_c = walk.sizes[cz], out_c = out_strides[cz];
  const std::int64_t len = walk.sizes[lz], step = walk.strides[lz];
  const std::int64_t c_bands = (size_c + kTile - 1) / kTile;
  const std::int64_t units = numel / (size_c * len) * c_bands;
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(numel)) if (cpu::element_threads(numel) > 1 && units > 1)
  for (std::int64_t u = 0; u < units; ++u) {
    const std::int64_t c0 = u % c_bands * kTile, c_end = std::min(size_c, c0 + kTile);
    std::int64_t source = c0, target = c0 * out_c, rest = u / c_bands;
    for (int i = last - 1; i >= 0; --i) {  // the other axes' multi-index, from the unit number
      if (i == c) continue;
      const std::size_t a = static_cast<std::size_t>(i);
      const std::int64_t index = rest % walk.sizes[a];
      source += index * walk.strides[a];
      target += index * out_strides[a];
      rest /= walk.sizes[a];
    }
    for (std::int64_t l0 = 0; l0 < len; l0 += kTile) {
      const std::int64_t l_end = std::min(len, l0 + kTile);
      for (std::int64_t j = 0; j < c_end - c0; ++j) {
        T* dst = out + target + j * out_c;
        const T* src = x + source + j;
        for (std::int64_t l = l0; l < l_end; ++l) dst[l] = src[l * step];
      }
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
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(outer * len * inner)) if (cpu::element_threads(outer * len * inner) > 1 && outer > 1)
  for (std::int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + static_cast<std::size_t>((o * out_n + out_start) * inner) * elem,
                src + static_cast<std::size_t>((o * n + start) * inner) * elem, run);
}

void CpuBackend::permute(const Tensor& x, const std::vector<int>& order, Tensor& out) {
  const Walk walk = coalesce(x.shape(), order);
  // After coalescing exactly one axis has stride 1 (x's last axis of size > 1, or the lone axis).
  const int c = static_cast<int>(std::find(walk.strides.begin(), walk.strides.end(), 1) - walk.strides.begin());
  dispatch_all(x.dtype(), [&]<class T>() {
    if (c == static_cast<int>(walk.sizes.size()) - 1)
      permute_rows(x.data<T>(), walk, x.numel(), out.data<T>());
    else
      permute_tiled(x.data<T>(), walk, c, x.numel(), out.data<T>());
  });
}

}  // namespace moelab
