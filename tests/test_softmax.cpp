// tests/test_softmax.cpp — softmax and log_softmax over the last axis, softmax over any axis, and
// their backwards.
//
// Forwards are compared with a naive double-precision reference (itself made stable by the max
// subtraction); backwards with the analytic formulas and with central finite differences of the
// forward in float64. Softmax over another axis must give bitwise what transposing that axis to
// the end, a last-axis softmax and transposing back give (its promise: core/cpu/softmax.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/factories.h"
#include "core/kernels.h"
#include "tests/test_util.h"

using namespace moelab;
using moelab::testing::max_error;
using moelab::testing::to_doubles;

namespace {

double tolerance(DType dtype) { return dtype == DType::Float32 ? 1e-6 : 1e-14; }

// Row-wise reference: softmax (log = false) or log_softmax (log = true) of x: [rows, n].
std::vector<double> softmax_ref(const std::vector<double>& x, std::int64_t n, bool log) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / static_cast<std::size_t>(n); ++r) {
    const double* row = x.data() + r * static_cast<std::size_t>(n);
    double m = row[0], s = 0;
    for (std::int64_t j = 0; j < n; ++j) m = std::max(m, row[j]);
    for (std::int64_t j = 0; j < n; ++j) s += std::exp(row[j] - m);
    for (std::int64_t j = 0; j < n; ++j)
      y[r * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)] =
          log ? row[j] - m - std::log(s) : std::exp(row[j] - m) / s;
  }
  return y;
}

}  // namespace

TEST_CASE("softmax and log_softmax match the reference; rows of softmax sum to 1") {
  Generator gen(21);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& shape : {Shape{5}, Shape{4, 7, 33}, Shape{300, 200}}) {  // the last is multi-threaded
      Tensor x = normal(shape, 0, 3, gen, dtype);
      std::vector<double> xv = to_doubles(x);
      const std::int64_t n = shape.back();
      Tensor y = kernels::softmax(x);
      CHECK(y.shape() == shape);
      CHECK(y.dtype() == dtype);
      CHECK(max_error(y, softmax_ref(xv, n, false)) <= tolerance(dtype));
      CHECK(max_error(kernels::log_softmax(x), softmax_ref(xv, n, true)) <= 4 * tolerance(dtype));
      std::vector<double> yv = to_doubles(y);
      for (std::size_t r = 0; r < yv.size() / static_cast<std::size_t>(n); ++r) {
        double s = 0;
        for (std::int64_t j = 0; j < n; ++j) s += yv[r * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)];
        CHECK(s == doctest::Approx(1.0).epsilon(dtype == DType::Float32 ? 1e-5 : 1e-13));
      }
    }
  }
}

TEST_CASE("softmax is stable for large logits") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    std::vector<double> v{1000, 1000, 999, -1000, 1000, 2, 1, 0};
    Tensor x = from_vector(v, {2, 4}).to(dtype);
    std::vector<double> y = to_doubles(kernels::softmax(x));
    std::vector<double> ly = to_doubles(kernels::log_softmax(x));
    CHECK(max_error(y, softmax_ref(v, 4, false)) <= 1e-6);
    CHECK(max_error(ly, softmax_ref(v, 4, true)) <= 1e-6);
    CHECK(y[3] == 0.0);  // exp(-2000) underflows cleanly
    CHECK(ly[3] == doctest::Approx(-2000 - std::log(2 + std::exp(-1.0))));
  }
}

TEST_CASE("backwards match the analytic formulas") {
  Generator gen(22);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& shape : {Shape{3, 2, 9}, Shape{250, 150}}) {
      const std::int64_t n = shape.back();
      Tensor x = normal(shape, 0, 2, gen, dtype);
      Tensor dy = normal(shape, 0, 1, gen, dtype);
      Tensor y = kernels::softmax(x), ly = kernels::log_softmax(x);
      std::vector<double> yv = to_doubles(y), lyv = to_doubles(ly), dyv = to_doubles(dy);
      std::vector<double> dx_soft(yv.size()), dx_log(yv.size());
      for (std::size_t r = 0; r < yv.size() / static_cast<std::size_t>(n); ++r) {
        const std::size_t base = r * static_cast<std::size_t>(n);
        double dot = 0, total = 0;
        for (std::size_t j = base; j < base + static_cast<std::size_t>(n); ++j) {
          dot += dyv[j] * yv[j];
          total += dyv[j];
        }
        for (std::size_t j = base; j < base + static_cast<std::size_t>(n); ++j) {
          dx_soft[j] = yv[j] * (dyv[j] - dot);
          dx_log[j] = dyv[j] - std::exp(lyv[j]) * total;
        }
      }
      INFO(dtype, " ", shape);
      CHECK(max_error(kernels::softmax_backward(y, dy), dx_soft) <= 10 * tolerance(dtype));
      CHECK(max_error(kernels::log_softmax_backward(ly, dy), dx_log) <= 10 * tolerance(dtype));
    }
  }
}

