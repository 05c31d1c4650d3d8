// tests/test_sort.cpp — topk (ties, NaN, every k) and stable argsort (both of its algorithms)
// against std::stable_sort references, plus their argument checks.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "core/factories.h"
#include "core/kernels.h"

using namespace moelab;

namespace {

// Reference top-k of each row: stable sort of positions by descending value keeps lower positions
// first among ties.
template <class T>
void check_topk(const Tensor& x, int k) {
  const std::int64_t n = x.size(-1), rows = x.numel() / n;
  const auto v = x.to_vector<T>();
  kernels::TopKResult result = kernels::topk(x, k);
  const auto values = result.values.to_vector<T>();
  const auto indices = result.indices.to_vector<std::int32_t>();
  REQUIRE(values.size() == static_cast<std::size_t>(rows * k));
  bool all_match = true;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::int32_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    const T* row = v.data() + r * n;
    // NaN above every number, NaNs equal to each other: a strict weak order, so stable_sort holds.
    auto greater = [](T a, T b) { return std::isnan(a) ? !std::isnan(b) : !std::isnan(b) && a > b; };
    std::stable_sort(order.begin(), order.end(), [row, greater](std::int32_t a, std::int32_t b) { return greater(row[a], row[b]); });
    for (int i = 0; i < k; ++i) {
      const std::size_t at = static_cast<std::size_t>(r * k + i);
      const T want = row[order[static_cast<std::size_t>(i)]];
      all_match = all_match && indices[at] == order[static_cast<std::size_t>(i)] &&
                  (values[at] == want || (std::isnan(values[at]) && std::isnan(want)));
    }
  }
  CHECK(all_match);
}

// Reference stable ascending argsort of each row.
void check_argsort(const Tensor& keys) {
  const std::int64_t n = keys.size(-1), rows = keys.numel() / n;
  const auto k = keys.to_vector<std::int32_t>();
  const auto got = kernels::argsort(keys).to_vector<std::int32_t>();
  REQUIRE(got.size() == k.size());
  bool all_match = true;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::int32_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    const std::int32_t* row = k.data() + r * n;
    std::stable_sort(order.begin(), order.end(), [row](std::int32_t a, std::int32_t b) { return row[a] < row[b]; });
    for (std::int64_t i = 0; i < n; ++i)
      all_match = all_match && got[static_cast<std::size_t>(r * n + i)] == order[static_cast<std::size_t>(i)];
  }
  CHECK(all_match);
}

Tensor random_keys(const Shape& shape, std::uint32_t range, std::int32_t offset, Generator& gen) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(shape.numel()));
  for (auto& x : v) x = static_cast<std::int32_t>(gen.next_below(range)) + offset;
  return from_vector(v, shape);
}

}  // namespace

TEST_CASE("topk matches a stable descending sort on random rows, every k") {
  Generator gen(1);
  for (int k : {1, 3, 17}) {
    check_topk<float>(uniform({5, 17}, -1, 1, gen, DType::Float32), k);
    check_topk<double>(uniform({2, 3, 17}, -1, 1, gen, DType::Float64), k);
  }
  // Few distinct values: many ties inside and across the top k.
  check_topk<float>(uniform({40, 12}, 0, 3, gen, DType::Float64).to(DType::Int32).to(DType::Float32), 5);
  check_topk<double>(uniform({40, 12}, 0, 2, gen, DType::Float64).to(DType::Int32).to(DType::Float64), 7);
  // Large enough for the parallel path.
  check_topk<float>(uniform({700, 64}, -1, 1, gen, DType::Float32), 2);
}

// Rows long enough for the vector passes (k <= 4, at least two vectors of any width up to 16
// floats), where ties, signed zeros, -inf in the top k and NaN each send a row down another road.
TEST_CASE("topk's vector passes agree with the order on ties, zeros, infinities and NaN") {
  Generator gen(3);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (std::int64_t n : {8, 16, 32, 37, 64, 130}) {
    // Few distinct values: ties inside the top k and between passes.
    Tensor few = uniform({30, n}, 0, 3, gen, DType::Float64).to(DType::Int32).to(DType::Float32);
    std::vector<float> v = few.to_vector<float>();
    for (std::int64_t r = 0; r < 30; ++r) {
      float* row = v.data() + r * n;
      const std::size_t j = static_cast<std::size_t>(gen.next_below(static_cast<std::uint32_t>(n)));
      switch (r % 6) {
        case 0: break;                                                        // ties only
        case 1: for (std::int64_t c = 0; c < n; ++c) row[c] = c % 3 ? -0.0f : 0.0f; break;  // signed zeros
        case 2: for (std::int64_t c = 0; c < n; ++c) row[c] = c == std::int64_t(j) ? 1.0f : -inf; break;  // -inf in the top k
        case 3: row[j] = nan; break;                                         // one NaN
        case 4: row[j] = inf; row[(j + 1) % std::size_t(n)] = inf; break;     // two +inf
        case 5: row[n - 1] = 7.0f; row[n - 2] = 7.0f; break;                  // the best in the scalar tail
      }
    }
    const Tensor x = from_vector(v, {30, n});
    const Tensor xd = x.to(DType::Float64);
    for (int k = 1; k <= 4; ++k) {
      check_topk<float>(x, k);
      check_topk<double>(xd, k);
    }
  }
}

