// tests/test_index.cpp — index_select, scatter_add_rows, gather_last, scatter_add_last, embedding
// and embedding_backward against naive loops, scatter_add_rows_scaled and its backward against the
// unfused kernels they replace (bitwise), plus their argument checks.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "core/factories.h"
#include "core/cpu/thread_count.h"
#include "core/kernels.h"
#include "core/parallel.h"
#include "tests/test_util.h"

using namespace moelab;

namespace {

// Random int32 indices in [0, limit), drawn from gen (repeats are likely when count > limit).
Tensor random_index(const Shape& shape, std::int64_t limit, Generator& gen) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(shape.numel()));
  for (auto& i : v) i = static_cast<std::int32_t>(gen.next_below(static_cast<std::uint32_t>(limit)));
  return from_vector(v, shape);
}

Tensor random_values(const Shape& shape, DType dtype, Generator& gen) {
  // Truncated to integers in (-100, 100) first, so every dtype holds the same values exactly.
  return uniform(shape, -100.0, 100.0, gen, DType::Float64).to(DType::Int32).to(dtype);
}

template <class T>
void check_index_select(DType dtype) {
  Generator gen(1);
  Tensor src = random_values({7, 3, 4}, dtype, gen);
  Tensor index = random_index({10}, 7, gen);
  Tensor out = kernels::index_select(src, index);
  REQUIRE(out.shape() == Shape{10, 3, 4});
  const auto s = src.to_vector<T>(), o = out.to_vector<T>();
  const auto idx = index.to_vector<std::int32_t>();
  for (std::size_t m = 0; m < 10; ++m)
    for (std::size_t c = 0; c < 12; ++c) CHECK(o[m * 12 + c] == s[static_cast<std::size_t>(idx[m]) * 12 + c]);
}

// Sequential reference: out[index[m]] += src[m] for m = 0..M-1, in T.
template <class T>
std::vector<T> naive_scatter_rows(const std::vector<T>& src, const std::vector<std::int32_t>& index,
                                  std::size_t inner, std::size_t rows) {
  std::vector<T> out(rows * inner, T(0));
  for (std::size_t m = 0; m < index.size(); ++m)
    for (std::size_t c = 0; c < inner; ++c) out[static_cast<std::size_t>(index[m]) * inner + c] += src[m * inner + c];
  return out;
}

template <class T>
void check_scatter_add_rows(DType dtype, std::int64_t m_count, std::int64_t inner, std::int64_t rows) {
  Generator gen(2);
  Tensor src = uniform({m_count, inner}, -1.0, 1.0, gen, dtype);
  Tensor index = random_index({m_count}, rows, gen);  // many repeats
  Tensor out = kernels::scatter_add_rows(src, index, rows);
  REQUIRE(out.shape() == Shape{rows, inner});
  // The same order of additions means bitwise the same result, on the parallel path too.
  CHECK(out.to_vector<T>() == naive_scatter_rows(src.to_vector<T>(), index.to_vector<std::int32_t>(),
                                                 static_cast<std::size_t>(inner), static_cast<std::size_t>(rows)));
}

}  // namespace

TEST_CASE("index_select copies the indexed rows, for every dtype") {
  check_index_select<float>(DType::Float32);
  check_index_select<double>(DType::Float64);
  check_index_select<std::int32_t>(DType::Int32);
  Tensor empty = kernels::index_select(zeros({4, 3}), from_vector(std::vector<std::int32_t>{}, {0}));
  CHECK(empty.shape() == Shape{0, 3});
}

