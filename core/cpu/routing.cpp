// core/cpu/routing.cpp — the counting sort of MoE routing on the host (core/kernels/routing.cpp
// gives the math).
//
// One thread, two passes over the n = T*k assignments: the first checks every id and counts
// them per expert; a prefix sum turns the kept counts into the first slot of each expert; the
// second walks the assignments in order and drops each into its expert's next slot, or into the
// dropped tail when its expert is full. Walking in order is what makes the sort stable and the
// capacity "first come, first kept". O(n + E): at T*k = 65,536 assignments it costs tens of
// microseconds, too little to be worth threads (and one thread keeps it trivially deterministic).
#include <algorithm>
#include <vector>

#include "core/cpu/cpu_backend.h"

namespace moelab {

void CpuBackend::group_by_expert(const Tensor& ids, std::int64_t capacity, Tensor& kept, Tensor& order, Tensor& rows,
                                 Tensor& offsets, Tensor& wanted) {
  // ids, kept: [T, k]; order, rows: [T*k]; offsets: [E + 1]; wanted: [E].
  const std::int64_t n = ids.numel(), k = ids.rank() == 2 ? ids.size(1) : 1, E = wanted.numel();
  const std::int32_t* id = ids.data<std::int32_t>();
  std::int32_t* kept_p = kept.data<std::int32_t>();
  std::int32_t* order_p = order.data<std::int32_t>();
  std::int32_t* rows_p = rows.data<std::int32_t>();
  std::int32_t* offsets_p = offsets.data<std::int32_t>();
  std::int32_t* wanted_p = wanted.data<std::int32_t>();

  // Pass 1: check and count (nothing written before every id is known to be valid).
  std::vector<std::int64_t> count(static_cast<std::size_t>(E), 0);
  for (std::int64_t a = 0; a < n; ++a) {
    if (id[a] < -1 || id[a] >= E) throw IndexRangeError(a, id[a], E);
    if (id[a] >= 0) ++count[static_cast<std::size_t>(id[a])];
  }
  // Offsets from the kept counts min(wanted, capacity).
  const std::int64_t cap = capacity < 0 ? n : capacity;
  std::vector<std::int64_t> next(static_cast<std::size_t>(E + 1), 0);  // next free slot of each expert
  offsets_p[0] = 0;
  for (std::int64_t e = 0; e < E; ++e) {
    wanted_p[e] = static_cast<std::int32_t>(count[static_cast<std::size_t>(e)]);
    next[static_cast<std::size_t>(e)] = offsets_p[e];
    offsets_p[e + 1] = static_cast<std::int32_t>(offsets_p[e] + std::min(count[static_cast<std::size_t>(e)], cap));
  }
  std::int64_t dropped_slot = offsets_p[E];
  // Pass 2: place each assignment, in order.
  for (std::int64_t a = 0; a < n; ++a) {
    const std::int32_t e = id[a];
    std::int64_t slot;
    if (e >= 0 && next[static_cast<std::size_t>(e)] < offsets_p[e + 1]) {
      slot = next[static_cast<std::size_t>(e)]++;
      kept_p[a] = e;
    } else {
      slot = dropped_slot++;
      kept_p[a] = -1;
    }
    order_p[slot] = static_cast<std::int32_t>(a);
    rows_p[slot] = static_cast<std::int32_t>(a / k);
  }
}

void CpuBackend::row_groups(const Tensor& offsets, Tensor& out) {
  // offsets: [E + 1] -> out: [rows], group e for rows in [offsets[e], offsets[e+1]), E after offsets[E].
  const std::int32_t* off = offsets.data<std::int32_t>();
  const std::int64_t E = offsets.numel() - 1, rows = out.numel();
  MOELAB_CHECK(off[0] == 0, "row_groups", "offsets[0] must be 0, got ", off[0]);
  for (std::int64_t e = 0; e < E; ++e)
    MOELAB_CHECK(off[e] <= off[e + 1], "row_groups", "offsets must be non-decreasing, but offsets[", e, "] = ",
                 off[e], " > offsets[", e + 1, "] = ", off[e + 1]);
  MOELAB_CHECK(off[E] <= rows, "row_groups", "offsets[E] = ", off[E], " is more than the number of rows ", rows);
  std::int32_t* o = out.data<std::int32_t>();
  for (std::int64_t e = 0; e < E; ++e) std::fill(o + off[e], o + off[e + 1], static_cast<std::int32_t>(e));
  std::fill(o + off[E], o + rows, static_cast<std::int32_t>(E));
}

}  // namespace moelab
