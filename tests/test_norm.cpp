// tests/test_norm.cpp — rmsnorm and layernorm: forward against a naive double-precision loop,
// backward against central finite differences of the forward in float64, float32 against
// float64, thread-count independence, and the argument checks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/factories.h"
#include "core/kernels.h"
#include "core/cpu/thread_count.h"
#include "core/parallel.h"
#include "tests/test_util.h"

using namespace moelab;
using moelab::testing::max_error;
using moelab::testing::to_doubles;

namespace {

constexpr double kEps = 1e-5;

struct Reference {
  std::vector<double> y, mean, rstd;
};

// Naive forward in double. layer == false: rmsnorm (b ignored).
Reference naive_norm(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                     std::size_t n, std::size_t d, bool layer) {
  Reference ref;
  for (std::size_t r = 0; r < n; ++r) {
    const double* row = x.data() + r * d;
    double mu = 0, sq = 0;
    if (layer) {
      for (std::size_t c = 0; c < d; ++c) mu += row[c];
      mu /= static_cast<double>(d);
    }
    for (std::size_t c = 0; c < d; ++c) sq += (row[c] - mu) * (row[c] - mu);
    const double rs = 1.0 / std::sqrt(sq / static_cast<double>(d) + kEps);
    ref.mean.push_back(mu);
    ref.rstd.push_back(rs);
    for (std::size_t c = 0; c < d; ++c) ref.y.push_back((row[c] - mu) * rs * w[c] + (layer ? b[c] : 0.0));
  }
  return ref;
}

// The forward of either norm on float64 host vectors, returning sum(y * probe): a scalar whose
// gradient with respect to y is `probe`, so its finite differences check a backward fed dy = probe.
double probe_loss(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                  const std::vector<double>& probe, const Shape& shape, bool layer) {
  const std::int64_t d = shape[shape.rank() - 1];
  Tensor xt = from_vector(x, shape), wt = from_vector(w, {d}), bt = from_vector(b, {d});
  const auto y = (layer ? kernels::layernorm(xt, wt, bt, kEps) : kernels::rmsnorm(xt, wt, kEps)).y.to_vector<double>();
  double loss = 0;
  for (std::size_t i = 0; i < y.size(); ++i) loss += y[i] * probe[i];
  return loss;
}

// Central differences of probe_loss with respect to every entry of `param` (one of x, w, b).
std::vector<double> numeric_grad(std::vector<double>& param, const std::vector<double>& x,
                                 const std::vector<double>& w, const std::vector<double>& b,
                                 const std::vector<double>& probe, const Shape& shape, bool layer) {
  const double h = 1e-6;
  std::vector<double> grad(param.size());
  for (std::size_t i = 0; i < param.size(); ++i) {
    const double saved = param[i];
    param[i] = saved + h;
    const double up = probe_loss(x, w, b, probe, shape, layer);
    param[i] = saved - h;
    const double down = probe_loss(x, w, b, probe, shape, layer);
    param[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

void check_backward_by_finite_differences(bool layer) {
  Generator gen(layer ? 11 : 12);
  const Shape shape{2, 3, 5};
  std::vector<double> x = uniform(shape, -2, 2, gen, DType::Float64).to_vector<double>();
  std::vector<double> w = uniform({5}, 0.5, 1.5, gen, DType::Float64).to_vector<double>();
  std::vector<double> b = uniform({5}, -1, 1, gen, DType::Float64).to_vector<double>();
  const std::vector<double> probe = uniform(shape, -1, 1, gen, DType::Float64).to_vector<double>();

  Tensor xt = from_vector(x, shape), wt = from_vector(w, {5}), bt = from_vector(b, {5}), dy = from_vector(probe, shape);
  kernels::NormGrads grads;
  if (layer) {
    kernels::NormResult fwd = kernels::layernorm(xt, wt, bt, kEps);
    grads = kernels::layernorm_backward(xt, wt, fwd.mean, fwd.rstd, dy);
  } else {
    kernels::NormResult fwd = kernels::rmsnorm(xt, wt, kEps);
    grads = kernels::rmsnorm_backward(xt, wt, fwd.rstd, dy);
  }
  REQUIRE(grads.dx.shape() == shape);
  CHECK(max_error(grads.dx.to_vector<double>(), numeric_grad(x, x, w, b, probe, shape, layer)) < 1e-7);
  CHECK(max_error(grads.dw.to_vector<double>(), numeric_grad(w, x, w, b, probe, shape, layer)) < 1e-7);
  if (layer) {
    CHECK(max_error(grads.db.to_vector<double>(), numeric_grad(b, x, w, b, probe, shape, layer)) < 1e-7);
  } else {
    CHECK_FALSE(grads.db.defined());
  }
}

}  // namespace

TEST_CASE("rmsnorm and layernorm forward match a naive double loop") {
  Generator gen(1);
  for (bool layer : {false, true}) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      Tensor x = uniform({4, 6, 33}, -3, 3, gen, dtype), w = uniform({33}, 0.5, 1.5, gen, dtype),
             b = uniform({33}, -1, 1, gen, dtype);
      kernels::NormResult got = layer ? kernels::layernorm(x, w, b, kEps) : kernels::rmsnorm(x, w, kEps);
      const Reference ref = naive_norm(to_doubles(x), to_doubles(w), to_doubles(b), 24, 33, layer);
      REQUIRE(got.y.shape() == x.shape());
      REQUIRE(got.rstd.shape() == Shape{24});
      const double tol = dtype == DType::Float32 ? 1e-5 : 1e-13;
      CHECK(max_error(to_doubles(got.y), ref.y) < tol);
      CHECK(max_error(to_doubles(got.rstd), ref.rstd) < tol);
      if (layer) {
        CHECK(max_error(to_doubles(got.mean), ref.mean) < tol);
      } else {
        CHECK_FALSE(got.mean.defined());
      }
    }
  }
}

TEST_CASE("layernorm stays accurate in float32 when the mean dwarfs the spread") {
  Generator gen(2);
  // Values near 1000 with a spread of 0.1: E[x^2] - E[x]^2 in float32 would lose every digit.
  Tensor x = uniform({8, 256}, 999.9, 1000.1, gen, DType::Float32), w = ones({256}), b = zeros({256});
  kernels::NormResult got = kernels::layernorm(x, w, b, kEps);
  const Reference ref = naive_norm(to_doubles(x), to_doubles(w), to_doubles(b), 8, 256, true);
  CHECK(max_error(to_doubles(got.y), ref.y) < 2e-3);
  CHECK(max_error(to_doubles(got.rstd), ref.rstd) < 1e-4);
}

TEST_CASE("rmsnorm_backward matches central finite differences in float64") { check_backward_by_finite_differences(false); }

TEST_CASE("layernorm_backward matches central finite differences in float64") { check_backward_by_finite_differences(true); }

TEST_CASE("norm backwards: float32 agrees with float64, and the thread count changes no bit") {
  Generator gen(3);
  // 1024 x 96 elements, three grains of the element loops (core/cpu/thread_count.h): with 4 threads
  // set, the parallel row pass and two column blocks for dw/db; with 1, one thread. The first
  // 512 x 96 fell below two grains, so both runs took one thread and compared nothing.
  Tensor x = uniform({1024, 96}, -2, 2, gen, DType::Float64), w = uniform({96}, 0.5, 1.5, gen, DType::Float64),
         b = uniform({96}, -1, 1, gen, DType::Float64), dy = uniform({1024, 96}, -1, 1, gen, DType::Float64);
  for (bool layer : {false, true}) {
    auto run = [&](DType dtype) {
      Tensor xd = x.to(dtype), wd = w.to(dtype), bd = b.to(dtype), dyd = dy.to(dtype);
      if (layer) {
        kernels::NormResult fwd = kernels::layernorm(xd, wd, bd, kEps);
        return kernels::layernorm_backward(xd, wd, fwd.mean, fwd.rstd, dyd);
      }
      kernels::NormResult fwd = kernels::rmsnorm(xd, wd, kEps);
      return kernels::rmsnorm_backward(xd, wd, fwd.rstd, dyd);
    };
    testing::ScopedThreads four(4);
    REQUIRE(cpu::element_threads(x.numel()) > 1);
    kernels::NormGrads g64 = run(DType::Float64), g32 = run(DType::Float32);
    CHECK(max_error(to_doubles(g32.dx), to_doubles(g64.dx)) < 1e-4);
    CHECK(max_error(to_doubles(g32.dw), to_doubles(g64.dw)) < 1e-4);
    if (layer) CHECK(max_error(to_doubles(g32.db), to_doubles(g64.db)) < 1e-4);

    set_num_threads(1);
    REQUIRE(cpu::element_threads(x.numel()) == 1);
    kernels::NormGrads single = run(DType::Float32), single64 = run(DType::Float64);
    CHECK(single.dx.to_vector<float>() == g32.dx.to_vector<float>());
    CHECK(single.dw.to_vector<float>() == g32.dw.to_vector<float>());
    if (layer) CHECK(single.db.to_vector<float>() == g32.db.to_vector<float>());
    // In float64 too: dw and db sum in double, and rounding the sums to float32 hides a changed
    // order of the rows (sum_weight_grads adding them backwards when it runs on several threads
    // passes the float32 checks above and fails these).
    CHECK(single64.dx.to_vector<double>() == g64.dx.to_vector<double>());
    CHECK(single64.dw.to_vector<double>() == g64.dw.to_vector<double>());
    if (layer) CHECK(single64.db.to_vector<double>() == g64.db.to_vector<double>());
  }
}

TEST_CASE("norms handle zero rows and constant rows") {
  kernels::NormResult empty = kernels::rmsnorm(zeros({0, 4}), ones({4}), kEps);
  CHECK(empty.y.shape() == Shape{0, 4});
  CHECK(empty.rstd.shape() == Shape{0});
  kernels::NormGrads none = kernels::layernorm_backward(zeros({0, 4}), ones({4}), zeros({0}), zeros({0}), zeros({0, 4}));
  CHECK(none.dw.to_vector<float>() == std::vector<float>(4, 0.0f));
  CHECK(none.db.to_vector<float>() == std::vector<float>(4, 0.0f));
  // A constant row has zero variance: layernorm gives b, with a finite rstd = 1/sqrt(eps).
  kernels::NormResult flat = kernels::layernorm(full({1, 4}, 7.0, DType::Float64), ones({4}, DType::Float64),
                                                full({4}, 0.25, DType::Float64), kEps);
  CHECK(flat.y.to_vector<double>() == std::vector<double>(4, 0.25));
  CHECK(flat.rstd.item<double>() == doctest::Approx(1.0 / std::sqrt(kEps)));
}

TEST_CASE("norms reject bad arguments with the op's name") {
  Tensor x = zeros({3, 4}), w = ones({4}), b = zeros({4}), stat = ones({3});
  CHECK_THROWS_WITH_AS(kernels::rmsnorm(zeros({3, 4}, DType::Int32), ones({4}, DType::Int32), kEps),
                       doctest::Contains("rmsnorm"), Error);
  CHECK_THROWS_WITH_AS(kernels::rmsnorm(x, ones({5}), kEps), doctest::Contains("rmsnorm"), Error);
  CHECK_THROWS_WITH_AS(kernels::rmsnorm(x, ones({4}, DType::Float64), kEps), doctest::Contains("rmsnorm"), Error);
  CHECK_THROWS_WITH_AS(kernels::rmsnorm(x, w, 0.0), doctest::Contains("rmsnorm"), Error);
  CHECK_THROWS_WITH_AS(kernels::rmsnorm(x, w, -1e-5), doctest::Contains("rmsnorm"), Error);
  CHECK_THROWS_WITH_AS(kernels::rmsnorm(zeros({3, 0}), zeros({0}), kEps), doctest::Contains("rmsnorm"), Error);
  CHECK_THROWS_WITH_AS(kernels::rmsnorm(zeros({}), ones({1}), kEps), doctest::Contains("rmsnorm"), Error);
  CHECK_THROWS_WITH_AS(kernels::rmsnorm(x, Tensor(), kEps), doctest::Contains("rmsnorm"), Error);

  CHECK_THROWS_WITH_AS(kernels::rmsnorm_backward(x, w, ones({4}), x), doctest::Contains("rmsnorm_backward"), Error);
  CHECK_THROWS_WITH_AS(kernels::rmsnorm_backward(x, w, stat, zeros({4, 3})), doctest::Contains("rmsnorm_backward"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::rmsnorm_backward(x, w, ones({3}, DType::Float64), x),
                       doctest::Contains("rmsnorm_backward"), Error);

  CHECK_THROWS_WITH_AS(kernels::layernorm(x, w, zeros({3}), kEps), doctest::Contains("layernorm"), Error);
  CHECK_THROWS_WITH_AS(kernels::layernorm(x, w, zeros({4}, DType::Float64), kEps), doctest::Contains("layernorm"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::layernorm(x, w, b, std::nan("")), doctest::Contains("layernorm"), Error);
  CHECK_THROWS_WITH_AS(kernels::layernorm_backward(x, w, ones({2}), stat, x), doctest::Contains("layernorm_backward"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::layernorm_backward(x, w, stat, stat, zeros({3, 5})),
                       doctest::Contains("layernorm_backward"), Error);
  CHECK_THROWS_WITH_AS(kernels::layernorm_backward(zeros({3, 4}, DType::Int32), w, stat, stat, x),
                       doctest::Contains("layernorm_backward"), Error);
}