TEST_CASE("scatter_add_rows adds repeated indices in order, sequentially and in parallel") {
  check_scatter_add_rows<float>(DType::Float32, 20, 5, 4);
  check_scatter_add_rows<double>(DType::Float64, 20, 5, 4);
  // 3000 x 24 elements, 2.2 grains of the element loops (core/cpu/thread_count.h): with 4 threads set,
  // the parallel scatter by destination row. The first 3000 x 16 fell below two grains, so the
  // "parallel" case took the plain loop and compared nothing new.
  {
    testing::ScopedThreads four(4);
    REQUIRE(cpu::element_threads(3000 * 24) > 1);
    check_scatter_add_rows<float>(DType::Float32, 3000, 24, 37);
  }
  check_scatter_add_rows<double>(DType::Float64, 5000, 8, 5);
  // A hand-checked case: rows 0 and 2 receive two rows each, row 1 none.
  Tensor src = from_vector(std::vector<double>{1, 2, 10, 20, 100, 200, 1000, 2000}, {4, 2});
  Tensor index = from_vector(std::vector<std::int32_t>{2, 0, 2, 0}, {4});
  CHECK(kernels::scatter_add_rows(src, index, 3).to_vector<double>() ==
        std::vector<double>{1010, 2020, 0, 0, 101, 202});
  // No source rows: all zeros.
  Tensor none = kernels::scatter_add_rows(zeros({0, 2}), from_vector(std::vector<std::int32_t>{}, {0}), 3);
  CHECK(none.to_vector<float>() == std::vector<float>(6, 0.0f));
}

TEST_CASE("scatter_add_rows is bitwise the same for one thread and many") {
  Generator gen(3);
  // 4000 x 24 elements, 2.9 grains of the element loops (core/cpu/thread_count.h): with 4 threads set,
  // the parallel scatter by destination row; with 1, the plain loop. The first 4000 x 12 fell below
  // two grains, so both runs took the plain loop and compared nothing.
  Tensor src = uniform({4000, 24}, -1.0, 1.0, gen);
  Tensor index = random_index({4000}, 9, gen);
  testing::ScopedThreads four(4);
  REQUIRE(cpu::element_threads(src.numel()) > 1);
  Tensor many = kernels::scatter_add_rows(src, index, 9);
  set_num_threads(1);
  REQUIRE(cpu::element_threads(src.numel()) == 1);
  Tensor one = kernels::scatter_add_rows(src, index, 9);
  CHECK(many.to_vector<float>() == one.to_vector<float>());
}

// The fused scaled scatter against what it replaces: scatter_add_rows(src * scale[:, None]) forward;
// index_select of dy, then the broadcast product's gradients (a product and a row sum) backward.
void check_scaled_rows_bitwise(DType dtype, std::int64_t m_count, std::int64_t inner, std::int64_t rows) {
  Generator gen(7);
  const Tensor src = uniform({m_count, inner}, -1.0, 1.0, gen, dtype);
  const Tensor scale = uniform({m_count}, 0.0, 1.0, gen, dtype);
  const Tensor index = random_index({m_count}, rows, gen);
  const Tensor dy = uniform({rows, inner}, -1.0, 1.0, gen, dtype);
  const Tensor column = scale.reshape({m_count, 1});
  const Tensor want = kernels::scatter_add_rows(kernels::mul(src, column), index, rows);
  const Tensor got = kernels::scatter_add_rows_scaled(src, scale, index, rows);
  CHECK(got.to(DType::Float64).to_vector<double>() == want.to(DType::Float64).to_vector<double>());
  const Tensor gy = kernels::index_select(dy, index);
  const Tensor want_dsrc = kernels::mul(gy, column);
  const Tensor want_dscale = kernels::sum(kernels::mul(gy, src), 1);
  const kernels::ScaledRowsGrad grad = kernels::scatter_add_rows_scaled_backward(dy, src, scale, index);
  CHECK(grad.src.to(DType::Float64).to_vector<double>() == want_dsrc.to(DType::Float64).to_vector<double>());
  CHECK(grad.scale.to(DType::Float64).to_vector<double>() == want_dscale.to(DType::Float64).to_vector<double>());
}

