// tests/test_shape_ops.cpp — concat, split, narrow, transpose and permute against index
// arithmetic, for every dtype, plus their argument checks.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "core/factories.h"
#include "core/kernels.h"

using namespace moelab;

namespace {

constexpr DType kAllDTypes[] = {DType::Float32, DType::Float64, DType::Int32};

// Random values (integers in a wide range, exact in every dtype) of the given dtype.
Tensor random_tensor(const Shape& shape, DType dtype, Generator& gen) {
  return uniform(shape, -1.0e6, 1.0e6, gen, DType::Float64).to(DType::Int32).to(dtype);
}

std::vector<double> values(const Tensor& x) { return x.to(DType::Float64).to_vector<double>(); }

// Row-major flat position of a multi-index.
std::int64_t flat(const Shape& shape, const std::vector<std::int64_t>& at) {
  std::int64_t f = 0;
  for (int i = 0; i < shape.rank(); ++i) f = f * shape[i] + at[static_cast<std::size_t>(i)];
  return f;
}

// Calls fn(multi-index) for every element of shape, in row-major order.
template <class Fn>
void for_each_index(const Shape& shape, Fn fn) {
  std::vector<std::int64_t> at(static_cast<std::size_t>(shape.rank()), 0);
  for (std::int64_t n = 0; n < shape.numel(); ++n) {
    fn(at);
    for (int i = shape.rank() - 1; i >= 0; --i) {
      if (++at[static_cast<std::size_t>(i)] < shape[i]) break;
      at[static_cast<std::size_t>(i)] = 0;
    }
  }
}

// Checks out == x[..., start:start+len along axis, ...].
bool is_narrow_of(const Tensor& out, const Tensor& x, int axis, std::int64_t start) {
  const auto xv = values(x), ov = values(out);
  bool ok = true;
  for_each_index(out.shape(), [&](const std::vector<std::int64_t>& at) {
    std::vector<std::int64_t> src = at;
    src[static_cast<std::size_t>(axis)] += start;
    ok = ok && ov[static_cast<std::size_t>(flat(out.shape(), at))] == xv[static_cast<std::size_t>(flat(x.shape(), src))];
  });
  return ok;
}

// Checks out == permute(x, order) by index arithmetic: out[at] = x[src] with src[order[i]] = at[i].
bool is_permute_of(const Tensor& out, const Tensor& x, const std::vector<int>& order) {
  const auto xv = values(x), ov = values(out);
  bool ok = out.rank() == x.rank();
  for (int i = 0; ok && i < x.rank(); ++i) ok = out.size(i) == x.size(order[static_cast<std::size_t>(i)]);
  if (!ok) return false;
  for_each_index(out.shape(), [&](const std::vector<std::int64_t>& at) {
    std::vector<std::int64_t> src(at.size());
    for (std::size_t i = 0; i < at.size(); ++i) src[static_cast<std::size_t>(order[i])] = at[i];
    ok = ok && ov[static_cast<std::size_t>(flat(out.shape(), at))] == xv[static_cast<std::size_t>(flat(x.shape(), src))];
  });
  return ok;
}

}  // namespace

TEST_CASE("split then concat round-trips on every axis of a 3-d tensor, every dtype") {
  Generator gen(1);
  for (DType dtype : kAllDTypes) {
    Tensor x = random_tensor({3, 4, 5}, dtype, gen);
    for (int axis = 0; axis < 3; ++axis) {
      const std::int64_t n = x.size(axis);
      const std::vector<std::int64_t> sizes{1, 0, n - 2, 1};  // includes an empty piece
      std::vector<Tensor> pieces = kernels::split(x, sizes, axis);
      REQUIRE(pieces.size() == 4);
      std::int64_t start = 0;
      for (std::size_t i = 0; i < pieces.size(); ++i) {
        CHECK(pieces[i].size(axis) == sizes[i]);
        CHECK(pieces[i].dtype() == dtype);
        CHECK(is_narrow_of(pieces[i], x, axis, start));
        start += sizes[i];
      }
      Tensor back = kernels::concat(pieces, axis - 3);  // negative axis too
      CHECK(back.shape() == x.shape());
      CHECK(values(back) == values(x));
    }
  }
}

