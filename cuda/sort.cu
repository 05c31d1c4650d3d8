// cuda/sort.cu — top-k selection and stable argsort over the last axis on the GPU (mirrors
// core/cpu/sort.cpp).
//
//   topk     x: [rows, n] -> values: [rows, k] (largest first), indices: [rows, k] int32
//   argsort  keys: [rows, n] int32 -> [rows, n] int32, stable ascending
//
// Both answers are unique, because both orders are *total* orders on the positions 0..n-1 of a
// row (core/kernels/sort.cpp):
//   topk     a before b  when x[a] > x[b], or they are equal and a < b; NaN is above every number
//            and NaNs are equal to each other (so +0.0 == -0.0 and NaNs fall back to the index);
//   argsort  a before b  when keys[a] < keys[b], or they are equal and a < b (that is stability).
// No two positions are ever "equal", so any correct sorting or selection algorithm returns
// exactly the CPU's answer: the GPU is free to pick algorithms that suit it, and the results are
// bitwise the CPU's and bitwise the same on every run.
//
// topk, k <= kWarpK (routers: k = 1, 2, 8): one warp per row. Lane l scans positions l, l+32,
//   l+64, ... keeping its own best k in a small sorted buffer (insertion sort). The row's top k is
//   among the union of those 32 buffers, so k rounds of a warp-wide "best of the 32 heads"
//   (butterfly shuffles, the same answer on every lane) pop them in order: the lane whose head
//   won advances. O(n k / 32) per lane plus k * 5 shuffles.
// topk, larger k, and argsort: a full sort of the positions of every row under the order above
//   (sort_positions), then topk keeps the first k. The sort is a merge sort:
//     1. tiles of kTile = 1024 positions are sorted in shared memory by one block each (a bitonic
//        network: 55 compare-exchange steps; padding slots are marked -1 and sort last);
//     2. log2(n / kTile) merge passes double the sorted runs. In each pass every element finds
//        its place in the merged run directly: its rank in its own run plus, by binary search,
//        the number of elements of the partner run that come before it. Total order => no ties
//        => the places form a permutation. One thread per element, O(log n) each, ping-ponging
//        between the output and a scratch buffer.
//   O(n log^2 n) work per row, fully parallel over rows and elements, no atomics. For sorting
//   T*k expert ids (n in the thousands to a few hundred thousand) that is a handful of launches.
//   (A counting sort by key, as the CPU uses for small key ranges, would do less work; it gives
//   the same answer and can be added here later without changing anything else.)
#include <cstdint>
#include <limits>
#include <utility>

#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"

