// tests/test_random_fill.cpp — kernels::fill_uniform / fill_normal on the CPU: the same numbers as
// the factories, the Generator's counter advanced past them, sane statistics, argument checks.
// The CUDA fill against the CPU fill is in tests/test_cuda_parity.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "core/factories.h"
#include "core/kernels.h"
#include "core/random.h"

using namespace moelab;

namespace {

template <class T>
void check_uniform_matches_factory(DType dtype) {
  Generator for_factory(1234), for_fill(1234);
  for_factory.set_state(1234, 5);  // an unaligned counter: the fill must continue mid-block
  for_fill.set_state(1234, 5);
  const Tensor want = uniform({7, 13}, -0.5, 2.0, for_factory, dtype);
  Tensor got = Tensor::empty({7, 13}, dtype);
  kernels::fill_uniform(got, -0.5, 2.0, for_fill);
  CHECK(got.to_vector<T>() == want.to_vector<T>());
  CHECK(for_fill.counter() == for_factory.counter());
  CHECK(for_fill.counter() == 5 + 7 * 13);
  CHECK(for_fill.next_u32() == for_factory.next_u32());  // the streams continue identically
}

template <class T>
void check_normal_matches_factory(DType dtype) {
  Generator for_factory(99), for_fill(99);
  const Tensor want = normal({3, 5, 11}, 1.5, 0.25, for_factory, dtype);  // odd numel: 165
  Tensor got = Tensor::empty({3, 5, 11}, dtype);
  kernels::fill_normal(got, 1.5, 0.25, for_fill);
  CHECK(got.to_vector<T>() == want.to_vector<T>());
  CHECK(for_fill.counter() == for_factory.counter());
  CHECK(for_fill.counter() == 2 * 165);
}

}  // namespace

TEST_CASE("fill_uniform on the CPU draws exactly what uniform() draws") {
  check_uniform_matches_factory<float>(DType::Float32);
  check_uniform_matches_factory<double>(DType::Float64);
}

TEST_CASE("fill_normal on the CPU draws exactly what normal() draws") {
  check_normal_matches_factory<float>(DType::Float32);
  check_normal_matches_factory<double>(DType::Float64);
}

TEST_CASE("consecutive fills never repeat numbers") {
  Generator gen(7);
  Tensor a = Tensor::empty({1000}), b = Tensor::empty({1000});
  kernels::fill_uniform(a, 0.0, 1.0, gen);
  kernels::fill_uniform(b, 0.0, 1.0, gen);
  const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  int equal = 0;
  for (std::size_t i = 0; i < va.size(); ++i) equal += va[i] == vb[i];
  CHECK(equal < 5);  // 24-bit uniforms: a chance coincidence or two at most
}

TEST_CASE("fill statistics: range, mean and variance") {
  Generator gen(2024);
  const std::int64_t n = 200000;
  Tensor u = Tensor::empty({n}, DType::Float64);
  kernels::fill_uniform(u, -1.0, 3.0, gen);
  const std::vector<double> vu = u.to_vector<double>();
  double mean = 0, var = 0;
  for (double v : vu) mean += v;
  mean /= n;
  for (double v : vu) var += (v - mean) * (v - mean);
  var /= n;
  CHECK(*std::min_element(vu.begin(), vu.end()) >= -1.0);
  CHECK(*std::max_element(vu.begin(), vu.end()) < 3.0);
  CHECK(std::abs(mean - 1.0) < 0.02);          // sd of the mean: 4/sqrt(12 n) = 0.0026
  CHECK(std::abs(var - 16.0 / 12.0) < 0.02);   // 16/12 = 1.333

  Tensor z = Tensor::empty({n}, DType::Float64);
  kernels::fill_normal(z, 2.0, 3.0, gen);
  const std::vector<double> vz = z.to_vector<double>();
  mean = 0;
  var = 0;
  for (double v : vz) mean += v;
  mean /= n;
  for (double v : vz) var += (v - mean) * (v - mean);
  var /= n;
  CHECK(std::abs(mean - 2.0) < 0.04);  // sd of the mean: 3/sqrt(n) = 0.0067
  CHECK(std::abs(var - 9.0) < 0.2);    // sd of the variance: 9 sqrt(2/n) = 0.028
  std::int64_t within_one_sd = 0;
  for (double v : vz) within_one_sd += std::abs(v - 2.0) < 3.0;
  CHECK(std::abs(double(within_one_sd) / n - 0.6827) < 0.01);
}

TEST_CASE("random fills reject bad arguments") {
  Generator gen(1);
  Tensor ints = Tensor::empty({4}, DType::Int32);
  CHECK_THROWS_AS(kernels::fill_uniform(ints, 0.0, 1.0, gen), Error);
  CHECK_THROWS_AS(kernels::fill_normal(ints, 0.0, 1.0, gen), Error);
  Tensor x = Tensor::empty({4});
  CHECK_THROWS_AS(kernels::fill_uniform(x, 1.0, 0.0, gen), Error);
  CHECK_THROWS_AS(kernels::fill_normal(x, 0.0, -1.0, gen), Error);
  CHECK(gen.counter() == 0);  // nothing drawn by a rejected call
  Tensor empty = Tensor::empty({0, 3});
  kernels::fill_normal(empty, 0.0, 1.0, gen);
  CHECK(gen.counter() == 0);
}