TEST_CASE("concat of different lengths places each input at its offset") {
  Generator gen(2);
  Tensor a = random_tensor({2, 3, 4}, DType::Float32, gen);
  Tensor b = random_tensor({2, 5, 4}, DType::Float32, gen);
  Tensor out = kernels::concat({a, b}, 1);
  REQUIRE(out.shape() == Shape{2, 8, 4});
  CHECK(is_narrow_of(kernels::narrow(out, 1, 0, 3), a, 1, 0));
  const auto av = values(a), bv = values(b), ov = values(out);
  bool ok = true;
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 8; ++j)
      for (std::size_t k = 0; k < 4; ++k) {
        const double expected = j < 3 ? av[(i * 3 + j) * 4 + k] : bv[(i * 5 + (j - 3)) * 4 + k];
        ok = ok && ov[(i * 8 + j) * 4 + k] == expected;
      }
  CHECK(ok);
  // A large concat (parallel copy path) still round-trips.
  Tensor big = random_tensor({64, 40, 30}, DType::Float64, gen);
  std::vector<Tensor> halves = kernels::split(big, {25, 15}, 1);
  CHECK(values(kernels::concat(halves, 1)) == values(big));
}

TEST_CASE("narrow copies a range of one axis") {
  Generator gen(3);
  for (DType dtype : kAllDTypes) {
    Tensor x = random_tensor({4, 6, 3}, dtype, gen);
    Tensor out = kernels::narrow(x, -2, 2, 3);
    CHECK(out.shape() == Shape{4, 3, 3});
    CHECK_FALSE(out.shares_storage_with(x));
    CHECK(is_narrow_of(out, x, 1, 2));
    CHECK(is_narrow_of(kernels::narrow(x, 0, 1, 3), x, 0, 1));
    CHECK(kernels::narrow(x, 2, 3, 0).shape() == Shape{4, 6, 0});
  }
}

TEST_CASE("permute of a 4-d tensor matches index arithmetic for all 24 orders, every dtype") {
  Generator gen(4);
  for (DType dtype : kAllDTypes) {
    Tensor x = random_tensor({2, 3, 4, 5}, dtype, gen);
    std::vector<int> order{0, 1, 2, 3};
    int count = 0;
    do {
      Tensor out = kernels::permute(x, order);
      CHECK(out.dtype() == dtype);
      CHECK(is_permute_of(out, x, order));
      ++count;
    } while (std::next_permutation(order.begin(), order.end()));
    CHECK(count == 24);
  }
  // Size-1 axes (which the kernel drops) and negative axes.
  Tensor y = random_tensor({3, 1, 4, 1}, DType::Float64, gen);
  CHECK(is_permute_of(kernels::permute(y, {-1, 2, 0, 1}), y, {3, 2, 0, 1}));
  // Large tensors take the parallel path.
  Tensor big = random_tensor({8, 64, 16, 8}, DType::Float32, gen);
  CHECK(is_permute_of(kernels::permute(big, {0, 2, 1, 3}), big, {0, 2, 1, 3}));
  CHECK(is_permute_of(kernels::permute(big, {3, 2, 1, 0}), big, {3, 2, 1, 0}));
  // Odd sizes: the chunks of rows start in the middle of every output axis, so each chunk's
  // first multi-index (by division) and the odometer's carries across axes are both exercised.
  Tensor odd = random_tensor({5, 37, 41, 9}, DType::Float32, gen);
  for (const std::vector<int>& order : {std::vector<int>{2, 0, 3, 1}, {3, 2, 1, 0}, {0, 2, 1, 3}, {1, 3, 0, 2}})
    CHECK(is_permute_of(kernels::permute(odd, order), odd, order));
  // 0-d: the empty order is a copy.
  Tensor scalar = full({}, 3.0);
  CHECK(kernels::permute(scalar, {}).item<float>() == 3.0f);
}

