// cuda/index.cu — gathers and scatter-adds by int32 indices on the GPU (mirrors core/cpu/index.cpp).
//
//   index_select      src: [N, inner], index: [M]      -> out: [M, inner]  out[m] = src[index[m]]
//   scatter_add_rows  src: [M, inner], index: [M]      -> out: [R, inner]  out[index[m]] += src[m]
//   scatter_add_rows_scaled  the same with scale: [M]  -> out: [R, inner]  out[index[m]] += scale[m] * src[m]
//     (and its backward: dsrc[m] = scale[m] * dy[index[m]], dscale[m] = src[m] . dy[index[m]])
//   gather_last       src: [rows, K], index: [rows, J] -> out: [rows, J]   out[r, j] = src[r, index[r, j]]
//   scatter_add_last  src: [rows, J], index: [rows, J] -> out: [rows, K]   out[r, index[r, j]] += src[r, j]
// (embedding and embedding_backward are index_select and scatter_add_rows, called from
// core/kernels/index.cpp.) The front end does not range-check indices (that would copy them to
// the host): every kernel here tests each index it reads, skips a bad one (a gather writes 0, a
// scatter adds nothing) and records it in the device error flag (cuda/device_errors.cuh), raised
// as moelab::Error at the next synchronisation. scatter_add_rows checks in a small extra kernel;
// its grouping never reads outside for a bad index (a key outside [0, R) falls in no group).
//
// Gathers: one thread per output element, consecutive threads on consecutive elements, so the
// writes are coalesced and each gathered row is read contiguously. They move bits, not numbers:
// an element is copied as a 4- or 8-byte word, so every dtype (int32 included) works unchanged.
//
// Scatter-adds must be deterministic and agree with the CPU, which adds the sources of every
// destination in ascending source order, starting from 0. Float atomics would add in whatever
// order the threads arrive (a different rounding every run), so there are none here. Instead:
//   scatter_add_rows  1. order = stable argsort of index (cuda/sort.cu): the source rows grouped
//                        by destination, ascending m inside each group (CSR "sources" list);
//                     2. offsets[r] = the first slot of group r, by binary search in the sorted
//                        keys (offsets[R] = M);
//                     3. one thread per output element (r, c) adds src[order[s], c] for
//                        s = offsets[r] .. offsets[r+1]-1, in that order, into a register
//                        that starts at 0, and stores it once.
//                     Every output element sees exactly the CPU's sequence of additions, so the
//                     result is bitwise the CPU's, and bitwise the same run after run. The scaled
//                     form rounds each product scale[m] * src[m, c] on its own (rounded_math.cuh),
//                     as the CPU does, so it is bitwise the CPU's too.
//   its backward      dsrc: one thread per element, one rounded product each (bitwise the CPU's);
//                     dscale: one thread per row, a double sum of the rounded products in
//                     ascending c (the CPU sums the same products along its pairwise tree, so the
//                     two agree to double rounding before the result is rounded to T).
//   scatter_add_last  rows are independent. For short index rows (J <= kShortRow, the top-k
//                     backward's J = k) one thread per output element (r, k) scans the J
//                     indices of its row in ascending j and adds the matching sources; for long
//                     index rows one thread per row zeroes its output row and adds in ascending j,
//                     as the CPU does (slow for few long rows, but exact and ordered).
#include <cstdint>
#include <limits>

#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_errors.cuh"
#include "cuda/device_utils.cuh"
#include "cuda/rounded_math.cuh"

namespace moelab {
namespace {

using cuda::DeviceError;
using cuda::first_index;
using cuda::grid_stride;
using cuda::index_ok;

// Records the first index[i] outside [0, limit) (scatter_add_rows: its other kernels skip them).
__global__ void check_range_kernel(const std::int32_t* index, std::int64_t n, std::int64_t limit, int op,
                                   DeviceError* error) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) index_ok(error, op, i, index[i], limit);
}

