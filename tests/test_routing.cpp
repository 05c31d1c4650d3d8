// tests/test_routing.cpp — kernels::group_by_expert and kernels::row_groups (core/kernels.h),
// the device-side counting sort of MoE routing, against a plain per-expert loop.
//
// The reference states the contract directly: for each expert in turn, walk the assignments in
// order and keep the first `capacity` that chose it; then list the dropped ones in order. The
// kernel must give exactly that (it is an integer algorithm: bitwise, on every device).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/factories.h"
#include "core/kernels.h"
#include "core/random.h"

using namespace moelab;

namespace {

struct Reference {
  std::vector<std::int32_t> kept, order, rows, offsets, wanted;
};

Reference reference(const std::vector<std::int32_t>& ids, std::int64_t k, std::int64_t E, std::int64_t capacity) {
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  Reference r;
  r.kept.assign(ids.size(), -1);
  r.offsets.push_back(0);
  for (std::int64_t e = 0; e < E; ++e) {
    std::int32_t wanted = 0, kept = 0;
    for (std::int64_t a = 0; a < n; ++a) {
      if (ids[a] != e) continue;
      ++wanted;
      if (capacity >= 0 && kept >= capacity) continue;
      ++kept;
      r.kept[a] = static_cast<std::int32_t>(e);
      r.order.push_back(static_cast<std::int32_t>(a));
    }
    r.wanted.push_back(wanted);
    r.offsets.push_back(r.offsets.back() + kept);
  }
  for (std::int64_t a = 0; a < n; ++a)
    if (r.kept[a] < 0) r.order.push_back(static_cast<std::int32_t>(a));
  for (std::int32_t a : r.order) r.rows.push_back(static_cast<std::int32_t>(a / k));
  return r;
}

std::vector<std::int32_t> random_ids(std::int64_t n, std::int64_t E, Generator& gen) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) id = static_cast<std::int32_t>(gen.next_below(static_cast<std::uint32_t>(E + 1))) - 1;
  return ids;
}

}  // namespace

TEST_CASE("group_by_expert is the stable per-expert sort with first-come capacity") {
  Generator gen(5);
  for (std::int64_t capacity : {-1, 0, 1, 2, 5, 1000}) {
    for (auto [T, k, E] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 1, 1}, {9, 2, 4}, {50, 2, 8},
                           {300, 1, 64}, {40, 4, 3}}) {
      INFO("T ", T, " k ", k, " E ", E, " capacity ", capacity);
      const std::vector<std::int32_t> ids = random_ids(T * k, E, gen);
      const Reference want = reference(ids, k, E, capacity);
      const kernels::ExpertGroups got = kernels::group_by_expert(from_vector(ids, {T, k}), E, capacity);
      CHECK(got.kept.shape() == Shape{T, k});
      CHECK(got.kept.to_vector<std::int32_t>() == want.kept);
      CHECK(got.order.to_vector<std::int32_t>() == want.order);
      CHECK(got.rows.to_vector<std::int32_t>() == want.rows);
      CHECK(got.offsets.to_vector<std::int32_t>() == want.offsets);
      CHECK(got.wanted.to_vector<std::int32_t>() == want.wanted);
    }
  }
}

TEST_CASE("group_by_expert on a hand-made case: what each output means") {
  // T = 4 tokens, k = 2, E = 3, capacity 2: expert 0 is wanted by a = 0, 2, 5, 6 and keeps 0, 2.
  const Tensor ids = from_vector(std::vector<std::int32_t>{0, 1, 0, 2, -1, 0, 0, 1}, {4, 2});
  const kernels::ExpertGroups g = kernels::group_by_expert(ids, 3, 2);
  CHECK(g.kept.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, 0, 2, -1, -1, -1, 1});
  CHECK(g.order.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 2, 1, 7, 3, 4, 5, 6});
  CHECK(g.rows.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, 0, 3, 1, 2, 2, 3});
  CHECK(g.offsets.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 2, 4, 5});
  CHECK(g.wanted.to_vector<std::int32_t>() == std::vector<std::int32_t>{4, 2, 1});
  // row_groups inverts the offsets; rows past offsets[E] get E.
  CHECK(kernels::row_groups(g.offsets, 8).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{0, 0, 1, 1, 2, 3, 3, 3});
}

TEST_CASE("group_by_expert and row_groups reject bad input with moelab::Error naming them") {
  CHECK_THROWS_WITH_AS(kernels::group_by_expert(from_vector(std::vector<std::int32_t>{0, 3, 1}, {3, 1}), 3),
                       doctest::Contains("group_by_expert: ids (flat position 1) = 3 is outside [-1, 3)"), Error);
  CHECK_THROWS_WITH_AS(kernels::group_by_expert(from_vector(std::vector<std::int32_t>{-2}, {1, 1}), 3),
                       doctest::Contains("ids (flat position 0) = -2"), Error);
  CHECK_THROWS_WITH_AS(kernels::group_by_expert(zeros({2, 2}), 3), doctest::Contains("group_by_expert"), Error);
  CHECK_THROWS_WITH_AS(kernels::group_by_expert(zeros({4}, DType::Int32), 3), doctest::Contains("[T, k]"), Error);
  CHECK_THROWS_WITH_AS(kernels::group_by_expert(zeros({2, 2}, DType::Int32), 0), doctest::Contains("experts"), Error);
  const auto offsets = [](std::vector<std::int32_t> v) { return from_vector(v, {static_cast<std::int64_t>(v.size())}); };
  CHECK_THROWS_WITH_AS(kernels::row_groups(offsets({1, 2}), 3), doctest::Contains("row_groups: offsets[0]"), Error);
  CHECK_THROWS_WITH_AS(kernels::row_groups(offsets({0, 2, 1}), 3), doctest::Contains("non-decreasing"), Error);
  CHECK_THROWS_WITH_AS(kernels::row_groups(offsets({0, 4}), 3), doctest::Contains("offsets[E] = 4"), Error);
  // Nothing at all: an empty batch has empty outputs and zero offsets.
  const kernels::ExpertGroups none = kernels::group_by_expert(zeros({0, 2}, DType::Int32), 4);
  CHECK(none.order.numel() == 0);
  CHECK(none.offsets.to_vector<std::int32_t>() == std::vector<std::int32_t>(5, 0));
}