TEST_CASE("backwards match finite differences of the forwards (float64)") {
  // L(x) = sum(w * f(x)); dL/dx = f_backward(f(x), w). Central differences, step 1e-6.
  Generator gen(23);
  const Shape shape{3, 6};
  Tensor x = normal(shape, 0, 1.5, gen, DType::Float64);
  Tensor w = normal(shape, 0, 1, gen, DType::Float64);
  const std::vector<double> wv = w.to_vector<double>();
  for (bool log : {false, true}) {
    auto forward = [&](const Tensor& in) { return log ? kernels::log_softmax(in) : kernels::softmax(in); };
    auto loss = [&](const Tensor& in) {
      std::vector<double> y = forward(in).to_vector<double>();
      double l = 0;
      for (std::size_t i = 0; i < y.size(); ++i) l += wv[i] * y[i];
      return l;
    };
    Tensor y = forward(x);
    std::vector<double> analytic =
        (log ? kernels::log_softmax_backward(y, w) : kernels::softmax_backward(y, w)).to_vector<double>();
    const double h = 1e-6;
    std::vector<double> numeric(analytic.size());
    for (std::size_t i = 0; i < numeric.size(); ++i) {
      Tensor plus = x.clone(), minus = x.clone();
      plus.data<double>()[i] += h;
      minus.data<double>()[i] -= h;
      numeric[i] = (loss(plus) - loss(minus)) / (2 * h);
    }
    INFO("op: ", (log ? "log_softmax" : "softmax"));
    CHECK(max_error(analytic, numeric) <= 1e-8);
  }
}

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("softmax over a middle axis is bitwise the transposed last-axis softmax, forward and backward") {
  Generator gen(23);
  // n (the normalised axis) below, at and above every vector width (4, 8, 16 floats; 2, 4, 8
  // doubles), so Eigen's scalar head, vector body and tail all occur; the [64, n, 160] tensors
  // (>= 40,960 elements) take the parallel path; [5, n, 1] has only a size-1 axis after the
  // normalised one (Soft MoE with one slot: the dispatch softmax of [B, m, 1]).
  for (DType dtype : {DType::Float32, DType::Float64})
    for (std::int64_t n : {1, 3, 4, 5, 9, 17, 40}) {
      for (const Shape& shape : {Shape{3, n, 7}, Shape{64, n, 160}, Shape{n, 33}, Shape{5, n, 1}}) {
        CAPTURE(dtype);
        CAPTURE(shape);
        const int axis = shape.rank() == 3 ? 1 : 0;
        const int last = shape.rank() - 1;
        // Std 8: exponents spread over many binades, so a different exp would show.
        const Tensor x = normal(shape, 0.0, 8.0, gen, dtype);
        const Tensor dy = normal(shape, 0.0, 1.0, gen, dtype);
        const Tensor y = kernels::softmax(x, axis);
        const Tensor want = kernels::transpose(kernels::softmax(kernels::transpose(x, axis, last)), axis, last);
        CHECK(same_bits(y, want));
        CHECK(same_bits(kernels::softmax(x, axis - shape.rank()), want));  // the same axis, negative
        const Tensor dx = kernels::softmax_backward(y, dy, axis);
        const Tensor dx_want = kernels::transpose(
            kernels::softmax_backward(kernels::transpose(y, axis, last), kernels::transpose(dy, axis, last)), axis,
            last);
        CHECK(same_bits(dx, dx_want));
      }
    }
  // The extremes on both roads (short columns of 4 and long ones of 9): -inf entries, huge
  // logits, a NaN, and a column that is entirely -inf (NaN, as the row softmax gives).
  for (std::int64_t n : {4, 9}) {
    CAPTURE(n);
    std::vector<float> v = normal({2, n, 5}, 0.0, 1.0, gen).to_vector<float>();
    const float inf = std::numeric_limits<float>::infinity();
    v[0] = -inf;                                              // column (0, 0)
    v[5] = 1e30f;                                             // column (0, 0)
    v[6] = std::numeric_limits<float>::quiet_NaN();           // column (0, 1)
    for (std::int64_t k = 0; k < n; ++k) v[static_cast<std::size_t>(k * 5 + 2)] = -inf;  // column (0, 2)
    v[static_cast<std::size_t>(n * 5 + 3)] = -1e30f;          // column (1, 3)
    const Tensor x = from_vector(v, {2, n, 5});
    CHECK(same_bits(kernels::softmax(x, 1), kernels::transpose(kernels::softmax(kernels::transpose(x, 1, 2)), 1, 2)));
  }
  // Every column of a softmax over axis 1 sums to 1 (one exact check of the values, not just bits).
  const Tensor cols = kernels::softmax(normal({2, 5, 3}, 0.0, 1.0, gen, DType::Float64), 1);
  const std::vector<double> v = cols.to_vector<double>();
  for (int b = 0; b < 2; ++b)
    for (int s = 0; s < 3; ++s) {
      double total = 0;
      for (int i = 0; i < 5; ++i) total += v[static_cast<std::size_t>((b * 5 + i) * 3 + s)];
      CHECK(total == doctest::Approx(1.0).epsilon(1e-14));
    }
}