TEST_CASE("scatter_add_rows_scaled and its backward are bitwise the unfused ops, on any thread count") {
  // With 4 threads set, 3000 x 24 (2.2 grains) and 700 x 200 (4.3 grains) take the parallel paths
  // forward and backward; the first 3000 x 16 fell below two grains and compared nothing new, and
  // 700 x 200 went parallel only where the default thread count was above one.
  testing::ScopedThreads four(4);
  REQUIRE(cpu::element_threads(3000 * 24) > 1);
  REQUIRE(cpu::element_threads(700 * 200) > 1);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    check_scaled_rows_bitwise(dtype, 20, 5, 4);      // sequential
    check_scaled_rows_bitwise(dtype, 3000, 24, 37);  // the parallel paths
    check_scaled_rows_bitwise(dtype, 700, 200, 9);   // rows past the pairwise sum's 128-term leaf
  }
  Generator gen(5);
  // 4000 x 24: above two grains, as in the test above (4000 x 12 was not); the backward too.
  const Tensor src = uniform({4000, 24}, -1.0, 1.0, gen), scale = uniform({4000}, 0.0, 1.0, gen);
  const Tensor index = random_index({4000}, 9, gen);
  const Tensor dy = uniform({9, 24}, -1.0, 1.0, gen);
  REQUIRE(cpu::element_threads(src.numel()) > 1);
  const Tensor many = kernels::scatter_add_rows_scaled(src, scale, index, 9);
  const kernels::ScaledRowsGrad grad_many = kernels::scatter_add_rows_scaled_backward(dy, src, scale, index);
  set_num_threads(1);
  REQUIRE(cpu::element_threads(src.numel()) == 1);
  const Tensor one = kernels::scatter_add_rows_scaled(src, scale, index, 9);
  const kernels::ScaledRowsGrad grad_one = kernels::scatter_add_rows_scaled_backward(dy, src, scale, index);
  CHECK(many.to_vector<float>() == one.to_vector<float>());
  CHECK(grad_many.src.to_vector<float>() == grad_one.src.to_vector<float>());
  CHECK(grad_many.scale.to_vector<float>() == grad_one.scale.to_vector<float>());
}

TEST_CASE("scatter_add_rows_scaled checks its arguments") {
  const Tensor idx = from_vector(std::vector<std::int32_t>{0, 4, 1}, {3});
  CHECK_THROWS_WITH_AS(kernels::scatter_add_rows_scaled(zeros({3, 2}), zeros({3}), idx, 4),
                       doctest::Contains("scatter_add_rows_scaled: index (flat position 1) = 4"), Error);
  CHECK_THROWS_WITH_AS(kernels::scatter_add_rows_scaled(zeros({3, 2}), zeros({2}), idx, 5),
                       doctest::Contains("one entry per src row"), Error);
  CHECK_THROWS_WITH_AS(kernels::scatter_add_rows_scaled(zeros({3, 2}), zeros({3}, DType::Float64), idx, 5),
                       doctest::Contains("scale"), Error);
  CHECK_THROWS_WITH_AS(kernels::scatter_add_rows_scaled_backward(zeros({4, 3}), zeros({3, 2}), zeros({3}), idx),
                       doctest::Contains("trailing axes"), Error);
  CHECK_THROWS_WITH_AS(kernels::scatter_add_rows_scaled_backward(zeros({4, 2}), zeros({3, 2}), zeros({3}), idx),
                       doctest::Contains("scatter_add_rows_scaled_backward: index (flat position 1) = 4"), Error);
  CHECK(kernels::scatter_add_rows_scaled(zeros({0, 2}), zeros({0}), from_vector(std::vector<std::int32_t>{}, {0}), 3)
            .to_vector<float>() == std::vector<float>(6, 0.0f));
}