TEST_CASE("topk breaks ties toward the lower index") {
  kernels::TopKResult equal = kernels::topk(full({3, 6}, 0.5), 4);
  CHECK(equal.indices.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(equal.values.to_vector<float>() == std::vector<float>(12, 0.5f));
  Tensor x = from_vector(std::vector<double>{1, 3, 2, 3, 1, 3}, {6});
  kernels::TopKResult r = kernels::topk(x, 4);
  CHECK(r.indices.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 3, 5, 2});
  CHECK(r.values.to_vector<double>() == std::vector<double>{3, 3, 3, 2});
  // +0.0 and -0.0 are equal: the lower index wins.
  Tensor zeros_signed = from_vector(std::vector<float>{-0.0f, 0.0f, -1.0f}, {3});
  CHECK(kernels::topk(zeros_signed, 2).indices.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1});
}

TEST_CASE("topk ranks NaN above every number, +infinity included") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Tensor x = from_vector(std::vector<float>{1, nan, inf, nan, -inf}, {5});
  kernels::TopKResult r = kernels::topk(x, 4);
  CHECK(r.indices.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 3, 2, 0});
  const auto v = r.values.to_vector<float>();
  CHECK(std::isnan(v[0]));
  CHECK(std::isnan(v[1]));
  CHECK(v[2] == inf);
  CHECK(v[3] == 1.0f);
}

TEST_CASE("argsort is stable and ascending, on both of its algorithms") {
  Generator gen(2);
  // Dense small keys (expert ids): the counting-sort path, thousands of equal keys.
  check_argsort(random_keys({3, 500}, 8, 0, gen));
  check_argsort(random_keys({40, 1000}, 4, -2, gen));  // negative keys, parallel path
  // Wide keys: range > n, the std::stable_sort path; the extremes repeat every fifth key.
  check_argsort(random_keys({4, 300}, 1u << 30, -(1 << 29), gen));
  std::vector<std::int32_t> extremes;
  const std::int32_t lo = std::numeric_limits<std::int32_t>::min(), hi = std::numeric_limits<std::int32_t>::max();
  for (int i = 0; i < 50; ++i) extremes.push_back(std::vector<std::int32_t>{hi, 0, lo, 7, 0}[static_cast<std::size_t>(i % 5)]);
  check_argsort(from_vector(extremes, {2, 25}));
  // Hand-checked: equal keys keep their order.
  Tensor keys = from_vector(std::vector<std::int32_t>{2, 0, 2, 1, 0, 2}, {6});
  CHECK(kernels::argsort(keys).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 4, 3, 0, 2, 5});
  // Empty rows and zero rows give empty results.
  CHECK(kernels::argsort(zeros({3, 0}, DType::Int32)).shape() == Shape{3, 0});
  CHECK(kernels::topk(zeros({0, 5}), 2).indices.shape() == Shape{0, 2});
}

TEST_CASE("topk and argsort reject bad arguments with the op's name") {
  Tensor x = zeros({3, 4});
  CHECK_THROWS_WITH_AS(kernels::topk(x, 0), doctest::Contains("topk"), Error);
  CHECK_THROWS_WITH_AS(kernels::topk(x, -1), doctest::Contains("topk"), Error);
  CHECK_THROWS_WITH_AS(kernels::topk(x, 5), doctest::Contains("topk"), Error);
  CHECK_THROWS_WITH_AS(kernels::topk(zeros({3, 4}, DType::Int32), 2), doctest::Contains("topk"), Error);
  CHECK_THROWS_WITH_AS(kernels::topk(zeros({}), 1), doctest::Contains("topk"), Error);
  CHECK_THROWS_WITH_AS(kernels::topk(zeros({3, 0}), 1), doctest::Contains("topk"), Error);
  CHECK_THROWS_WITH_AS(kernels::topk(Tensor(), 1), doctest::Contains("topk"), Error);
  CHECK_THROWS_WITH_AS(kernels::argsort(zeros({5})), doctest::Contains("argsort"), Error);
  CHECK_THROWS_WITH_AS(kernels::argsort(zeros({}, DType::Int32)), doctest::Contains("argsort"), Error);
  CHECK_THROWS_WITH_AS(kernels::argsort(Tensor()), doctest::Contains("argsort"), Error);
}
