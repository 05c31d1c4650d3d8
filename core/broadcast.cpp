// core/broadcast.cpp — the broadcast shape and the merged strided plan (see broadcast.h).
#include "core/broadcast.h"

#include <algorithm>

namespace moelab {
namespace {

// Size of `shape` at result axis i of a rank-`rank` result (1 for a missing leading axis).
std::int64_t aligned_size(const Shape& shape, int rank, int i) {
  const int j = i - (rank - shape.rank());
  return j < 0 ? 1 : shape[j];
}

}  // namespace

std::optional<Shape> broadcast_shape(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    const std::int64_t p = aligned_size(a, rank, i), q = aligned_size(b, rank, i);
    if (p != q && p != 1 && q != 1) return std::nullopt;
    sizes[static_cast<std::size_t>(i)] = p == 1 ? q : p;
  }
  return Shape(std::move(sizes));
}

BroadcastPlan broadcast_plan(const Shape& a, const Shape& b) {
  const Shape out = *broadcast_shape(a, b);
  const int rank = out.rank();
  // Pass 1: the result's axes of size > 1, merged while both operands' "repeated here" flags
  // stay the same. repeat_a[k]: a is repeated along merged axis k (its own size there is 1).
  BroadcastPlan plan;
  std::vector<bool> repeat_a, repeat_b;
  for (int i = 0; i < rank; ++i) {
    const std::int64_t n = out[i];
    if (n == 1) continue;
    const bool ra = aligned_size(a, rank, i) == 1, rb = aligned_size(b, rank, i) == 1;
    if (!plan.sizes.empty() && repeat_a.back() == ra && repeat_b.back() == rb) {
      plan.sizes.back() *= n;
    } else {
      plan.sizes.push_back(n);
      repeat_a.push_back(ra);
      repeat_b.push_back(rb);
    }
  }
  if (plan.sizes.empty()) {  // one element
    plan.sizes = {1};
    plan.a_strides = {0};
    plan.b_strides = {0};
    return plan;
  }
  // Pass 2: strides from the innermost axis out; an operand's data only spans its own axes.
  const std::size_t r = plan.sizes.size();
  plan.a_strides.assign(r, 0);
  plan.b_strides.assign(r, 0);
  std::int64_t step_a = 1, step_b = 1;
  for (std::size_t k = r; k-- > 0;) {
    if (!repeat_a[k]) {
      plan.a_strides[k] = step_a;
      step_a *= plan.sizes[k];
    }
    if (!repeat_b[k]) {
      plan.b_strides[k] = step_b;
      step_b *= plan.sizes[k];
    }
  }
  return plan;
}

}  // namespace moelab
