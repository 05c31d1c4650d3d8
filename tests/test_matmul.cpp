// tests/test_matmul.cpp — matrix products against a naive triple loop, and their argument checks.
#include <doctest/doctest.h>

#include <cmath>

#include "core/factories.h"
#include "core/kernels.h"
#include "core/parallel.h"

using namespace moelab;

namespace {

// out[b, i, j] = sum_k op(a)[b, i, k] * op(b)[b, k, j], in double.
std::vector<double> naive_matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const bool batched = a.rank() == 3;
  const Tensor a3 = batched ? a : a.reshape({1, a.size(0), a.size(1)});
  const Tensor b3 = batched ? b : b.reshape({1, b.size(0), b.size(1)});
  const std::vector<double> av = a3.to(DType::Float64).to_vector<double>(), bv = b3.to(DType::Float64).to_vector<double>();
  const std::int64_t batch = a3.size(0), m = ta ? a3.size(2) : a3.size(1), k = ta ? a3.size(1) : a3.size(2);
  const std::int64_t n = tb ? b3.size(1) : b3.size(2);
  std::vector<double> out(static_cast<std::size_t>(batch * m * n), 0.0);
  for (std::int64_t z = 0; z < batch; ++z)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          const double x = ta ? av[static_cast<std::size_t>(z * m * k + p * m + i)] : av[static_cast<std::size_t>(z * m * k + i * k + p)];
          const double y = tb ? bv[static_cast<std::size_t>(z * k * n + j * k + p)] : bv[static_cast<std::size_t>(z * k * n + p * n + j)];
          s += x * y;
        }
        out[static_cast<std::size_t>(z * m * n + i * n + j)] = s;
      }
  return out;
}

void check_close(const Tensor& got, const std::vector<double>& want, double tol) {
  const std::vector<double> g = got.to(DType::Float64).to_vector<double>();
  REQUIRE(g.size() == want.size());
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - want[i]));
  CHECK(worst <= tol);
}

}  // namespace

TEST_CASE("matmul matches a naive loop for every transpose, 2-d and batched, float32 and float64") {
  Generator gen(3);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const double tol = dtype == DType::Float32 ? 1e-4 : 1e-12;
    // Shapes chosen to cross the single-thread threshold and to leave ragged row blocks.
    for (auto [m, k, n] : {std::array<std::int64_t, 3>{3, 5, 7}, {1, 1, 1}, {67, 33, 45}, {130, 64, 9}}) {
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          CAPTURE(m);
          CAPTURE(ta);
          CAPTURE(tb);
          Tensor a = uniform(ta ? Shape{k, m} : Shape{m, k}, -1, 1, gen, dtype);
          Tensor b = uniform(tb ? Shape{n, k} : Shape{k, n}, -1, 1, gen, dtype);
          Tensor c = kernels::matmul(a, b, ta, tb);
          CHECK(c.shape() == Shape{m, n});
          check_close(c, naive_matmul(a, b, ta, tb), tol);
          // Batched: 1 batch (row-block path) and 5 batches (batch-parallel path).
          for (std::int64_t batch : {1, 5}) {
            Tensor a3 = uniform(ta ? Shape{batch, k, m} : Shape{batch, m, k}, -1, 1, gen, dtype);
            Tensor b3 = uniform(tb ? Shape{batch, n, k} : Shape{batch, k, n}, -1, 1, gen, dtype);
            Tensor c3 = kernels::matmul(a3, b3, ta, tb);
            CHECK(c3.shape() == Shape{batch, m, n});
            check_close(c3, naive_matmul(a3, b3, ta, tb), tol);
          }
        }
    }
  }
}

TEST_CASE("float32 products spanning several k slices and column blocks of the blocked GEMM") {
  // k = 600 crosses two slice boundaries (KC = 256: the accumulate path), n = 1100 crosses a
  // column-block boundary (NC = 1024), and m = 37 leaves a ragged last row panel.
  Generator gen(5);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      Tensor a = uniform(ta ? Shape{600, 37} : Shape{37, 600}, -1, 1, gen);
      Tensor b = uniform(tb ? Shape{1100, 600} : Shape{600, 1100}, -1, 1, gen);
      check_close(kernels::matmul(a, b, ta, tb), naive_matmul(a, b, ta, tb), 1e-3);
    }
}

TEST_CASE("matmul is bitwise repeatable and bitwise the same for 1, 2 and 3 threads") {
  Generator gen(4);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor a = uniform({300, 70}, -1, 1, gen, dtype), b = uniform({70, 50}, -1, 1, gen, dtype);
    Tensor a3 = uniform({4, 30, 20}, -1, 1, gen, dtype), b3 = uniform({4, 20, 10}, -1, 1, gen, dtype);
    const int threads = num_threads();
    set_num_threads(2);
    const std::vector<double> first = kernels::matmul(a, b).to(DType::Float64).to_vector<double>();
    const std::vector<double> first3 = kernels::matmul(a3, b3).to(DType::Float64).to_vector<double>();
    CHECK(kernels::matmul(a, b).to(DType::Float64).to_vector<double>() == first);
    // float32 runs our GEMM, which sums each element in one fixed order whatever the thread
    // count; float64 runs Eigen's, which only promises run-to-run repeatability.
    if (dtype == DType::Float32)
      for (int t : {1, 3}) {
        set_num_threads(t);
        CHECK(kernels::matmul(a, b).to(DType::Float64).to_vector<double>() == first);
        CHECK(kernels::matmul(a3, b3).to(DType::Float64).to_vector<double>() == first3);
      }
    set_num_threads(threads);
  }
}

TEST_CASE("matmul with an empty inner dimension gives zeros; empty outer dimensions give empty results") {
  CHECK(kernels::matmul(zeros({3, 0}), zeros({0, 4})).to_vector<float>() == std::vector<float>(12, 0.0f));
  CHECK(kernels::matmul(zeros({0, 3}), zeros({3, 4})).shape() == Shape{0, 4});
}

TEST_CASE("matmul rejects bad operands with moelab::Error naming it") {
  CHECK_THROWS_WITH_AS(kernels::matmul(zeros({2, 3}), zeros({4, 5})), doctest::Contains("matmul"), Error);
  CHECK_THROWS_WITH_AS(kernels::matmul(zeros({2, 3}), zeros({2, 5}), true, true), doctest::Contains("inner"), Error);
  CHECK_THROWS_WITH_AS(kernels::matmul(zeros({2, 3}), zeros({3, 5}, DType::Float64)), doctest::Contains("matmul"), Error);
  CHECK_THROWS_WITH_AS(kernels::matmul(zeros({2, 3}, DType::Int32), zeros({3, 5}, DType::Int32)),
                       doctest::Contains("matmul"), Error);
  CHECK_THROWS_WITH_AS(kernels::matmul(zeros({2, 2, 3}), zeros({3, 3, 5})), doctest::Contains("batch"), Error);
  CHECK_THROWS_WITH_AS(kernels::matmul(zeros({2, 3}), zeros({1, 3, 5})), doctest::Contains("matmul"), Error);
  CHECK_THROWS_WITH_AS(kernels::matmul(zeros({6}), zeros({6})), doctest::Contains("matmul"), Error);
  CHECK_THROWS_WITH_AS(kernels::matmul(Tensor(), zeros({3, 5})), doctest::Contains("matmul"), Error);
}
