// core/cpu/sort.cpp — top-k selection and stable argsort over the last axis, on the host.
//
//   topk     x: [rows, n] -> values: [rows, k], indices: [rows, k]
//   argsort  keys: [rows, n] int32 -> [rows, n] int32
// Rows are independent, so both run in parallel over rows when the input is large; each row's
// answer is fully determined (see below), so the thread count never changes a result.
//
// topk: std::partial_sort of the positions 0..n-1 under a *total* order, "a comes before b" when
//   x[a] is larger, or the two are equal and a < b. NaN is larger than every number (PyTorch's
//   convention), and NaNs tie with each other. Because no two positions compare equal, the k
//   first positions are unique and the result cannot depend on how the sort works inside.
//   For k <= kScanTopK (a router's 1 or 2 of n experts) one scan keeps the k best positions seen
//   so far, best first: each position is compared with the k-th best and, when before it, inserted
//   in place; the same answer, without partial_sort's heap of all n positions (which made top-2 of
//   64 experts 3% of the 64-expert benchmark step). O(n log k) per row otherwise.
//   For k <= kPassTopK on rows of at least two vectors the k best are found in k vector passes
//   instead (topk_by_passes): pass t takes the largest value m of a scratch copy of the row and the
//   lowest position holding it (one branch-free pass: per lane the largest value and its first
//   position, then the lanes combined), which is the t-th best under the same order, and
//   overwrites that position with -inf so that the next pass skips it. A row with a NaN, or one
//   whose remaining best is -inf (then a skipped position and a real -inf would look alike), goes
//   to the scan: the answer is the same in every case. The scan's compare-and-branch per element
//   had made top-2 of 64 experts 4.8% of perf's samples of the 64-expert benchmark step; the passes
//   take 1.7-1.8%. k = 2 runs as one pass keeping two candidates a lane (top2_by_pass).
//
// argsort: stable ascending. Two algorithms, the same answer (both are stable):
//   - counting sort when the keys of a row span a range no wider than the row (max - min + 1 <= n),
//     the common case of sorting token assignments by expert id (n = T*k keys in [0, E)): one pass
//     counts each key, a prefix sum turns counts into first slots, and a second pass in input order
//     drops each position into its key's next slot, so equal keys keep their order. O(n + range).
//   - std::stable_sort of the positions by key otherwise (sparse or wide keys, where a counting
//     array would be larger than the row). O(n log n).
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"
#include "core/cpu/thread_count.h"

