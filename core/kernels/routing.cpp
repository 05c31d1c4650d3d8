// core/kernels/routing.cpp — checks and dispatch for the counting sort of MoE routing.
//
// Every MoE step turns a router's choices into groups of rows, one group per expert, so that the
// experts run as one grouped product (grouped_matmul above). On a GPU this must not go through
// the host: a read back would drain the stream every layer, every step. So the whole of it is one
// device op, a stable counting sort:
//
//   ids [T, k] (expert of assignment a = t*k + j, or -1)
//     wanted[e]   = #{a : ids[a] == e}                               (count)
//     rank[a]     = #{a' < a : ids[a'] == ids[a]}                    (position among its expert's)
//     kept[a]     = ids[a] if rank[a] < capacity, else -1           (capacity: first come, first kept)
//     offsets     = exclusive prefix sum of min(wanted, capacity)    [E + 1]
//     order[offsets[e] + rank[a]] = a   for each kept a of expert e  (stable: a increases in a group)
//     order[offsets[E] + i] = the i-th dropped assignment            (so order is a permutation)
//     rows[i]     = order[i] / k                                     (the token of each sorted row)
//
// The sizes of every output are known before any data is looked at ([T, k], [T*k], [E + 1], [E]):
// what depends on the data (how many are kept) lives only in offsets, on the device. A MoE layer
// therefore works on all T*k rows (or a smaller bound it knows without data, nn/moe/moe_layer.h),
// and the grouped products skip rows past offsets[E].
//
// row_groups(offsets, N) is the inverse view: the group of each of N rows (E past offsets[E]),
// used to add per-expert biases.
#include <limits>
#include <string>

#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {

ExpertGroups group_by_expert(const Tensor& ids, std::int64_t experts, std::int64_t capacity) {
  const char* op = "group_by_expert";
  check_dtype(ids, DType::Int32, op, "ids");
  MOELAB_CHECK(ids.rank() == 2, op, "ids must be [T, k], got ", ids.shape());
  MOELAB_CHECK(experts >= 1, op, "experts must be >= 1, got ", experts);
  MOELAB_CHECK(ids.numel() <= std::numeric_limits<std::int32_t>::max() &&
                   experts <= std::numeric_limits<std::int32_t>::max(),
               op, "ids ", ids.shape(), " and ", experts, " experts must fit int32 positions");
  const std::int64_t n = ids.numel();
  const Device device = ids.device();
  ExpertGroups g{Tensor::empty(ids.shape(), DType::Int32, device), Tensor::empty({n}, DType::Int32, device),
                 Tensor::empty({n}, DType::Int32, device), Tensor::empty({experts + 1}, DType::Int32, device),
                 Tensor::empty({experts}, DType::Int32, device)};
  try {
    backend(device).group_by_expert(ids, capacity, g.kept, g.order, g.rows, g.offsets, g.wanted);
  } catch (const IndexRangeError& e) {
    fail(op, "ids (flat position ", e.position, ") = ", e.value, " is outside [-1, ", e.limit, ") for ", experts,
         " experts");
  }
  return g;
}

Tensor row_groups(const Tensor& offsets, std::int64_t rows) {
  const char* op = "row_groups";
  check_dtype(offsets, DType::Int32, op, "offsets");
  MOELAB_CHECK(offsets.rank() == 1 && offsets.size(0) >= 1, op, "offsets must be [E + 1], got ", offsets.shape());
  MOELAB_CHECK(rows >= 0 && rows <= std::numeric_limits<std::int32_t>::max(), op,
               "rows must be in [0, 2^31), got ", rows);
  Tensor out = Tensor::empty({rows}, DType::Int32, offsets.device());
  backend(offsets.device()).row_groups(offsets, out);
  return out;
}

}  // namespace moelab::kernels