// out[m, c] = src[index[m], c], element by element as raw words.
template <class Word>
__global__ void index_select_kernel(const Word* src, const std::int32_t* index, std::int64_t total,
                                    std::int64_t inner, std::int64_t src_rows, DeviceError* error, Word* out) {
  for (std::int64_t i = first_index(); i < total; i += grid_stride()) {
    const std::int64_t m = i / inner, c = i - m * inner;
    const std::int32_t row = index[m];
    out[i] = index_ok(error, cuda::kIndexSelect, m, row, src_rows) ? src[static_cast<std::int64_t>(row) * inner + c]
                                                                    : Word(0);
  }
}

// offsets[r] = the first s in [0, M) with index[order[s]] >= r, for r = 0..rows (so offsets[rows] = M).
// order sorts index stably, hence the keys index[order[s]] are non-decreasing in s.
__global__ void group_offsets_kernel(const std::int32_t* index, const std::int32_t* order, std::int64_t m_count,
                                     std::int64_t rows, std::int32_t* offsets) {
  for (std::int64_t r = first_index(); r <= rows; r += grid_stride()) {
    std::int64_t lo = 0, hi = m_count;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (static_cast<std::int64_t>(index[order[mid]]) < r) lo = mid + 1;
      else hi = mid;
    }
    offsets[r] = static_cast<std::int32_t>(lo);
  }
}

// out[r, c] = sum of src[order[s], c] (times scale[order[s]], rounded, when scale is set) over
// s = offsets[r] .. offsets[r+1]-1, added in that order.
template <class T>
__global__ void scatter_rows_kernel(const T* src, const T* scale, const std::int32_t* order,
                                    const std::int32_t* offsets, std::int64_t total, std::int64_t inner, T* out) {
  using namespace cuda::rounded;
  for (std::int64_t i = first_index(); i < total; i += grid_stride()) {
    const std::int64_t r = i / inner, c = i - r * inner;
    T acc = T(0);
    for (std::int32_t s = offsets[r]; s < offsets[r + 1]; ++s) {
      const std::int64_t m = order[s];
      acc = add(acc, scale ? mul(scale[m], src[m * inner + c]) : src[m * inner + c]);
    }
    out[i] = acc;
  }
}

// dsrc[m, c] = dy[index[m], c] * scale[m]; a bad index gives 0 and is reported (column-0 thread).
template <class T>
__global__ void scaled_rows_src_grad_kernel(const T* dy, const T* scale, const std::int32_t* index,
                                            std::int64_t total, std::int64_t inner, std::int64_t dy_rows,
                                            DeviceError* error, T* dsrc) {
  for (std::int64_t i = first_index(); i < total; i += grid_stride()) {
    const std::int64_t m = i / inner, c = i - m * inner;
    const std::int32_t row = index[m];
    const bool ok = c == 0 ? index_ok(error, cuda::kScatterAddRowsScaledBackward, m, row, dy_rows)
                           : row >= 0 && row < dy_rows;
    dsrc[i] = ok ? cuda::rounded::mul(dy[static_cast<std::int64_t>(row) * inner + c], scale[m]) : T(0);
  }
}

// dscale[m] = sum_c src[m, c] * dy[index[m], c]: rounded products, summed in double in ascending c.
template <class T>
__global__ void scaled_rows_scale_grad_kernel(const T* dy, const T* src, const std::int32_t* index,
                                              std::int64_t m_count, std::int64_t inner, std::int64_t dy_rows,
                                              T* dscale) {
  for (std::int64_t m = first_index(); m < m_count; m += grid_stride()) {
    const std::int32_t row = index[m];
    double acc = 0;
    if (row >= 0 && row < dy_rows)  // a bad index is reported by the other kernel
      for (std::int64_t c = 0; c < inner; ++c)
        acc += double(cuda::rounded::mul(dy[static_cast<std::int64_t>(row) * inner + c], src[m * inner + c]));
    dscale[m] = static_cast<T>(acc);
  }
}

// out[r, j] = src[r, index[r, j]] as raw words; src: [rows, k], index and out: [rows, j_count].
template <class Word>
__global__ void gather_last_kernel(const Word* src, const std::int32_t* index, std::int64_t total, std::int64_t k,
                                   std::int64_t j_count, DeviceError* error, Word* out) {
  for (std::int64_t i = first_index(); i < total; i += grid_stride()) {
    const std::int64_t r = i / j_count;
    out[i] = index_ok(error, cuda::kGatherLast, i, index[i], k) ? src[r * k + index[i]] : Word(0);
  }
}