namespace moelab {
namespace {

// a > b, with NaN above every number and NaNs equal to each other.
template <class T>
bool greater(T a, T b) {
  if (std::isnan(a)) return !std::isnan(b);
  if (std::isnan(b)) return false;
  return a > b;
}

constexpr int kScanTopK = 8;  // the largest k selected by one scan (header)

constexpr int kPassTopK = 4;  // the largest k selected by vector passes (header)

// The k (<= kPassTopK) first positions of one row x[0, n) by vector passes (header), written to
// best[0, k) with `scratch` as the copy; false (best undefined) for a row the passes leave to the
// scan: one with a NaN, or with -inf among its k best.
template <class T>
bool topk_by_passes(const T* x, std::int64_t n, int k, std::vector<T>& scratch, std::int32_t* best) {
  using namespace Eigen::internal;
  using Packet = typename packet_traits<T>::type;
  constexpr std::int64_t P = packet_traits<T>::size;
  scratch.assign(x, x + n);
  T* y = scratch.data();
  const std::int64_t body = n / P * P;
  for (int t = 0; t < k; ++t) {
    // One pass: each lane keeps its largest value and that value's first position (a strictly
    // larger one replaces it; positions are counted in T, exact for any row length used here);
    // at t = 0 it also notes whether any element is NaN (NaN != NaN).
    Packet lane_best = ploadu<Packet>(y), position = plset<Packet>(T(0)), lane_at = position;
    Packet ordered = pcmp_eq(lane_best, lane_best);
    const Packet step = pset1<Packet>(static_cast<T>(P));
    for (std::int64_t j = P; j < body; j += P) {
      const Packet v = ploadu<Packet>(y + j);
      position = padd(position, step);
      const Packet larger = pcmp_lt(lane_best, v);
      lane_best = pselect(larger, v, lane_best);
      lane_at = pselect(larger, position, lane_at);
      if (t == 0) ordered = pand(ordered, pcmp_eq(v, v));
    }
    if (t == 0 && predux_any(pandnot(ptrue(ordered), ordered))) return false;
    // The largest of the lanes, and the lowest position among the lanes that hold it (+0 and -0
    // are equal, as in the scan); then the scalar tail, whose positions all come later.
    T values[P], positions[P];
    pstoreu(values, lane_best);
    pstoreu(positions, lane_at);
    T m = values[0];
    for (std::int64_t l = 1; l < P; ++l) m = std::max(m, values[l]);
    std::int64_t at = n;
    for (std::int64_t l = 0; l < P; ++l)
      if (values[l] == m) at = std::min(at, static_cast<std::int64_t>(positions[l]));
    for (std::int64_t j = body; j < n; ++j) {
      if (std::isnan(y[j])) return false;
      if (y[j] > m) m = y[j], at = j;
    }
    if (m == -std::numeric_limits<T>::infinity()) return false;
    best[t] = static_cast<std::int32_t>(at);
    y[at] = -std::numeric_limits<T>::infinity();
  }
  return true;
}

// k = 2 in one vector pass instead of two (topk_by_passes' answer, written to best[0, 2)): each
// lane keeps its best and second best value with their first positions (a strictly larger value
// moves the best down to second, or replaces the second), the 2 x P lane candidates are then ranked
// by the order (larger value, else lower position), and the scalar tail, whose positions all come
// later, is merged last. false for the rows topk_by_passes leaves to the scan (a NaN, or -inf
// among the two best). Top-2 of 64 experts is the routed MoE benchmarks': top-k's share of the
// 64-expert float32 step's perf samples went from 2.43-2.60% (two passes and a scratch copy) to
// 2.11-2.43% (five runs each, builds in turn).
template <class T>
bool top2_by_pass(const T* x, std::int64_t n, std::int32_t* best) {
  using namespace Eigen::internal;
  using Packet = typename packet_traits<T>::type;
  constexpr std::int64_t P = packet_traits<T>::size;
  const std::int64_t body = n / P * P;
  const Packet minus_inf = pset1<Packet>(-std::numeric_limits<T>::infinity()), step = pset1<Packet>(static_cast<T>(P));
  Packet first = ploadu<Packet>(x), position = plset<Packet>(T(0)), first_at = position;
  // "None yet" for the second: -inf, which sends a row whose second stays so to the scan.
  Packet second = minus_inf, second_at = pset1<Packet>(static_cast<T>(n));
  Packet ordered = pcmp_eq(first, first);
  for (std::int64_t j = P; j < body; j += P) {
    const Packet v = ploadu<Packet>(x + j);
    position = padd(position, step);
    const Packet above_first = pcmp_lt(first, v), above_second = pcmp_lt(second, v);
    second = pselect(above_first, first, pselect(above_second, v, second));
    second_at = pselect(above_first, first_at, pselect(above_second, position, second_at));
    first = pselect(above_first, v, first);
    first_at = pselect(above_first, position, first_at);
    ordered = pand(ordered, pcmp_eq(v, v));
  }
  if (predux_any(pandnot(ptrue(ordered), ordered))) return false;
  T value[2 * P], at[2 * P];
  pstoreu(value, first), pstoreu(value + P, second);
  pstoreu(at, first_at), pstoreu(at + P, second_at);
  const auto before = [&](std::int64_t a, std::int64_t b) {
    return value[a] > value[b] || (value[a] == value[b] && at[a] < at[b]);
  };
  std::int64_t b0 = 0, b1 = -1;  // the two best candidates, b0 first
  for (std::int64_t c = 1; c < 2 * P; ++c) {
    if (before(c, b0)) {
      b1 = b0, b0 = c;
    } else if (b1 < 0 || before(c, b1)) {
      b1 = c;
    }
  }
  T v0 = value[b0], v1 = value[b1];
  std::int64_t p0 = static_cast<std::int64_t>(at[b0]), p1 = static_cast<std::int64_t>(at[b1]);
  for (std::int64_t j = body; j < n; ++j) {
    if (std::isnan(x[j])) return false;
    if (x[j] > v0) {
      v1 = v0, p1 = p0, v0 = x[j], p0 = j;
    } else if (x[j] > v1) {
      v1 = x[j], p1 = j;
    }
  }
  if (v1 == -std::numeric_limits<T>::infinity()) return false;  // (then v0 may be too)
  best[0] = static_cast<std::int32_t>(p0);
  best[1] = static_cast<std::int32_t>(p1);
  return true;
}

// The k first positions of one row under the total order of the header, best first.
template <class T>
void topk_row(const T* x, std::int64_t n, int k, std::vector<std::int32_t>& order, std::vector<T>& scratch, T* values,
              std::int32_t* indices) {
  const std::int32_t* best = nullptr;
  std::int32_t scanned[kScanTopK];
  constexpr std::int64_t P = Eigen::internal::packet_traits<T>::size;
  const bool passes = k <= kPassTopK && n >= 2 * P && n < (std::int64_t{1} << 24);
  if (passes && (k == 2 ? top2_by_pass(x, n, scanned) : topk_by_passes(x, n, k, scratch, scanned))) {
    best = scanned;
  } else if (k <= kScanTopK) {
    // Positions come in increasing order, so every kept one is lower than j, and `before(j, kept)`
    // is just greater(x[j], x[kept]): an equal value never displaces an earlier position.
    int kept = 0;  // scanned[0, kept): the best positions so far, best first
    for (std::int32_t j = 0; j < static_cast<std::int32_t>(n); ++j) {
      if (kept == k && !greater(x[j], x[scanned[k - 1]])) continue;
      int slot = kept < k ? kept++ : k - 1;  // j displaces the k-th best (or fills a free slot)
      for (; slot > 0 && greater(x[j], x[scanned[slot - 1]]); --slot)
        scanned[slot] = scanned[slot - 1];
      scanned[slot] = j;
    }
    best = scanned;
  } else {
    auto before = [x](std::int32_t a, std::int32_t b) {
      if (greater(x[a], x[b])) return true;
      if (greater(x[b], x[a])) return false;
      return a < b;
    };
    order.resize(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    best = order.data();
  }
  for (int i = 0; i < k; ++i) {
    indices[i] = best[i];
    values[i] = x[best[i]];
  }
}

// Stable ascending order of one row of keys, written to out (see the header for the algorithms).
void argsort_row(const std::int32_t* keys, std::int64_t n, std::vector<std::int64_t>& slots, std::int32_t* out) {
  const auto [lo_it, hi_it] = std::minmax_element(keys, keys + n);
  const std::int64_t lo = *lo_it, range = static_cast<std::int64_t>(*hi_it) - lo + 1;
  if (range <= n) {
    slots.assign(static_cast<std::size_t>(range), 0);
    for (std::int64_t i = 0; i < n; ++i) ++slots[static_cast<std::size_t>(keys[i] - lo)];
    std::int64_t first = 0;  // exclusive prefix sum: the first output slot of each key
    for (std::int64_t& s : slots) {
      const std::int64_t count = s;
      s = first;
      first += count;
    }
    for (std::int64_t i = 0; i < n; ++i) out[slots[static_cast<std::size_t>(keys[i] - lo)]++] = static_cast<std::int32_t>(i);
  } else {
    std::iota(out, out + n, 0);
    std::stable_sort(out, out + n, [keys](std::int32_t a, std::int32_t b) { return keys[a] < keys[b]; });
  }
}

}  // namespace

void CpuBackend::topk(const Tensor& x, int k, Tensor& values, Tensor& indices) {
  const std::int64_t n = x.size(-1), rows = x.numel() / n;
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* pv = values.data<T>();
    std::int32_t* pi = indices.data<std::int32_t>();
#pragma omp parallel num_threads(cpu::element_threads(x.numel())) if (cpu::element_threads(x.numel()) > 1)
    {
      std::vector<std::int32_t> order;  // scratch buffers, one set per thread
      std::vector<T> scratch;
#pragma omp for schedule(static)
      for (std::int64_t r = 0; r < rows; ++r) topk_row(px + r * n, n, k, order, scratch, pv + r * k, pi + r * k);
    }
  });
}

void CpuBackend::argsort(const Tensor& keys, Tensor& out) {
  const std::int64_t n = keys.size(-1), rows = keys.numel() / n;
  const std::int32_t* pk = keys.data<std::int32_t>();
  std::int32_t* po = out.data<std::int32_t>();
#pragma omp parallel num_threads(cpu::element_threads(keys.numel())) if (cpu::element_threads(keys.numel()) > 1)
  {
    std::vector<std::int64_t> slots;
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) argsort_row(pk + r * n, n, slots, po + r * n);
  }
}

}  // namespace moelab