TEST_CASE("gather_last and scatter_add_last against naive loops") {
  Generator gen(4);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor src = uniform({2, 3, 5}, -1.0, 1.0, gen, dtype).to(DType::Float64);
    Tensor index = random_index({2, 3, 4}, 5, gen);
    const auto s = src.to_vector<double>();
    const auto idx = index.to_vector<std::int32_t>();
    const auto g = kernels::gather_last(src.to(dtype), index).to(DType::Float64).to_vector<double>();
    REQUIRE(g.size() == 24);
    for (std::size_t r = 0; r < 6; ++r)
      for (std::size_t j = 0; j < 4; ++j) CHECK(g[r * 4 + j] == s[r * 5 + static_cast<std::size_t>(idx[r * 4 + j])]);

    Tensor upd = uniform({2, 3, 4}, -1.0, 1.0, gen, dtype).to(DType::Float64);
    const auto u = upd.to_vector<double>();
    Tensor scattered = kernels::scatter_add_last(upd.to(dtype), index, 5);
    REQUIRE(scattered.shape() == Shape{2, 3, 5});
    std::vector<double> expected(30, 0.0);
    for (std::size_t r = 0; r < 6; ++r)
      for (std::size_t j = 0; j < 4; ++j) expected[r * 5 + static_cast<std::size_t>(idx[r * 4 + j])] += u[r * 4 + j];
    const auto got = scattered.to(DType::Float64).to_vector<double>();
    for (std::size_t i = 0; i < 30; ++i) CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-6));
  }
  // int32 gathers too; repeated indices in one row add up in scatter_add_last.
  Tensor ints = from_vector(std::vector<std::int32_t>{10, 11, 12, 20, 21, 22}, {2, 3});
  Tensor index = from_vector(std::vector<std::int32_t>{2, 2, 0, 1}, {2, 2});
  CHECK(kernels::gather_last(ints, index).to_vector<std::int32_t>() == std::vector<std::int32_t>{12, 12, 20, 21});
  Tensor ones2 = from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2});
  CHECK(kernels::scatter_add_last(ones2, index, 3).to_vector<double>() == std::vector<double>{0, 0, 3, 3, 4, 0});
  // Large enough for the parallel path.
  Tensor big = uniform({2000, 32}, -1.0, 1.0, gen);
  Tensor big_index = random_index({2000, 20}, 32, gen);
  const auto bs = big.to_vector<float>();
  const auto bi = big_index.to_vector<std::int32_t>();
  const auto bg = kernels::gather_last(big, big_index).to_vector<float>();
  bool all_equal = true;
  for (std::size_t r = 0; r < 2000; ++r)
    for (std::size_t j = 0; j < 20; ++j)
      all_equal = all_equal && bg[r * 20 + j] == bs[r * 32 + static_cast<std::size_t>(bi[r * 20 + j])];
  CHECK(all_equal);
}

TEST_CASE("embedding looks rows up and embedding_backward sums them back") {
  Generator gen(5);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor weight = uniform({6, 4}, -1.0, 1.0, gen, dtype);
    Tensor ids = random_index({2, 5}, 6, gen);
    Tensor out = kernels::embedding(weight, ids);
    REQUIRE(out.shape() == Shape{2, 5, 4});
    const auto w = weight.to(DType::Float64).to_vector<double>();
    const auto o = out.to(DType::Float64).to_vector<double>();
    const auto idx = ids.to_vector<std::int32_t>();
    for (std::size_t t = 0; t < 10; ++t)
      for (std::size_t c = 0; c < 4; ++c) CHECK(o[t * 4 + c] == w[static_cast<std::size_t>(idx[t]) * 4 + c]);

    Tensor dy = uniform({2, 5, 4}, -1.0, 1.0, gen, DType::Float64);
    Tensor dw = kernels::embedding_backward(dy, ids, 6);
    REQUIRE(dw.shape() == Shape{6, 4});
    CHECK(dw.to_vector<double>() == naive_scatter_rows(dy.to_vector<double>(), idx, 4, 6));
  }
  // 0-d ids give one row.
  Tensor weight = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor one = kernels::embedding(weight, from_vector(std::vector<std::int32_t>{1}, {}));
  CHECK(one.shape() == Shape{2});
  CHECK(one.to_vector<float>() == std::vector<float>{3, 4});
}