// Short index rows: one thread per output element out[r, col], scanning the row's J indices.
// A bad index matches no column, so it adds nothing; the column-0 thread of each row reports it.
template <class T>
__global__ void scatter_last_by_element_kernel(const T* src, const std::int32_t* index, std::int64_t total,
                                               std::int64_t k, std::int64_t j_count, DeviceError* error, T* out) {
  for (std::int64_t i = first_index(); i < total; i += grid_stride()) {
    const std::int64_t r = i / k, col = i - r * k;
    const std::int32_t* idx = index + r * j_count;
    const T* s = src + r * j_count;
    T acc = T(0);
    for (std::int64_t j = 0; j < j_count; ++j) {
      if (col == 0) index_ok(error, cuda::kScatterAddLast, r * j_count + j, idx[j], k);
      if (idx[j] == col) acc += s[j];
    }
    out[i] = acc;
  }
}

// Long index rows: one thread per row, the CPU's loop.
template <class T>
__global__ void scatter_last_by_row_kernel(const T* src, const std::int32_t* index, std::int64_t rows, std::int64_t k,
                                           std::int64_t j_count, DeviceError* error, T* out) {
  for (std::int64_t r = first_index(); r < rows; r += grid_stride()) {
    T* dst = out + r * k;
    for (std::int64_t c = 0; c < k; ++c) dst[c] = T(0);
    for (std::int64_t j = 0; j < j_count; ++j) {
      const std::int64_t at = r * j_count + j;
      if (index_ok(error, cuda::kScatterAddLast, at, index[at], k)) dst[index[at]] += src[at];
    }
  }
}

// Index rows up to this long use one thread per output element in scatter_add_last.
constexpr std::int64_t kShortRow = 64;

using cuda::with_word;  // a dtype's element as an unsigned word (cuda/device_utils.cuh)

}  // namespace

