// core/cpu/reduce.cpp — sums and maxima along one axis on the host.
//
// The front end (core/kernels/reduce.cpp) sees any reduction as x: [outer, n, inner] reduced over
// the middle axis: out: [outer, inner]. Sum over everything is outer = inner = 1.
//
//   sum:  out[o, c] = sum_k x[o, k, c]
//   max:  values[o, c] = max_k x[o, k, c],  indices[o, c] = the first k that attains it (int32)
//
// Accuracy and determinism of sums. Every sum accumulates in double, whatever the dtype, and
// adds the terms in an order fixed by the shape alone:
//   - inner == 1 (the reduced axis is contiguous: the last axis, or sum over everything):
//     pairwise summation (core/cpu/accumulate.h), error O(eps log n). A single huge row
//     (sum over everything) evaluates the pairwise tree's big subtrees on several threads and
//     combines them in tree order: bitwise the same as one thread.
//   - inner > 1 (a strided axis): out[o, :] += x[o, k, :] for k = 0, 1, ..., n-1 in order, in a
//     double row buffer, so the inner loop runs along contiguous memory and vectorises. For
//     float32 data the double accumulator makes this exact to float32 precision; for float64 it
//     is the usual O(eps n) of a straight sum.
// Threads only ever split independent outputs (rows, or blocks of columns), or the fixed pairwise
// tree above, so no result depends on the thread count.
//
// max: NaN counts as larger than everything (the first NaN wins), as in PyTorch, so a NaN in the
// input shows in the output instead of vanishing.
#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "core/cpu/accumulate.h"
#include "core/cpu/thread_count.h"
#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"

namespace moelab {
namespace {

// Columns of the strided case are processed in blocks of this many, one block per task.
constexpr std::int64_t kColumnBlock = 1024;

// Whether candidate v replaces the running maximum `best` (strictly greater, so the first of equal
// values stays; a NaN beats any number, and the first NaN stays).
template <class T>
inline bool beats(T v, T best) {
  return v > best || (v != v && best == best);
}

}  // namespace

void CpuBackend::sum(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& out) {
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const int threads = cpu::element_threads(outer * n * inner);
    const bool parallel = threads > 1;
    if (inner == 1) {
      if (outer == 1) {  // one row: parallelise inside the pairwise tree
        po[0] = static_cast<T>(cpu::pairwise_sum_parallel(n, [&](std::int64_t i) { return double(px[i]); }));
        return;
      }
#pragma omp parallel for schedule(static) num_threads(threads) if (parallel)
      for (std::int64_t o = 0; o < outer; ++o) {
        const T* row = px + o * n;
        po[o] = static_cast<T>(cpu::pairwise_sum(0, n, [&](std::int64_t i) { return double(row[i]); }));
      }
      return;
    }
    // Strided: x[o, k, c] at px[(o * n + k) * inner + c].
    const std::int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) num_threads(threads) if (parallel)
    for (std::int64_t task = 0; task < outer * blocks; ++task) {
      const std::int64_t o = task / blocks;
      const std::int64_t c0 = (task % blocks) * kColumnBlock;
      const std::int64_t width = std::min(kColumnBlock, inner - c0);
      std::vector<double> acc(static_cast<std::size_t>(width), 0.0);
      double* a = acc.data();
      for (std::int64_t k = 0; k < n; ++k) {
        const T* row = px + (o * n + k) * inner + c0;
        for (std::int64_t c = 0; c < width; ++c) a[c] += double(row[c]);
      }
      T* dst = po + o * inner + c0;
      for (std::int64_t c = 0; c < width; ++c) dst[c] = static_cast<T>(a[c]);
    }
  });
}

void CpuBackend::max(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& values,
                     Tensor* indices) {
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* pv = values.data<T>();
    std::int32_t* pi = indices ? indices->data<std::int32_t>() : nullptr;
    const int threads = cpu::element_threads(outer * n * inner);
    const bool parallel = threads > 1;
    if (inner == 1) {
      // Two passes, both fast: the maximum by Eigen's vectorised maxCoeff (NaN-propagating),
      // then the first position holding it. Same answer as the single scan used below.
#pragma omp parallel for schedule(static) num_threads(threads) if (parallel && outer > 1)
      for (std::int64_t o = 0; o < outer; ++o) {
        const T* row = px + o * n;
        Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> values_row(row, n);
        const T m = values_row.template maxCoeff<Eigen::PropagateNaN>();
        std::int64_t arg = 0;
        if (m != m)
          while (row[arg] == row[arg]) ++arg;  // the first NaN
        else
          while (row[arg] != m) ++arg;
        pv[o] = row[arg];  // row[arg], not m: keeps the sign of a zero maximum
        if (pi) pi[o] = static_cast<std::int32_t>(arg);
      }
      return;
    }
    const std::int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) num_threads(threads) if (parallel)
    for (std::int64_t task = 0; task < outer * blocks; ++task) {
      const std::int64_t o = task / blocks;
      const std::int64_t c0 = (task % blocks) * kColumnBlock;
      const std::int64_t width = std::min(kColumnBlock, inner - c0);
      T* best = pv + o * inner + c0;
      std::vector<std::int32_t> arg(static_cast<std::size_t>(width), 0);
      std::copy_n(px + o * n * inner + c0, width, best);
      for (std::int64_t k = 1; k < n; ++k) {
        const T* row = px + (o * n + k) * inner + c0;
        for (std::int64_t c = 0; c < width; ++c)
          if (beats(row[c], best[c])) {
            best[c] = row[c];
            arg[static_cast<std::size_t>(c)] = static_cast<std::int32_t>(k);
          }
      }
      if (pi) std::copy(arg.begin(), arg.end(), pi + o * inner + c0);
    }
  });
}

}  // namespace moelab