TEST_CASE("transpose swaps two axes") {
  Generator gen(5);
  Tensor x = random_tensor({2, 3, 4}, DType::Float64, gen);
  CHECK(is_permute_of(kernels::transpose(x), x, {0, 2, 1}));
  CHECK(is_permute_of(kernels::transpose(x, 0, 2), x, {2, 1, 0}));
  CHECK(is_permute_of(kernels::transpose(x, -3, 1), x, {1, 0, 2}));
  Tensor same = kernels::transpose(x, 1, 1);
  CHECK(values(same) == values(x));
  CHECK_FALSE(same.shares_storage_with(x));
  Tensor m = from_vector(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(kernels::transpose(m).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("shape ops reject bad arguments with the op's name") {
  Tensor x = zeros({2, 3, 4});
  CHECK_THROWS_WITH_AS(kernels::concat({}, 0), doctest::Contains("concat"), Error);
  CHECK_THROWS_WITH_AS(kernels::concat({x, zeros({2, 4, 4})}, 0), doctest::Contains("concat"), Error);
  CHECK_THROWS_WITH_AS(kernels::concat({x, zeros({2, 3})}, 0), doctest::Contains("concat"), Error);
  CHECK_THROWS_WITH_AS(kernels::concat({x, zeros({2, 3, 4}, DType::Float64)}, 0), doctest::Contains("concat"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::concat({x, x}, 3), doctest::Contains("concat"), Error);
  CHECK_THROWS_WITH_AS(kernels::concat({x, x}, -4), doctest::Contains("concat"), Error);
  CHECK_THROWS_WITH_AS(kernels::concat({x, Tensor()}, 0), doctest::Contains("concat"), Error);
  CHECK_THROWS_WITH_AS(kernels::concat({zeros({}), zeros({})}, 0), doctest::Contains("concat"), Error);

  CHECK_THROWS_WITH_AS(kernels::split(x, {1, 1}, 1), doctest::Contains("split"), Error);
  CHECK_THROWS_WITH_AS(kernels::split(x, {4, -1}, 1), doctest::Contains("split"), Error);
  CHECK_THROWS_WITH_AS(kernels::split(x, {1, 2}, 3), doctest::Contains("split"), Error);
  CHECK_THROWS_WITH_AS(kernels::split(zeros({}), {1}, 0), doctest::Contains("split"), Error);

  CHECK_THROWS_WITH_AS(kernels::narrow(x, 1, 2, 2), doctest::Contains("narrow"), Error);
  CHECK_THROWS_WITH_AS(kernels::narrow(x, 1, -1, 2), doctest::Contains("narrow"), Error);
  CHECK_THROWS_WITH_AS(kernels::narrow(x, 1, 0, -1), doctest::Contains("narrow"), Error);
  CHECK_THROWS_WITH_AS(kernels::narrow(x, 5, 0, 1), doctest::Contains("narrow"), Error);

  CHECK_THROWS_WITH_AS(kernels::permute(x, {0, 1}), doctest::Contains("permute"), Error);
  CHECK_THROWS_WITH_AS(kernels::permute(x, {0, 1, 1}), doctest::Contains("permute"), Error);
  CHECK_THROWS_WITH_AS(kernels::permute(x, {0, 1, -2}), doctest::Contains("permute"), Error);
  CHECK_THROWS_WITH_AS(kernels::permute(x, {0, 1, 3}), doctest::Contains("permute"), Error);
  CHECK_THROWS_WITH_AS(kernels::permute(Tensor(), {}), doctest::Contains("permute"), Error);

  CHECK_THROWS_WITH_AS(kernels::transpose(x, 0, 3), doctest::Contains("transpose"), Error);
  CHECK_THROWS_WITH_AS(kernels::transpose(zeros({5})), doctest::Contains("transpose"), Error);
}
