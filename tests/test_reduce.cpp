// tests/test_reduce.cpp — sum, mean and max over everything or one axis.
//
// Compared with naive double-precision loops over x seen as [outer, n, inner], on every axis of
// 3-d inputs (negative axes and keepdim included), in float32 and float64; plus the accuracy and
// thread-count independence that the fixed-order double accumulation promises.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/factories.h"
#include "core/kernels.h"
#include "core/parallel.h"
#include "tests/test_util.h"

using namespace moelab;
using moelab::testing::max_error;
using moelab::testing::to_doubles;

namespace {

double tolerance(DType dtype) { return dtype == DType::Float32 ? 1e-6 : 1e-13; }

// x seen as [outer, n, inner] around `axis` (already non-negative).
struct Split {
  std::int64_t outer, n, inner;
};
Split split_at(const Shape& s, int axis) { return {s.outer(axis), s[axis], s.inner(axis)}; }

std::vector<double> sum_ref(const std::vector<double>& x, Split d) {
  std::vector<double> out(static_cast<std::size_t>(d.outer * d.inner), 0.0);
  for (std::int64_t o = 0; o < d.outer; ++o)
    for (std::int64_t k = 0; k < d.n; ++k)
      for (std::int64_t c = 0; c < d.inner; ++c)
        out[static_cast<std::size_t>(o * d.inner + c)] += x[static_cast<std::size_t>((o * d.n + k) * d.inner + c)];
  return out;
}

// The first maximum along the axis, and its position.
void max_ref(const std::vector<double>& x, Split d, std::vector<double>& values, std::vector<std::int32_t>& indices) {
  values.assign(static_cast<std::size_t>(d.outer * d.inner), 0.0);
  indices.assign(values.size(), 0);
  for (std::int64_t o = 0; o < d.outer; ++o)
    for (std::int64_t c = 0; c < d.inner; ++c) {
      const std::size_t out = static_cast<std::size_t>(o * d.inner + c);
      for (std::int64_t k = 0; k < d.n; ++k) {
        const double v = x[static_cast<std::size_t>((o * d.n + k) * d.inner + c)];
        if (k == 0 || v > values[out]) {
          values[out] = v;
          indices[out] = static_cast<std::int32_t>(k);
        }
      }
    }
}

Shape reduced(const Shape& s, int axis, bool keepdim) {
  std::vector<std::int64_t> sizes = s.sizes();
  if (keepdim)
    sizes[static_cast<std::size_t>(axis)] = 1;
  else
    sizes.erase(sizes.begin() + axis);
  return Shape(sizes);
}

}  // namespace

TEST_CASE("sum and mean over everything") {
  Generator gen(11);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& shape : {Shape{7}, Shape{3, 4, 5}, Shape{1000, 131}}) {
      Tensor x = normal(shape, 0.5, 1.0, gen, dtype);
      std::vector<double> xv = to_doubles(x);
      const double want = sum_ref(xv, {1, x.numel(), 1})[0];
      Tensor s = kernels::sum(x);
      CHECK(s.shape() == Shape{});
      CHECK(s.dtype() == dtype);
      CHECK(max_error(s, {want}) <= tolerance(dtype));
      CHECK(max_error(kernels::mean(x), {want / static_cast<double>(x.numel())}) <= tolerance(dtype));
    }
  }
}

TEST_CASE("sum, mean and max along every axis of a 3-d tensor, keepdim and negative axes") {
  Generator gen(12);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& shape : {Shape{3, 5, 4}, Shape{2, 1, 6}, Shape{40, 300, 3}}) {
      Tensor x = normal(shape, 0.0, 2.0, gen, dtype);
      std::vector<double> xv = to_doubles(x);
      for (int axis = -3; axis < 3; ++axis) {
        const int ax = axis < 0 ? axis + 3 : axis;
        const Split d = split_at(shape, ax);
        std::vector<double> sums = sum_ref(xv, d), means = sums, values;
        for (double& m : means) m /= static_cast<double>(d.n);
        std::vector<std::int32_t> indices;
        max_ref(xv, d, values, indices);
        for (bool keepdim : {false, true}) {
          INFO(dtype, " ", shape, " axis ", axis, " keepdim ", keepdim);
          Tensor s = kernels::sum(x, axis, keepdim);
          CHECK(s.shape() == reduced(shape, ax, keepdim));
          CHECK(max_error(s, sums) <= tolerance(dtype));
          Tensor m = kernels::mean(x, axis, keepdim);
          CHECK(m.shape() == reduced(shape, ax, keepdim));
          CHECK(max_error(m, means) <= tolerance(dtype));
          kernels::MaxResult r = kernels::max(x, axis, keepdim);
          CHECK(r.values.shape() == reduced(shape, ax, keepdim));
          CHECK(r.indices.shape() == reduced(shape, ax, keepdim));
          CHECK(r.indices.dtype() == DType::Int32);
          CHECK(max_error(r.values, values) == 0.0);
          CHECK(r.indices.to_vector<std::int32_t>() == indices);
        }
      }
      CHECK(max_error(kernels::max(x), {*std::max_element(xv.begin(), xv.end())}) == 0.0);
    }
  }
}

TEST_CASE("max breaks ties toward the first position") {
  Generator gen(13);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    // Small integers: nearly every slice holds its maximum more than once.
    std::vector<double> v(4 * 9 * 5);
    for (double& e : v) e = static_cast<double>(gen.next_below(3));
    Tensor x = from_vector(v, {4, 9, 5}).to(dtype);
    for (int axis : {0, 1, 2}) {
      std::vector<double> values;
      std::vector<std::int32_t> indices;
      max_ref(v, split_at(x.shape(), axis), values, indices);
      kernels::MaxResult r = kernels::max(x, axis);
      CHECK(r.indices.to_vector<std::int32_t>() == indices);
      CHECK(max_error(r.values, values) == 0.0);
    }
  }
  Tensor x = from_vector(std::vector<float>{1, 7, 3, 7, 7}, {5});
  CHECK(kernels::max(x, 0).indices.item<std::int32_t>() == 1);
}

