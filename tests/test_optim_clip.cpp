// tests/test_optim_clip.cpp — clip_grad_norm against a hand computation: the returned norm is the
// global L2 norm before clipping, gradients are scaled by max_norm / (norm + 1e-6) only when that
// is below 1, parameters without a gradient are skipped, and bad arguments throw.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/factories.h"
#include "nn/optim/clip.h"
#include "tests/test_util.h"

using namespace moelab;
using moelab::testing::to_doubles;

TEST_CASE("clip_grad_norm scales every gradient by max_norm / (norm + 1e-6) when that is < 1") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    CAPTURE(dtype);
    Variable a(zeros({2}, dtype), true), b(zeros({2, 2}, dtype), true), c(zeros({3}, dtype), true);
    a.set_grad(from_vector(std::vector<double>{3.0, 0.0}, {2}).to(dtype));
    b.set_grad(from_vector(std::vector<double>{0.0, 4.0, 0.0, 12.0}, {2, 2}).to(dtype));
    // c has no gradient: skipped. Global norm = sqrt(9 + 16 + 144) = 13.
    CHECK(grad_norm({a, b, c}) == doctest::Approx(13.0).epsilon(1e-12));
    const double norm = clip_grad_norm({a, b, c}, 1.3);
    CHECK(norm == doctest::Approx(13.0).epsilon(1e-12));
    const double coef = 1.3 / (13.0 + 1e-6);
    const double tol = dtype == DType::Float32 ? 1e-6 : 1e-14;
    CHECK(moelab::testing::max_error(a.grad(), {3.0 * coef, 0.0}) < tol);
    CHECK(moelab::testing::max_error(b.grad(), {0.0, 4.0 * coef, 0.0, 12.0 * coef}) < tol);
    CHECK(!c.grad().defined());
    CHECK(grad_norm({a, b, c}) == doctest::Approx(1.3).epsilon(1e-6));
    CHECK(grad_norm({a, b, c}) < 1.3);
  }
}

TEST_CASE("clip_grad_norm leaves small gradients alone and returns their norm") {
  Variable a(zeros({3}), true);
  a.set_grad(from_vector(std::vector<float>{0.5f, -0.5f, 0.5f}, {3}));
  const Tensor before = a.grad();
  const double norm = clip_grad_norm({a}, 1.0);
  CHECK(norm == doctest::Approx(std::sqrt(0.75)).epsilon(1e-7));
  CHECK(a.grad().shares_storage_with(before));  // untouched, not even copied
  CHECK(to_doubles(a.grad()) == std::vector<double>{0.5, -0.5, 0.5});
  // No gradients at all: norm 0, nothing to do.
  Variable none(zeros({2}), true);
  CHECK(clip_grad_norm({none}, 1.0) == 0.0);
}

TEST_CASE("clip_grad_norm is deterministic on a large gradient and checks max_norm") {
  Generator gen(9);
  Variable w(zeros({300, 300}), true);
  w.set_grad(normal({300, 300}, 0, 1, gen));
  const double n1 = grad_norm({w}), n2 = grad_norm({w});
  CHECK(n1 == n2);
  double want = 0;
  for (double x : to_doubles(w.grad())) want += x * x;
  CHECK(n1 == doctest::Approx(std::sqrt(want)).epsilon(1e-6));
  CHECK_THROWS_AS(clip_grad_norm({w}, 0.0), Error);
  CHECK_THROWS_AS(clip_grad_norm({w}, -1.0), Error);
  CHECK_THROWS_AS(clip_grad_norm({w}, NAN), Error);
}