TEST_CASE("empty inputs: an empty last axis is a no-op") {
  CHECK(kernels::softmax(zeros({3, 0})).shape() == Shape{3, 0});
  CHECK(kernels::log_softmax(zeros({0, 4})).shape() == Shape{0, 4});
  CHECK(kernels::softmax_backward(zeros({3, 0}), zeros({3, 0})).shape() == Shape{3, 0});
}

TEST_CASE("softmax ops reject bad arguments, naming the op") {
  Tensor x = ones({2, 3}), undefined;
  Tensor ints = arange(0, 6).reshape({2, 3});
  CHECK_THROWS_WITH_AS(kernels::softmax(ints), doctest::Contains("softmax"), Error);
  CHECK_THROWS_WITH_AS(kernels::softmax(undefined), doctest::Contains("softmax"), Error);
  CHECK_THROWS_WITH_AS(kernels::softmax(ones({})), doctest::Contains("softmax"), Error);
  CHECK_THROWS_WITH_AS(kernels::softmax(x, 2), doctest::Contains("softmax"), Error);   // no axis 2 in [2, 3]
  CHECK_THROWS_WITH_AS(kernels::softmax(x, -3), doctest::Contains("softmax"), Error);
  CHECK_THROWS_WITH_AS(kernels::softmax_backward(x, x, 2), doctest::Contains("softmax_backward"), Error);
  CHECK_THROWS_WITH_AS(kernels::log_softmax(ints), doctest::Contains("log_softmax"), Error);
  CHECK_THROWS_WITH_AS(kernels::log_softmax(ones({})), doctest::Contains("log_softmax"), Error);
  CHECK_THROWS_WITH_AS(kernels::softmax_backward(x, ones({3, 2})), doctest::Contains("softmax_backward"), Error);
  CHECK_THROWS_WITH_AS(kernels::softmax_backward(x, ones({3, 2})), doctest::Contains("[3, 2]"), Error);
  CHECK_THROWS_WITH_AS(kernels::softmax_backward(x, ones({2, 3}, DType::Float64)),
                       doctest::Contains("softmax_backward"), Error);
  CHECK_THROWS_WITH_AS(kernels::softmax_backward(x, ints), doctest::Contains("softmax_backward"), Error);
  CHECK_THROWS_WITH_AS(kernels::log_softmax_backward(x, ones({2, 4})), doctest::Contains("log_softmax_backward"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::log_softmax_backward(undefined, x), doctest::Contains("log_softmax_backward"), Error);
}