void CudaBackend::index_select(const Tensor& src, const Tensor& index, Tensor& out) {
  const std::int64_t total = out.numel(), inner = src.shape().inner(0);
  const std::int32_t* idx = index.data<std::int32_t>();
  with_word(src.dtype(), [&]<class Word>() {
    index_select_kernel<Word><<<cuda::blocks_for(total), cuda::kThreads, 0, cuda::stream()>>>(
        static_cast<const Word*>(src.raw()), idx, total, inner, src.size(0), cuda::device_error(),
        static_cast<Word*>(out.raw()));
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

namespace {

// scale: null for scatter_add_rows, [M] for scatter_add_rows_scaled.
template <class T>
void scatter_add_rows_typed(CudaBackend& backend, const Tensor& src, const T* scale, const Tensor& index,
                            Tensor& out) {
  const std::int64_t m_count = src.size(0), rows = out.size(0), inner = src.shape().inner(0);
  const char* op = scale ? "scatter_add_rows_scaled" : "scatter_add_rows";
  MOELAB_CHECK(m_count <= std::numeric_limits<std::int32_t>::max(), op,
               "the CUDA backend handles at most 2^31 - 1 source rows, got ", m_count);
  check_range_kernel<<<cuda::blocks_for(m_count), cuda::kThreads, 0, cuda::stream()>>>(
      index.data<std::int32_t>(), m_count, rows, scale ? cuda::kScatterAddRowsScaled : cuda::kScatterAddRows,
      cuda::device_error());
  MOELAB_CUDA_CHECK_LAUNCH();
  Tensor order = Tensor::empty({m_count}, DType::Int32, src.device());
  backend.argsort(index, order);  // index is [M]: one row of M keys
  Tensor offsets = Tensor::empty({rows + 1}, DType::Int32, src.device());
  const std::int32_t* idx = index.data<std::int32_t>();
  const std::int32_t* ord = order.data<std::int32_t>();
  std::int32_t* off = offsets.data<std::int32_t>();
  group_offsets_kernel<<<cuda::blocks_for(rows + 1), cuda::kThreads, 0, cuda::stream()>>>(idx, ord, m_count, rows,
                                                                                             off);
  MOELAB_CUDA_CHECK_LAUNCH();
  const std::int64_t total = out.numel();
  scatter_rows_kernel<T><<<cuda::blocks_for(total), cuda::kThreads, 0, cuda::stream()>>>(
      src.data<T>(), scale, ord, off, total, inner, out.data<T>());
  MOELAB_CUDA_CHECK_LAUNCH();
  // order and offsets are freed when this returns, while the kernels may still be queued: the
  // caching allocator hands memory out again only to work enqueued later on the same stream.
}

template <class T>
void scatter_add_last_typed(const Tensor& src, const Tensor& index, Tensor& out) {
  const std::int64_t k = out.size(-1), j_count = src.size(-1);
  const std::int64_t rows = src.numel() / j_count;
  if (j_count <= kShortRow) {
    const std::int64_t total = out.numel();
    scatter_last_by_element_kernel<T><<<cuda::blocks_for(total), cuda::kThreads, 0, cuda::stream()>>>(
        src.data<T>(), index.data<std::int32_t>(), total, k, j_count, cuda::device_error(), out.data<T>());
  } else {
    scatter_last_by_row_kernel<T><<<cuda::blocks_for(rows), cuda::kThreads, 0, cuda::stream()>>>(
        src.data<T>(), index.data<std::int32_t>(), rows, k, j_count, cuda::device_error(), out.data<T>());
  }
  MOELAB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void CudaBackend::scatter_add_rows(const Tensor& src, const Tensor& index, Tensor& out) {
  if (src.dtype() == DType::Float64) scatter_add_rows_typed<double>(*this, src, nullptr, index, out);
  else scatter_add_rows_typed<float>(*this, src, nullptr, index, out);
}

void CudaBackend::scatter_add_rows_scaled(const Tensor& src, const Tensor& scale, const Tensor& index, Tensor& out) {
  if (src.dtype() == DType::Float64) scatter_add_rows_typed<double>(*this, src, scale.data<double>(), index, out);
  else scatter_add_rows_typed<float>(*this, src, scale.data<float>(), index, out);
}

void CudaBackend::scatter_add_rows_scaled_backward(const Tensor& dy, const Tensor& src, const Tensor& scale,
                                                   const Tensor& index, Tensor& dsrc, Tensor& dscale) {
  const std::int64_t m_count = src.size(0), inner = src.shape().inner(0), total = src.numel(), dy_rows = dy.size(0);
  const std::int32_t* idx = index.data<std::int32_t>();
  auto run = [&]<class T>() {
    scaled_rows_src_grad_kernel<T><<<cuda::blocks_for(total), cuda::kThreads, 0, cuda::stream()>>>(
        dy.data<T>(), scale.data<T>(), idx, total, inner, dy_rows, cuda::device_error(), dsrc.data<T>());
    MOELAB_CUDA_CHECK_LAUNCH();
    scaled_rows_scale_grad_kernel<T><<<cuda::blocks_for(m_count), cuda::kThreads, 0, cuda::stream()>>>(
        dy.data<T>(), src.data<T>(), idx, m_count, inner, dy_rows, dscale.data<T>());
    MOELAB_CUDA_CHECK_LAUNCH();
  };
  if (src.dtype() == DType::Float64) run.template operator()<double>();
  else run.template operator()<float>();
}

void CudaBackend::gather_last(const Tensor& src, const Tensor& index, Tensor& out) {
  const std::int64_t k = src.size(-1), j_count = index.size(-1), total = out.numel();
  const std::int32_t* idx = index.data<std::int32_t>();
  with_word(src.dtype(), [&]<class Word>() {
    gather_last_kernel<Word><<<cuda::blocks_for(total), cuda::kThreads, 0, cuda::stream()>>>(
        static_cast<const Word*>(src.raw()), idx, total, k, j_count, cuda::device_error(),
        static_cast<Word*>(out.raw()));
    MOELAB_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::scatter_add_last(const Tensor& src, const Tensor& index, Tensor& out) {
  if (src.dtype() == DType::Float64) scatter_add_last_typed<double>(src, index, out);
  else scatter_add_last_typed<float>(src, index, out);
}

}  // namespace moelab
