// tests/test_retain_grad.cpp — Variable::retain_grad(): an op output keeps dloss/dv after backward().
//
// The retained gradients are checked against values known independently of the engine: a
// hand-computed derivative (d/dh of sum(c * h) is c; of sum(h * h + h) is 2h + 1, with h used
// twice), and central finite differences of the loss as a function of the retained Variable
// itself (the rest of the graph replayed on a perturbed copy of its value).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "core/factories.h"
#include "tests/test_util.h"

using namespace moelab;
using moelab::testing::max_error;

namespace {

Tensor f64(const std::vector<double>& v, const Shape& shape) { return from_vector(v, shape); }

}  // namespace

TEST_CASE("retain_grad keeps an op output's gradient: hand-computed values") {
  Variable x(f64({0.5, -1.0, 2.0}, {3}), true);
  const Tensor c = f64({3.0, -2.0, 0.25}, {3});
  Variable h = x * x;  // [3]
  h.retain_grad();
  CHECK(h.retains_grad());
  sum(h * Variable(c)).backward();
  // dloss/dh = c exactly; x's gradient is unchanged by retaining: 2 x c.
  CHECK(h.grad().to_vector<double>() == c.to_vector<double>());
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3.0, 4.0, 1.0});

  // A Variable used twice receives the sum of both uses: d/dh sum(h * h + h) = 2h + 1.
  Variable y(f64({1.0, -3.0}, {2}), true);
  Variable g = y * 2.0;  // [2, -6]
  g.retain_grad();
  sum(g * g + g).backward();
  CHECK(g.grad().to_vector<double>() == std::vector<double>{5.0, -11.0});
}

TEST_CASE("retain_grad values equal finite differences of the loss in that Variable") {
  Generator gen(11);
  const Tensor x = normal({4, 3}, 0.0, 1.0, gen, DType::Float64);
  Variable w(normal({3, 5}, 0.0, 1.0, gen, DType::Float64), true);
  const Tensor t = normal({4, 5}, 0.0, 1.0, gen, DType::Float64);
  // The part of the graph after the hidden activation h: [4, 5] -> loss [].
  const auto tail = [&](const Variable& h) { return mean(square(h - Variable(t))) + sum(sigmoid(h)) * 0.1; };

  Variable h = tanh(matmul(Variable(x), w));
  h.retain_grad();
  tail(h).backward();
  REQUIRE(h.grad().defined());
  CHECK(h.grad().shape() == Shape{4, 5});

  std::vector<double> hv = h.data().to_vector<double>(), numeric(hv.size());
  const double eps = 1e-6;
  for (std::size_t i = 0; i < hv.size(); ++i) {
    std::vector<double> plus = hv, minus = hv;
    plus[i] += eps;
    minus[i] -= eps;
    const double lp = tail(Variable(f64(plus, {4, 5}))).data().item<double>();
    const double lm = tail(Variable(f64(minus, {4, 5}))).data().item<double>();
    numeric[i] = (lp - lm) / (2 * eps);
  }
  CHECK(max_error(h.grad(), numeric) < 1e-8);
}

TEST_CASE("retain_grad: what keeps a gradient and what does not") {
  Variable x(f64({1.0, 2.0}, {2}), true);
  Variable kept = exp(x), dropped = exp(x);
  kept.retain_grad();
  CHECK(kept.retains_grad());
  CHECK_FALSE(dropped.retains_grad());
  CHECK(x.retains_grad());  // a leaf always does
  x.retain_grad();          // and retaining it again changes nothing
  CHECK(x.is_leaf());
  sum(kept + dropped).backward();
  CHECK(kept.grad().defined());      // stays after the graph is freed
  CHECK_FALSE(dropped.grad().defined());
  // x gets 2 exp(x) (both paths); the retained gradient is ones.
  CHECK(kept.grad().to_vector<double>() == std::vector<double>{1.0, 1.0});
  CHECK(max_error(x.grad(), {2 * std::exp(1.0), 2 * std::exp(2.0)}) < 1e-15);
  kept.zero_grad();
  CHECK_FALSE(kept.grad().defined());
  // A Variable without a gradient cannot retain one.
  Variable constant(f64({1.0}, {1}));
  CHECK_THROWS_WITH_AS(constant.retain_grad(), doctest::Contains("retain_grad"), Error);
}
