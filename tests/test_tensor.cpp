// tests/test_tensor.cpp — Tensor handles, views, copies, factories and the random generator.
#include <doctest/doctest.h>

#include <cmath>

#include "core/backend.h"
#include "core/factories.h"
#include "core/kernels.h"

using namespace moelab;

TEST_CASE("reshape and slice are views; clone is a copy") {
  Tensor x = arange(0, 12, 1, DType::Float32).reshape({3, 4});
  Tensor r = x.reshape({2, -1});
  CHECK(r.shape() == Shape{2, 6});
  CHECK(r.shares_storage_with(x));
  Tensor s = x.slice(1, 2);
  CHECK(s.shape() == Shape{2, 4});
  CHECK(s.to_vector<float>()[0] == 4.0f);
  Tensor c = x.clone();
  CHECK_FALSE(c.shares_storage_with(x));
  c.data<float>()[0] = 42.0f;
  CHECK(x.data<float>()[0] == 0.0f);
}

TEST_CASE("bad reshapes, slices and typed access throw moelab::Error naming the op") {
  Tensor x = zeros({3, 4});
  CHECK_THROWS_WITH_AS(x.reshape({5, 2}), doctest::Contains("reshape"), Error);
  CHECK_THROWS_WITH_AS(x.reshape({-1, -1}), doctest::Contains("reshape"), Error);
  CHECK_THROWS_WITH_AS(x.slice(2, 2), doctest::Contains("slice"), Error);
  CHECK_THROWS_WITH_AS(x.data<std::int32_t>(), doctest::Contains("Tensor::data"), Error);
  CHECK_THROWS_WITH_AS(x.item<float>(), doctest::Contains("item"), Error);
  CHECK_THROWS_AS(Tensor::empty({2, -3}), Error);
  CHECK_THROWS_WITH_AS(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), doctest::Contains("from_vector"), Error);
  Tensor undefined;
  CHECK_THROWS_WITH_AS(undefined.clone(), doctest::Contains("clone"), Error);
}

TEST_CASE("item and to_vector read any dtype as the type asked for, converting as to(dtype) does") {
  const Tensor f64 = from_vector(std::vector<double>{0.1, 2.5, -3.0}, {3});
  CHECK(f64.to_vector<float>() == std::vector<float>{0.1f, 2.5f, -3.0f});  // rounded to nearest float
  CHECK(f64.to_vector<double>() == std::vector<double>{0.1, 2.5, -3.0});
  const Tensor f32 = from_vector(std::vector<float>{0.1f}, {});
  CHECK(f32.item<double>() == static_cast<double>(0.1f));                // exact widening
  const Tensor ids = from_vector(std::vector<std::int32_t>{7, -2}, {2});
  CHECK(ids.to_vector<double>() == std::vector<double>{7.0, -2.0});
  CHECK(ids.to_vector<float>() == std::vector<float>{7.0f, -2.0f});
  CHECK(from_vector(std::vector<std::int32_t>{42}, {}).item<float>() == 42.0f);
  CHECK(from_vector(std::vector<float>{3.0f, -4.0f}, {2}).to_vector<std::int32_t>() == std::vector<std::int32_t>{3, -4});
}

TEST_CASE("factories") {
  CHECK(ones({2, 2}).to_vector<float>() == std::vector<float>{1, 1, 1, 1});
  CHECK(full({3}, 2.5, DType::Float64).to_vector<double>() == std::vector<double>{2.5, 2.5, 2.5});
  CHECK(arange(0, 5).to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, 2, 3, 4});
  CHECK(arange(5, 0, -2).to_vector<std::int32_t>() == std::vector<std::int32_t>{5, 3, 1});
  CHECK(zeros({0, 3}).numel() == 0);
  CHECK(Tensor::empty({}).numel() == 1);
  CHECK(from_vector(std::vector<std::int32_t>{7}, {}).item<std::int32_t>() == 7);
  // A vector of doubles is float64 unless a dtype is asked for.
  CHECK(from_vector(std::vector<double>{0.5}, {1}).dtype() == DType::Float64);
  const Tensor f32 = from_vector(std::vector<double>{0.5, 1.1}, {2}, DType::Float32);
  CHECK(f32.dtype() == DType::Float32);
  CHECK(f32.to_vector<float>() == std::vector<float>{0.5f, 1.1f});
  CHECK(from_vector(std::vector<double>{3, -4}, {2}, DType::Int32).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{3, -4});
  CHECK_THROWS_WITH_AS(from_vector(std::vector<double>{1, 2.5}, {2}, DType::Int32), doctest::Contains("value 1"),
                       Error);
  CHECK_THROWS_AS(from_vector(std::vector<double>{1, 2}, {3}, DType::Float32), Error);
}

TEST_CASE("cast converts element types") {
  Tensor x = from_vector(std::vector<float>{1.5f, -2.5f}, {2});
  CHECK(x.to(DType::Float64).to_vector<double>() == std::vector<double>{1.5, -2.5});
  CHECK(x.to(DType::Int32).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, -2});
}

TEST_CASE("the generator is deterministic, restorable and well spread") {
  Generator g1(123), g2(123), g3(124);
  Tensor a = uniform({1000}, -1, 1, g1), b = uniform({1000}, -1, 1, g2), c = uniform({1000}, -1, 1, g3);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  CHECK(a.to_vector<float>() != c.to_vector<float>());
  // Restoring (seed, counter) in the middle of a 4-word block continues the same stream.
  Generator g(7);
  g.next_u32();
  const std::uint64_t seed = g.seed(), counter = g.counter();
  std::vector<std::uint32_t> first;
  for (int i = 0; i < 9; ++i) first.push_back(g.next_u32());
  Generator h(0);
  h.set_state(seed, counter);
  for (int i = 0; i < 9; ++i) CHECK(h.next_u32() == first[static_cast<std::size_t>(i)]);
  // Moments of normal(0, 2) over 20000 draws: mean within 0.05, std within 0.05.
  Generator gn(5);
  std::vector<double> v = normal({20000}, 0.0, 2.0, gn, DType::Float64).to_vector<double>();
  double mean = 0, sq = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) sq += (x - mean) * (x - mean);
  CHECK(std::abs(mean) < 0.05);
  CHECK(std::abs(std::sqrt(sq / static_cast<double>(v.size())) - 2.0) < 0.05);
  // Uniform values stay in [low, high).
  for (float x : a.to_vector<float>()) CHECK((x >= -1.0f && x < 1.0f));
  // next_below covers its range without bias toward 0.
  Generator gb(9);
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 3000; ++i) counts[gb.next_below(3)]++;
  for (int n : counts) CHECK((n > 900 && n < 1100));
}

TEST_CASE("philox4x32-10 matches the published known-answer vector") {
  // Random123 kat_vectors: philox4x32 10 rounds, counter = key = 0.
  auto r = philox4x32({0, 0, 0, 0}, {0, 0});
  CHECK(r[0] == 0x6627e8d5u);
  CHECK(r[1] == 0xe169c58du);
  CHECK(r[2] == 0xbc57ac4cu);
  CHECK(r[3] == 0x9b00dbd8u);
}

TEST_CASE("cuda tensors fail clearly when no CUDA backend is usable") {
  if (cuda_available()) {
    MESSAGE("a GPU is present; this check is for machines without one");
    return;
  }
  CHECK_THROWS_WITH_AS(zeros({2}, DType::Float32, Device::cuda()), doctest::Contains("cuda"), Error);
}