TEST_CASE("max lets NaN through") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = from_vector(std::vector<float>{1, nan, 3, nan}, {4});
  CHECK(std::isnan(kernels::max(x).item<float>()));
  kernels::MaxResult r = kernels::max(x, -1);
  CHECK(std::isnan(r.values.item<float>()));
  CHECK(r.indices.item<std::int32_t>() == 1);
  // Along a strided axis too: x: [3, 2], column 0 holds a NaN in row 1.
  Tensor m = from_vector(std::vector<float>{5, 1, nan, 2, 9, 2}, {3, 2});
  kernels::MaxResult c = kernels::max(m, 0);
  CHECK(std::isnan(c.values.to_vector<float>()[0]));
  CHECK(c.values.to_vector<float>()[1] == 2.0f);
  CHECK(c.indices.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 1});
}

TEST_CASE("sums are accurate: double accumulation, pairwise order") {
  // float32: 1e8 followed by 64 ones. A float accumulator stays at 1e8 (its spacing there is 8);
  // a double one gets 100000064, which float32 represents exactly.
  std::vector<float> v(65, 1.0f);
  v[0] = 1e8f;
  Tensor x = from_vector(v, {65});
  CHECK(kernels::sum(x).item<float>() == 100000064.0f);
  CHECK(kernels::sum(x.reshape({65, 1}), 0).item<float>() == 100000064.0f);  // the strided path too
  // float64: a million times 0.1. A straight loop is off by about 1.3e-6; pairwise by < 1e-9.
  Tensor tenths = full({1000000}, 0.1, DType::Float64);
  CHECK(std::abs(kernels::sum(tenths).item<double>() - 100000.0) < 1e-9);
  CHECK(std::abs(kernels::sum(tenths.reshape({10, 100000}), 1).to_vector<double>()[3] - 10000.0) < 1e-10);
}

TEST_CASE("reductions do not depend on the thread count") {
  Generator gen(14);
  Tensor x = normal({300001}, 0, 1, gen);
  Tensor m = normal({64, 700, 5}, 0, 1, gen);
  const int threads = num_threads();
  auto run = [&] {
    std::vector<float> out = kernels::sum(x).to_vector<float>();
    for (int axis : {0, 1, 2})
      for (float f : kernels::sum(m, axis).to_vector<float>()) out.push_back(f);
    for (float f : kernels::max(m, 1).values.to_vector<float>()) out.push_back(f);
    return out;
  };
  set_num_threads(1);
  std::vector<float> one = run();
  set_num_threads(3);
  std::vector<float> three = run();
  set_num_threads(threads);
  CHECK(one == three);
}

TEST_CASE("empty inputs: sums are zero, means and maxima are errors") {
  CHECK(kernels::sum(zeros({0, 3})).item<float>() == 0.0f);
  Tensor s = kernels::sum(zeros({4, 0}), 1);
  CHECK(s.shape() == Shape{4});
  CHECK(s.to_vector<float>() == std::vector<float>{0, 0, 0, 0});
  CHECK(kernels::sum(zeros({0, 3}), 1).shape() == Shape{0});
  CHECK(kernels::max(zeros({0, 3}), 1).values.shape() == Shape{0});  // nothing to reduce, nothing computed
  CHECK_THROWS_WITH_AS(kernels::mean(zeros({0, 3})), doctest::Contains("mean"), Error);
  CHECK_THROWS_WITH_AS(kernels::mean(zeros({4, 0}), 1), doctest::Contains("mean"), Error);
  CHECK_THROWS_WITH_AS(kernels::max(zeros({0})), doctest::Contains("max"), Error);
  CHECK_THROWS_WITH_AS(kernels::max(zeros({4, 0}), -1), doctest::Contains("max"), Error);
}

TEST_CASE("reductions reject bad arguments, naming the op") {
  Tensor x = ones({2, 3, 4}), undefined;
  Tensor ints = arange(0, 6);
  CHECK_THROWS_WITH_AS(kernels::sum(x, 3), doctest::Contains("sum"), Error);
  CHECK_THROWS_WITH_AS(kernels::sum(x, -4), doctest::Contains("[2, 3, 4]"), Error);
  CHECK_THROWS_WITH_AS(kernels::mean(x, 5), doctest::Contains("mean"), Error);
  CHECK_THROWS_WITH_AS(kernels::max(x, -4), doctest::Contains("max"), Error);
  CHECK_THROWS_WITH_AS(kernels::sum(ones({}), 0), doctest::Contains("sum"), Error);
  CHECK_THROWS_WITH_AS(kernels::sum(ints), doctest::Contains("sum"), Error);
  CHECK_THROWS_WITH_AS(kernels::sum(ints, 0), doctest::Contains("sum"), Error);
  CHECK_THROWS_WITH_AS(kernels::mean(ints), doctest::Contains("mean"), Error);
  CHECK_THROWS_WITH_AS(kernels::max(ints), doctest::Contains("max"), Error);
  CHECK_THROWS_WITH_AS(kernels::max(ints, 0), doctest::Contains("max"), Error);
  CHECK_THROWS_WITH_AS(kernels::sum(undefined), doctest::Contains("sum"), Error);
  CHECK_THROWS_WITH_AS(kernels::max(undefined, 0), doctest::Contains("max"), Error);
}
