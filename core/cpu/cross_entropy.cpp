// core/cpu/cross_entropy.cpp — fused softmax + negative log-likelihood on the host.
//
// logits: [N, V], targets: [N] int32 -> loss: [], logsumexp: [N]
//   lse[i]  = m + log(sum_j exp(logits[i, j] - m)),   m = max_j logits[i, j]
//   loss    = (1 / kept) * sum over kept rows i of (lse[i] - logits[i, targets[i]])
// A row is kept unless targets[i] == ignore_index; with no kept row the loss is 0. Fusing the
// two steps never forms probabilities, so nothing underflows to log(0), and subtracting the row
// maximum keeps exp from overflowing (logits of 1000 are fine). lse is computed for every row,
// ignored or not, and saved for the backward.
//
// kept is written as a float64 [] tensor (exact up to 2^53 rows) for the backward, which forms
// scale = double(dloss) / kept itself (0 when no row is kept), so no value goes to the caller:
// the same double division the front end used to do, hence bitwise the same gradient.
// Both passes check the targets first (they are host memory here, no copy): a target outside
// [0, V) that is not ignore_index throws moelab::Error before anything is read.
// Backward:
//   dlogits[i, j] = (softmax(logits[i])[j] - [j == targets[i]]) * scale,   0 for ignored rows
// where softmax(logits[i])[j] = exp(logits[i, j] - lse[i]).
//
// Sums (of the exponentials within a row, of the per-row losses over rows) are pairwise sums in
// double (core/cpu/accumulate.h), in a fixed order. Rows are computed in parallel for large
// inputs, each thread with its own scratch row; the loss is then summed over rows on one thread,
// so results never depend on the thread count.
#include <Eigen/Core>
#include <cmath>
#include <vector>

#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/exact_math.h"
#include "core/dtype_dispatch.h"
#include "core/cpu/thread_count.h"

namespace moelab {
namespace {

// Counts the kept rows, throwing (as `op`) for a target outside [0, vocab) that is not ignored.
std::int64_t count_kept(const Tensor& logits, const Tensor& targets, int ignore_index, const char* op) {
  const std::int64_t rows = logits.size(0), vocab = logits.size(1);
  const std::int32_t* t = targets.data<std::int32_t>();
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    if (t[i] == ignore_index) continue;
    MOELAB_CHECK(t[i] >= 0 && t[i] < vocab, op, "targets[", i, "] = ", t[i], " is outside [0, ", vocab,
                 ") for logits ", logits.shape(), " and is not ignore_index (", ignore_index, ")");
    ++kept;
  }
  return kept;
}

template <class T>
using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

}  // namespace

void CpuBackend::cross_entropy(const Tensor& logits, const Tensor& targets, int ignore_index, Tensor& loss,
                               Tensor& logsumexp, Tensor& kept_out) {
  const std::int64_t rows = logits.size(0), vocab = logits.size(1);
  const std::int32_t* target = targets.data<std::int32_t>();
  const std::int64_t kept = count_kept(logits, targets, ignore_index, "cross_entropy");
  kept_out.data<double>()[0] = static_cast<double>(kept);
  std::vector<double> row_loss(static_cast<std::size_t>(rows), 0.0);
  dispatch_float(logits.dtype(), [&]<class T>() {
    const T* px = logits.data<T>();
    T* plse = logsumexp.data<T>();
#pragma omp parallel num_threads(cpu::element_threads(rows * vocab)) if (cpu::element_threads(rows * vocab) > 1 && rows > 1)
    {
      // Eigen-allocated, so 64-byte aligned: Eigen computes exp() with scalar code on the
      // elements before the first aligned address and with vector code after, and the two round
      // differently. A malloc'd scratch row starts at a heap-dependent offset, which made losses
      // differ in the last bit from run to run.
      Eigen::Array<T, Eigen::Dynamic, 1> scratch(vocab);
#pragma omp for schedule(static)
      for (std::int64_t r = 0; r < rows; ++r) {
        ConstRow<T> xr(px + r * vocab, vocab);
        Row<T> e(scratch.data(), vocab);
        const T m = xr.maxCoeff();
        e = cpu::exact_exp(xr - m);  // core/cpu/exact_math.h: exact underflow to 0
        const double sum_exp = cpu::pairwise_sum(0, vocab, [&](std::int64_t j) { return double(e[j]); });
        const double lse = double(m) + std::log(sum_exp);
        plse[r] = static_cast<T>(lse);
        const std::int32_t t = target[r];
        if (t != ignore_index) row_loss[static_cast<std::size_t>(r)] = lse - double(xr[t]);
      }
    }
    // Ignored rows hold exactly 0.0, which adds nothing to the sum.
    const double total = cpu::pairwise_sum(0, rows, [&](std::int64_t r) { return row_loss[static_cast<std::size_t>(r)]; });
    loss.data<T>()[0] = static_cast<T>(kept > 0 ? total / static_cast<double>(kept) : 0.0);
  });
}

void CpuBackend::cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& logsumexp,
                                        const Tensor& dloss, const Tensor& kept, int ignore_index,
                                        Tensor& dlogits) {
  const std::int64_t rows = logits.size(0), vocab = logits.size(1);
  const std::int32_t* target = targets.data<std::int32_t>();
  count_kept(logits, targets, ignore_index, "cross_entropy_backward");
  const double n_kept = kept.data<double>()[0];
  dispatch_float(logits.dtype(), [&]<class T>() {
    const T* px = logits.data<T>();
    const T* plse = logsumexp.data<T>();
    T* pd = dlogits.data<T>();
    const double scale = n_kept > 0 ? dloss.data<double>()[0] / n_kept : 0.0;
    const T s = static_cast<T>(scale);
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(rows * vocab)) if (cpu::element_threads(rows * vocab) > 1 && rows > 1)
    for (std::int64_t r = 0; r < rows; ++r) {
      Row<T> d(pd + r * vocab, vocab);
      const std::int32_t t = target[r];
      if (t == ignore_index) {
        d.setZero();
        continue;
      }
      ConstRow<T> xr(px + r * vocab, vocab);
      const T lse = plse[r];
      d = cpu::exact_exp(xr - lse) * s;          // softmax * scale
      d[t] = (cpu::ExactExp<T>()(xr[t] - lse) - T(1)) * s;  // minus the one-hot, without a second rounding
    }
  });
}

}  // namespace moelab