TEST_CASE("index ops reject bad arguments with the op's name") {
  Tensor src = zeros({5, 3});
  Tensor idx = from_vector(std::vector<std::int32_t>{0, 4, 2}, {3});
  Tensor negative = from_vector(std::vector<std::int32_t>{0, -1, 2}, {3});
  Tensor too_big = from_vector(std::vector<std::int32_t>{0, 5, 2}, {3});
  Tensor float_idx = zeros({3});
  Tensor undefined;

  CHECK_THROWS_WITH_AS(kernels::index_select(src, negative), doctest::Contains("index_select"), Error);
  CHECK_THROWS_WITH_AS(kernels::index_select(src, too_big), doctest::Contains("index_select"), Error);
  CHECK_THROWS_WITH_AS(kernels::index_select(src, float_idx), doctest::Contains("index_select"), Error);
  CHECK_THROWS_WITH_AS(kernels::index_select(src, idx.reshape({3, 1})), doctest::Contains("index_select"), Error);
  CHECK_THROWS_WITH_AS(kernels::index_select(undefined, idx), doctest::Contains("index_select"), Error);
  CHECK_THROWS_WITH_AS(kernels::index_select(zeros({}), idx), doctest::Contains("index_select"), Error);
  CHECK_THROWS_WITH_AS(kernels::index_select(zeros({0, 3}), idx), doctest::Contains("index_select"), Error);

  CHECK_THROWS_WITH_AS(kernels::scatter_add_rows(zeros({3, 2}), negative, 5), doctest::Contains("scatter_add_rows"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::scatter_add_rows(zeros({3, 2}), idx, 4), doctest::Contains("scatter_add_rows"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::scatter_add_rows(zeros({4, 2}), idx, 5), doctest::Contains("scatter_add_rows"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::scatter_add_rows(zeros({3, 2}, DType::Int32), idx, 5),
                       doctest::Contains("scatter_add_rows"), Error);
  CHECK_THROWS_WITH_AS(kernels::scatter_add_rows(zeros({3, 2}), idx, -1), doctest::Contains("scatter_add_rows"),
                       Error);

  Tensor idx2 = from_vector(std::vector<std::int32_t>{0, 2, 1, 1}, {2, 2});
  CHECK_THROWS_WITH_AS(kernels::gather_last(zeros({2, 2}), idx2), doctest::Contains("gather_last"), Error);
  CHECK_THROWS_WITH_AS(kernels::gather_last(zeros({3, 3}), idx2), doctest::Contains("gather_last"), Error);
  CHECK_THROWS_WITH_AS(kernels::gather_last(zeros({2, 3}), idx2.reshape({4})), doctest::Contains("gather_last"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::gather_last(zeros({2, 3}), zeros({2, 2})), doctest::Contains("gather_last"), Error);
  CHECK_THROWS_WITH_AS(kernels::gather_last(zeros({2, 3}), negative.slice(0, 2).reshape({2, 1})),
                       doctest::Contains("gather_last"), Error);
  CHECK_THROWS_WITH_AS(kernels::scatter_add_last(zeros({2, 2}), idx2, 2), doctest::Contains("scatter_add_last"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::scatter_add_last(zeros({2, 3}), idx2, 3), doctest::Contains("scatter_add_last"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::scatter_add_last(zeros({2, 2}), idx2, -1), doctest::Contains("scatter_add_last"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::scatter_add_last(zeros({2, 2}, DType::Int32), idx2, 3),
                       doctest::Contains("scatter_add_last"), Error);

  CHECK_THROWS_WITH_AS(kernels::embedding(zeros({5}), idx), doctest::Contains("embedding"), Error);
  CHECK_THROWS_WITH_AS(kernels::embedding(src, too_big), doctest::Contains("embedding"), Error);
  CHECK_THROWS_WITH_AS(kernels::embedding(src, negative), doctest::Contains("embedding"), Error);
  CHECK_THROWS_WITH_AS(kernels::embedding(src, float_idx), doctest::Contains("embedding"), Error);
  CHECK_THROWS_WITH_AS(kernels::embedding_backward(zeros({4, 3}), idx, 5), doctest::Contains("embedding_backward"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::embedding_backward(zeros({3, 3}), too_big, 5),
                       doctest::Contains("embedding_backward"), Error);
  CHECK_THROWS_WITH_AS(kernels::embedding_backward(zeros({3, 3}), negative, 5),
                       doctest::Contains("embedding_backward"), Error);
  CHECK_THROWS_WITH_AS(kernels::embedding_backward(zeros({3, 3}, DType::Int32), idx, 5),
                       doctest::Contains("embedding_backward"), Error);
}
