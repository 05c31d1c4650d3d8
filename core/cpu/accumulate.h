// core/cpu/accumulate.h — deterministic, accurate sums shared by the CPU kernels.
//
// Every sum the CPU backend reports (sum, mean, softmax's normaliser, cross-entropy's
// log-sum-exp and mean loss) goes through pairwise_sum, which:
//   - accumulates in double, whatever the tensor's dtype (float32 inputs lose nothing), and
//   - adds the terms along a fixed binary tree (pairwise or "cascade" summation, as NumPy does):
//       sum(x[0:n]) = sum(x[0:h]) + sum(x[h:n]),  h = (n / 2) rounded down to a multiple of 8,
//     down to leaves of at most 128 terms, each summed in 8 interleaved lanes (so the compiler
//     can vectorise) then combined ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) + tail.
// The rounding error grows like O(eps * log n) instead of O(eps * n) for a straight loop, and
// the tree depends only on n, so a sum is bitwise the same run after run, on any thread count.
// pairwise_sum_parallel evaluates the same tree with its large subtrees on OpenMP threads and
// combines them in tree order: the result is bitwise identical to pairwise_sum.
//
// A "term" is any callable i -> double, so one routine serves plain sums (x[i]), dot products
// (dy[i] * y[i]) and sums of exponentials (exp(x[i] - max)).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/cpu/thread_count.h"

namespace moelab::cpu {


inline constexpr std::int64_t kPairwiseLeaf = 128;

// Where the tree splits a range of n > kPairwiseLeaf terms.
inline std::int64_t pairwise_split(std::int64_t n) { return n / 2 / 8 * 8; }

// Sum of term(i) for i in [begin, end), in double, along the fixed pairwise tree.
template <class Term>
double pairwise_sum(std::int64_t begin, std::int64_t end, const Term& term) {
  const std::int64_t n = end - begin;
  if (n > kPairwiseLeaf) {
    const std::int64_t mid = begin + pairwise_split(n);
    return pairwise_sum(begin, mid, term) + pairwise_sum(mid, end, term);
  }
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t i = begin;
  for (; i + 8 <= end; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] += term(i + j);
  double tail = 0;
  for (; i < end; ++i) tail += term(i);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])) + tail;
}

namespace detail {

// Subtrees of at most this many terms are evaluated whole on one thread.
inline constexpr std::int64_t kPairwiseTask = 16384;

inline void collect_subtrees(std::int64_t begin, std::int64_t end, std::vector<std::pair<std::int64_t, std::int64_t>>& out) {
  const std::int64_t n = end - begin;
  if (n <= kPairwiseTask) {
    out.emplace_back(begin, end);
    return;
  }
  const std::int64_t mid = begin + pairwise_split(n);
  collect_subtrees(begin, mid, out);
  collect_subtrees(mid, end, out);
}

inline double combine_subtrees(std::int64_t begin, std::int64_t end, const std::vector<double>& partial,
                               std::size_t& next) {
  const std::int64_t n = end - begin;
  if (n <= kPairwiseTask) return partial[next++];
  const std::int64_t mid = begin + pairwise_split(n);
  const double left = combine_subtrees(begin, mid, partial, next);
  return left + combine_subtrees(mid, end, partial, next);
}

}  // namespace detail

// pairwise_sum(0, n, term), with the subtrees computed in parallel. Bitwise the same result.
template <class Term>
double pairwise_sum_parallel(std::int64_t n, const Term& term) {
  const int threads = element_threads(n);
  if (threads < 2) return pairwise_sum(0, n, term);
  std::vector<std::pair<std::int64_t, std::int64_t>> subtrees;
  detail::collect_subtrees(0, n, subtrees);
  std::vector<double> partial(subtrees.size());
  const std::int64_t count = static_cast<std::int64_t>(subtrees.size());
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t s = 0; s < count; ++s) {
    const auto [b, e] = subtrees[static_cast<std::size_t>(s)];
    partial[static_cast<std::size_t>(s)] = pairwise_sum(b, e, term);
  }
  std::size_t next = 0;
  return detail::combine_subtrees(0, n, partial, next);
}

}  // namespace moelab::cpu
