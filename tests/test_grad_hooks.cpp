// tests/test_grad_hooks.cpp — gradient hooks (autograd/grad_hooks.h): when they are called, with
// what, what a replacement changes, in which order, and how they are removed.
//
// Every expected gradient is written out by hand for a loss whose derivative is obvious
// (sum(c * h): dloss/dh = c), so a hook that saw the wrong tensor, or ran twice, shows.
#include <doctest/doctest.h>

#include <vector>

#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "core/factories.h"
#include "core/kernels.h"

using namespace moelab;

namespace {

Tensor f64(const std::vector<double>& v, const Shape& shape) { return from_vector(v, shape); }
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
Tensor scaled(const Tensor& g, double s) { return kernels::mul(g, s); }

}  // namespace

TEST_CASE("a hook on an op output is called once per backward with dloss/dv") {
  Variable x(f64({0.5, -1.0, 2.0}, {3}), true);
  const Variable c(f64({3.0, -2.0, 0.25}, {3}));
  int calls = 0;
  Tensor seen;
  Variable h = x * x;
  h.register_hook([&](const Tensor& g) {
    ++calls;
    seen = g.clone();
    return Tensor();  // observe only
  });
  sum(h * c).backward();
  CHECK(calls == 1);
  CHECK(values(seen) == values(c.data()));
  CHECK(values(x.grad()) == std::vector<double>{3.0, 4.0, 1.0});  // unchanged: 2 x c

  // Used twice (h * h + h), it is still called once, with the sum of both uses: 2h + 1.
  calls = 0;
  Variable y(f64({1.0, -3.0}, {2}), true);
  Variable g = y * 2.0;
  g.register_hook([&](const Tensor& grad) {
    ++calls;
    seen = grad.clone();
    return Tensor();
  });
  sum(g * g + g).backward();
  CHECK(calls == 1);
  CHECK(values(seen) == std::vector<double>{5.0, -11.0});
}

TEST_CASE("a leaf's hook stays for every backward until removed") {
  Variable w(f64({1.0, 2.0}, {2}), true);
  const Variable c(f64({4.0, -1.0}, {2}));
  std::vector<std::vector<double>> seen;
  HookHandle handle = w.register_hook([&](const Tensor& g) {
    seen.push_back(values(g));
    return Tensor();
  });
  sum(w * c).backward();           // dloss/dw = c
  sum(square(w)).backward();       // dloss/dw = 2w
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::vector<double>{4.0, -1.0});
  CHECK(seen[1] == std::vector<double>{2.0, 4.0});
  CHECK(values(w.grad()) == std::vector<double>{6.0, 3.0});  // accumulated: c + 2w
  CHECK(handle.active());
  handle.remove();
  CHECK_FALSE(handle.active());
  handle.remove();  // twice: nothing
  sum(w * c).backward();
  CHECK(seen.size() == 2);  // not called any more
}

TEST_CASE("a hook that scales the gradient changes the leaf's gradient accordingly") {
  Generator gen(3);
  const Tensor xv = normal({4, 3}, 0.0, 1.0, gen, DType::Float64);
  const Tensor wv = normal({3, 2}, 0.0, 1.0, gen, DType::Float64);
  auto run = [&](double hidden_scale, double leaf_scale) {
    Variable w(wv.clone(), true);
    if (leaf_scale != 1.0) w.register_hook([leaf_scale](const Tensor& g) { return scaled(g, leaf_scale); });
    Variable hidden = matmul(Variable(xv), w);  // [4, 2]
    if (hidden_scale != 1.0) hidden.register_hook([hidden_scale](const Tensor& g) { return scaled(g, hidden_scale); });
    sum(tanh(hidden)).backward();
    return values(w.grad());
  };
  const std::vector<double> plain = run(1.0, 1.0), through_hidden = run(3.0, 1.0), at_leaf = run(1.0, 0.5);
  REQUIRE(plain.size() == 6);
  for (std::size_t i = 0; i < plain.size(); ++i) {
    // hidden's replacement flows on through matmul's backward, which is linear in it.
    CHECK(through_hidden[i] == doctest::Approx(3.0 * plain[i]).epsilon(1e-14));
    CHECK(at_leaf[i] == 0.5 * plain[i]);
  }
}

TEST_CASE("hooks run in registration order, each given the previous one's result; retain_grad sees the last") {
  Variable x(f64({1.0, 2.0}, {2}), true);
  Variable h = x * 1.0;
  std::vector<double> second_saw;
  h.register_hook([](const Tensor& g) { return scaled(g, 2.0); });
  h.register_hook([&](const Tensor& g) {
    second_saw = values(g);
    return scaled(g, 5.0);
  });
  h.retain_grad();
  sum(h).backward();
  CHECK(second_saw == std::vector<double>{2.0, 2.0});
  CHECK(values(h.grad()) == std::vector<double>{10.0, 10.0});
  CHECK(values(x.grad()) == std::vector<double>{10.0, 10.0});
}

TEST_CASE("an op output's hooks go with its graph; bad hooks are refused") {
  Variable x(f64({1.0, 2.0}, {2}), true);
  Variable h = exp(x);
  HookHandle on_h = h.register_hook([](const Tensor&) { return Tensor(); });
  HookHandle on_x = x.register_hook([](const Tensor&) { return Tensor(); });
  CHECK(on_h.active());
  sum(h).backward();
  CHECK_FALSE(on_h.active());  // freed with the graph
  CHECK(on_x.active());        // a leaf keeps it
  CHECK_THROWS_WITH_AS(h.register_hook([](const Tensor&) { return Tensor(); }), doctest::Contains("already freed"),
                       Error);
  // A replacement of the wrong shape is an error naming the op.
  Variable y = exp(x);
  y.register_hook([](const Tensor&) { return zeros({3}, DType::Float64); });
  CHECK_THROWS_WITH_AS(sum(y).backward(), doctest::Contains("hook on 'exp'"), Error);
  // A Variable without a gradient has nothing to hook.
  Variable constant(f64({1.0}, {1}));
  CHECK_THROWS_WITH_AS(constant.register_hook([](const Tensor&) { return Tensor(); }),
                       doctest::Contains("register_hook"), Error);
  HookHandle none;
  CHECK_FALSE(none.active());
  none.remove();
}