namespace moelab {
namespace {

constexpr int kWarpK = 16;          // largest k served by the one-warp-per-row selection
constexpr int kTile = 1024;         // positions sorted in shared memory per block
constexpr int kSortThreads = 512;   // one compare-exchange pair per thread
constexpr std::int32_t kNoPosition = 0x7fffffff;  // a lane with no candidate left

using cuda::first_index;
using cuda::grid_stride;

// a > b with NaN above every number and NaNs equal to each other.
template <class T>
__device__ inline bool greater_nan(T a, T b) {
  if (isnan(a)) return !isnan(b);
  if (isnan(b)) return false;
  return a > b;
}

// The top-k order on (value, position) pairs.
template <class T>
__device__ inline bool value_before(T va, std::int32_t ia, T vb, std::int32_t ib) {
  if (greater_nan(va, vb)) return true;
  if (greater_nan(vb, va)) return false;
  return ia < ib;
}

// Orders on positions of one row, used by the merge sort: before(row, a, b).
template <class T>
struct TopkOrder {
  const T* x;
  std::int64_t n;
  __device__ bool operator()(std::int64_t row, std::int32_t a, std::int32_t b) const {
    return value_before(x[row * n + a], a, x[row * n + b], b);
  }
};

struct KeyOrder {
  const std::int32_t* keys;
  std::int64_t n;
  __device__ bool operator()(std::int64_t row, std::int32_t a, std::int32_t b) const {
    const std::int32_t ka = keys[row * n + a], kb = keys[row * n + b];
    return ka < kb || (ka == kb && a < b);
  }
};

// ---------------------------------------------------------------- top-k, one warp per row

template <class T>
__global__ void topk_warp_kernel(const T* x, std::int64_t rows, std::int64_t n, int k, T* values,
                                 std::int32_t* indices) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const std::int64_t warps = grid_stride() / 32;
  // The row loop depends only on the warp number, so all 32 lanes run it together (the
  // shuffles below need every lane).
  for (std::int64_t row = first_index() / 32; row < rows; row += warps) {
    const T* xr = x + row * n;
    T val[kWarpK];
    std::int32_t idx[kWarpK];
    int count = 0;
    // 1. This lane's best k of positions lane, lane + 32, ..., sorted best first.
    for (std::int64_t i = lane; i < n; i += 32) {
      const T v = xr[i];
      const std::int32_t id = static_cast<std::int32_t>(i);
      if (count == k) {
        if (!value_before(v, id, val[k - 1], idx[k - 1])) continue;
        --count;  // the last one drops out
      }
      int j = count;
      while (j > 0 && value_before(v, id, val[j - 1], idx[j - 1])) {
        val[j] = val[j - 1];
        idx[j] = idx[j - 1];
        --j;
      }
      val[j] = v;
      idx[j] = id;
      ++count;
    }
    // 2. k rounds: the best head over the warp is the next output; its lane pops it.
    int head = 0;
    for (int out = 0; out < k; ++out) {
      int has = head < count ? 1 : 0;
      T bv = has ? val[head] : T(0);
      std::int32_t bi = has ? idx[head] : kNoPosition;
      for (int offset = 16; offset > 0; offset /= 2) {
        const T ov = __shfl_xor_sync(cuda::kFullWarpMask, bv, offset);
        const std::int32_t oi = __shfl_xor_sync(cuda::kFullWarpMask, bi, offset);
        const int ohas = __shfl_xor_sync(cuda::kFullWarpMask, has, offset);
        if (ohas && (!has || value_before(ov, oi, bv, bi))) {
          bv = ov;
          bi = oi;
          has = 1;
        }
      }
      // Positions are unique, so exactly the owning lane matches (and at least k candidates exist
      // over the warp because k <= n).
      if (head < count && idx[head] == bi) ++head;
      if (lane == 0) {
        values[row * k + out] = bv;
        indices[row * k + out] = bi;
      }
    }
  }
}

// ---------------------------------------------------------------- merge sort of positions

// One block sorts tile `blockIdx.x % tiles_per_row` of row `blockIdx.x / tiles_per_row`.
template <class Order>
__global__ void sort_tiles_kernel(Order before, std::int64_t n, std::int64_t tiles_per_row, std::int32_t* out) {
  __shared__ std::int32_t pos[kTile];
  const std::int64_t row = blockIdx.x / tiles_per_row, tile = blockIdx.x % tiles_per_row;
  const std::int64_t begin = tile * kTile;
  const int len = static_cast<int>(n - begin < kTile ? n - begin : kTile);
  for (int i = threadIdx.x; i < kTile; i += blockDim.x) pos[i] = i < len ? static_cast<std::int32_t>(begin + i) : -1;
  __syncthreads();
  // Bitonic network over kTile slots; -1 (padding) comes after every real position.
  auto less = [&](std::int32_t a, std::int32_t b) {
    if (a < 0) return false;
    if (b < 0) return true;
    return before(row, a, b);
  };
  for (int size = 2; size <= kTile; size *= 2) {
    for (int stride = size / 2; stride > 0; stride /= 2) {
      for (int p = threadIdx.x; p < kTile / 2; p += blockDim.x) {
        const int lo = 2 * stride * (p / stride) + p % stride, hi = lo + stride;  // lo has bit `stride` clear
        const bool ascending = (lo & size) == 0;
        const std::int32_t a = pos[lo], b = pos[hi];
        if (ascending ? less(b, a) : less(a, b)) {
          pos[lo] = b;
          pos[hi] = a;
        }
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < len; i += blockDim.x) out[row * n + begin + i] = pos[i];
}

// Merges neighbouring sorted runs of `width` positions (per row) from `in` into runs of 2*width in `out`.
template <class Order>
__global__ void merge_pass_kernel(Order before, std::int64_t rows, std::int64_t n, std::int64_t width,
                                  const std::int32_t* in, std::int32_t* out) {
  const std::int64_t total = rows * n;
  for (std::int64_t i = first_index(); i < total; i += grid_stride()) {
    const std::int64_t row = i / n, p = i - row * n;
    const std::int64_t start = p / (2 * width) * (2 * width);
    const std::int64_t mid = start + width < n ? start + width : n;
    const std::int64_t end = start + 2 * width < n ? start + 2 * width : n;
    const std::int32_t* r = in + row * n;
    const std::int32_t v = r[p];
    // Search the partner run for how many of its elements come before v.
    std::int64_t lo = p < mid ? mid : start, hi = p < mid ? end : mid;
    const std::int64_t partner = lo;
    while (lo < hi) {
      const std::int64_t m = lo + (hi - lo) / 2;
      if (before(row, r[m], v)) lo = m + 1;
      else hi = m;
    }
    const std::int64_t own_rank = p < mid ? p - start : p - mid;
    out[row * n + start + own_rank + (lo - partner)] = v;
  }
}

// Sorts the positions 0..n-1 of every row under `before` into out: [rows, n]. scratch: [rows, n]
// (only used when n > kTile).
template <class Order>
void sort_positions(Order before, std::int64_t rows, std::int64_t n, std::int32_t* out, std::int32_t* scratch) {
  const std::int64_t tiles_per_row = (n + kTile - 1) / kTile;
  MOELAB_CHECK(rows * tiles_per_row <= std::numeric_limits<std::int32_t>::max(), "sort",
               "too many rows for the CUDA sort: ", rows, " rows of ", n);
  sort_tiles_kernel<Order><<<static_cast<unsigned>(rows * tiles_per_row), kSortThreads, 0, cuda::stream()>>>(
      before, n, tiles_per_row, out);
  MOELAB_CUDA_CHECK_LAUNCH();
  std::int32_t* src = out;
  std::int32_t* dst = scratch;
  for (std::int64_t width = kTile; width < n; width *= 2) {
    merge_pass_kernel<Order><<<cuda::blocks_for(rows * n), cuda::kThreads, 0, cuda::stream()>>>(before, rows, n, width,
                                                                                                  src, dst);
    MOELAB_CUDA_CHECK_LAUNCH();
    std::swap(src, dst);
  }
  if (src != out)
    MOELAB_CUDA_CHECK(cudaMemcpyAsync(out, src, static_cast<std::size_t>(rows * n) * sizeof(std::int32_t),
                                      cudaMemcpyDeviceToDevice, cuda::stream()));
}

// values[r, j] = x[r, order[r, j]], indices[r, j] = order[r, j] for j < k.
template <class T>
__global__ void take_first_kernel(const T* x, const std::int32_t* order, std::int64_t rows, std::int64_t n, int k,
                                  T* values, std::int32_t* indices) {
  const std::int64_t total = rows * k;
  for (std::int64_t i = first_index(); i < total; i += grid_stride()) {
    const std::int64_t r = i / k, j = i - r * k;
    const std::int32_t p = order[r * n + j];
    values[i] = x[r * n + p];
    indices[i] = p;
  }
}

template <class T>
void topk_typed(const Tensor& x, int k, Tensor& values, Tensor& indices) {
  const std::int64_t n = x.size(-1), rows = x.numel() / n;
  if (k <= kWarpK) {
    topk_warp_kernel<T><<<cuda::blocks_for(rows * 32), cuda::kThreads, 0, cuda::stream()>>>(
        x.data<T>(), rows, n, k, values.data<T>(), indices.data<std::int32_t>());
    MOELAB_CUDA_CHECK_LAUNCH();
    return;
  }
  Tensor order = Tensor::empty({rows, n}, DType::Int32, x.device());
  Tensor scratch;
  if (n > kTile) scratch = Tensor::empty({rows, n}, DType::Int32, x.device());
  sort_positions(TopkOrder<T>{x.data<T>(), n}, rows, n, order.data<std::int32_t>(),
                 n > kTile ? scratch.data<std::int32_t>() : nullptr);
  take_first_kernel<T><<<cuda::blocks_for(rows * k), cuda::kThreads, 0, cuda::stream()>>>(
      x.data<T>(), order.data<std::int32_t>(), rows, n, k, values.data<T>(), indices.data<std::int32_t>());
  MOELAB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void CudaBackend::topk(const Tensor& x, int k, Tensor& values, Tensor& indices) {
  if (x.dtype() == DType::Float64) topk_typed<double>(x, k, values, indices);
  else topk_typed<float>(x, k, values, indices);
}

void CudaBackend::argsort(const Tensor& keys, Tensor& out) {
  const std::int64_t n = keys.size(-1), rows = keys.numel() / n;
  Tensor scratch;
  if (n > kTile) scratch = Tensor::empty({rows, n}, DType::Int32, keys.device());
  sort_positions(KeyOrder{keys.data<std::int32_t>(), n}, rows, n, out.data<std::int32_t>(),
                 n > kTile ? scratch.data<std::int32_t>() : nullptr);
}

}  // namespace moelab
