// tests/test_autograd.cpp — the backward engine: accumulation, shared uses, diamonds, leaves that
// need no gradient, NoGradGuard, freed graphs, deep chains, broadcasting, a hand-computed MLP,
// detach, the op registry and argument errors, and that a leaf's gradient aliases nothing.
// (Per-op gradients: tests/test_gradcheck.cpp.)
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "autograd/record.h"
#include "core/factories.h"
#include "core/kernels.h"

using namespace moelab;

namespace {

Tensor f64(const std::vector<double>& values, const Shape& shape) { return from_vector(values, shape); }
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

void check_close(const Tensor& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.defined());
  const std::vector<double> v = values(got);
  REQUIRE(v.size() == want.size());
  for (std::size_t i = 0; i < v.size(); ++i) CHECK(v[i] == doctest::Approx(want[i]).epsilon(tol));
}

}  // namespace

TEST_CASE("gradients accumulate across backward calls on fresh graphs until zero_grad") {
  Variable x(f64({1, 2, 3}, {3}), true);
  sum(x * 2.0).backward();
  check_close(x.grad(), {2, 2, 2});
  sum(x * 2.0).backward();  // a new graph, the same leaf
  check_close(x.grad(), {4, 4, 4});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  sum(square(x)).backward();
  check_close(x.grad(), {2, 4, 6});
}

TEST_CASE("a variable used twice receives both contributions") {
  Variable x(f64({1.5, -2}, {2}), true);
  sum(x * x).backward();
  check_close(x.grad(), {3, -4});
}

TEST_CASE("diamond graphs sum the gradients of both branches before going on") {
  // c = (2x) * (3x) = 6 x^2  ->  dc/dx = 12 x
  Variable x(f64({0.5, -1, 2}, {3}), true);
  Variable c = (x * 2.0) * (x * 3.0);
  sum(c).backward();
  check_close(x.grad(), {6, -12, 24});

  // An intermediate with two users: y = x^2, z = sin(y) + y  ->  dz/dx = (cos(y) + 1) * 2x
  Variable v(f64({0.3, -0.7}, {2}), true);
  Variable y = square(v);
  sum(sin(y) + y).backward();
  std::vector<double> want;
  for (double a : {0.3, -0.7}) want.push_back((std::cos(a * a) + 1) * 2 * a);
  check_close(v.grad(), want);
}

TEST_CASE("leaves with requires_grad = false get no gradient") {
  Variable w(f64({1, 2}, {2}), true);
  Variable c(f64({3, 4}, {2}));
  CHECK_FALSE(c.requires_grad());
  CHECK(c.is_leaf());
  sum(w * c).backward();
  check_close(w.grad(), {3, 4});
  CHECK_FALSE(c.grad().defined());
  // Ops on constants only record nothing.
  Variable k = exp(c);
  CHECK_FALSE(k.requires_grad());
  CHECK_THROWS_WITH_AS(sum(k).backward(), doctest::Contains("does not require a gradient"), Error);
}

TEST_CASE("NoGradGuard records nothing, nests, and restores the state it found") {
  Variable x(f64({1, 2}, {2}), true);
  CHECK(grad_enabled());
  {
    NoGradGuard outer;
    CHECK_FALSE(grad_enabled());
    {
      NoGradGuard inner;
      CHECK_FALSE(grad_enabled());
      Variable y = x * 3.0;
      CHECK_FALSE(y.requires_grad());
      check_close(y.data(), {3, 6});
    }
    CHECK_FALSE(grad_enabled());  // the inner guard restored "off", not "on"
    Variable z = sum(x * x);
    CHECK_FALSE(z.requires_grad());
    CHECK(z.node() == nullptr);
  }
  CHECK(grad_enabled());
  Variable w = sum(x * x);
  CHECK(w.requires_grad());
  CHECK_FALSE(w.is_leaf());
  CHECK(w.op_name() == "sum");
}

TEST_CASE("backward without a seed needs a one-element output; a seed must match the output") {
  Variable x(f64({1, 2, 3}, {3}), true);
  Variable y = x * 2.0;
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("one-element"), Error);
  CHECK_THROWS_WITH_AS(y.backward(f64({1, 1}, {2})), doctest::Contains("does not match"), Error);
  CHECK_THROWS_AS(y.backward(from_vector(std::vector<float>{1, 1, 1}, {3})), Error);  // wrong dtype
  y.backward(f64({1, 10, 100}, {3}));
  check_close(x.grad(), {2, 20, 200});
}

TEST_CASE("backward frees the graph; a second backward through it throws") {
  Variable x(f64({1, 2}, {2}), true);
  Variable h = exp(x);
  Variable loss = sum(h * 2.0);
  loss.backward();
  CHECK_THROWS_WITH_AS(loss.backward(), doctest::Contains("already freed"), Error);
  // A new graph built on a freed intermediate cannot reach the leaves either.
  Variable again = sum(h);
  CHECK_THROWS_WITH_AS(again.backward(), doctest::Contains("already freed"), Error);
  // The freed nodes let go of their inputs (and with them the saved tensors).
  CHECK(loss.node()->inputs.empty());
  CHECK_FALSE(static_cast<bool>(loss.node()->grad_fn));
  // The leaf keeps its gradient, and a fresh forward pass works.
  const std::vector<double> first = values(x.grad());
  sum(exp(x) * 2.0).backward();
  check_close(x.grad(), {2 * first[0], 2 * first[1]});
}

TEST_CASE("a 100,000-op chain runs backward and is destroyed without overflowing the stack") {
  constexpr int kLength = 100000;
  Variable x0(f64({0.5}, {}), true);
  {
    Variable x = x0;
    for (int i = 0; i < kLength; ++i) x = x + 1.0;
    CHECK(x.data().item<double>() == doctest::Approx(0.5 + kLength));
    x.backward();
    CHECK(x0.grad().item<double>() == 1.0);
  }
  {
    // Dropped without backward: ~Node unlinks the chain iteratively.
    Variable x = x0;
    for (int i = 0; i < kLength; ++i) x = x * 1.0;
  }
  CHECK(x0.grad().item<double>() == 1.0);
}

TEST_CASE("broadcast operands get gradients of their own shape") {
  Variable x(f64({1, 2, 3, 4, 5, 6}, {2, 3}), true);
  Variable bias(f64({0.1, 0.2, 0.3}, {3}), true);
  Variable scale(f64({2}, {}), true);
  sum((x + bias) * scale).backward();
  REQUIRE(bias.grad().shape() == Shape{3});
  check_close(bias.grad(), {4, 4, 4});  // summed over the 2 rows, times scale
  REQUIRE(scale.grad().shape() == Shape{});
  check_close(scale.grad(), {21 + 6 * 0.2});
  REQUIRE(x.grad().shape() == Shape{2, 3});
  check_close(x.grad(), {2, 2, 2, 2, 2, 2});

  // [T, d] on [B, T, d]
  Variable h(zeros({2, 2, 3}, DType::Float64), true);
  Variable pos(zeros({2, 3}, DType::Float64), true);
  (h + pos).backward(ones({2, 2, 3}, DType::Float64));
  REQUIRE(pos.grad().shape() == Shape{2, 3});
  check_close(pos.grad(), {2, 2, 2, 2, 2, 2});
}

TEST_CASE("a tiny MLP has the hand-computed gradients") {
  // x: [1, 2], W1: [2, 2], b1: [2], W2: [2, 1];  y = relu(x W1 + b1) W2;  loss = (y - 1)^2
  Variable x(f64({1, 2}, {1, 2}));
  Variable w1(f64({0.5, -1, 1, 0.25}, {2, 2}), true);
  Variable b1(f64({0.1, -0.2}, {2}), true);
  Variable w2(f64({2, 3}, {2, 1}), true);
  Variable target(f64({1}, {1, 1}));
  // x W1 = [2.5, -0.5]; + b1 = [2.6, -0.7]; relu = [2.6, 0]; y = 5.2; loss = 4.2^2 = 17.64
  Variable loss = mse_loss(matmul(relu(matmul(x, w1) + b1), w2), target);
  CHECK(loss.data().item<double>() == doctest::Approx(17.64));
  loss.backward();
  // dy = 8.4; dW2 = h^T dy; dh = dy W2^T = [16.8, 25.2]; relu passes [16.8, 0]
  check_close(w2.grad(), {21.84, 0});
  check_close(b1.grad(), {16.8, 0});
  check_close(w1.grad(), {16.8, 0, 33.6, 0});
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("detach shares the data but stops the gradient") {
  Variable x(f64({1, 2, 3}, {3}), true);
  Variable d = x.detach();
  CHECK(d.data().shares_storage_with(x.data()));
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  sum(x * d).backward();  // only the x branch: d/dx = d = x
  check_close(x.grad(), {1, 2, 3});
  Variable y = x * 2.0;
  CHECK_FALSE(y.detach().requires_grad());
}

TEST_CASE("leaves: backward on a leaf, requires_grad rules, set_grad") {
  Variable x(f64({4, 5}, {2}), true);
  x.backward(f64({1, 2}, {2}));
  check_close(x.grad(), {1, 2});
  x.set_grad(f64({0, 0}, {2}));
  check_close(x.grad(), {0, 0});
  CHECK_THROWS_AS(x.set_grad(f64({0, 0, 0}, {3})), Error);
  CHECK_THROWS_WITH_AS(Variable(arange(0, 3), true), doctest::Contains("float"), Error);
  Variable y = x * 2.0;
  CHECK_THROWS_WITH_AS(y.set_requires_grad(false), doctest::Contains("only leaves"), Error);
  x.set_requires_grad(false);
  CHECK_FALSE(x.requires_grad());
  Variable undefined;
  CHECK_FALSE(undefined.defined());
  CHECK_THROWS_AS(undefined.backward(), Error);
}

TEST_CASE("the registry: ops must be listed, and a grad_fn's gradients are checked") {
  const auto& ops = differentiable_ops();
  CHECK(ops.size() > 30);
  CHECK(is_differentiable_op("matmul"));
  CHECK_FALSE(is_differentiable_op("not_an_op"));
  Variable x(f64({1, 2}, {2}), true);
  auto identity = [](const std::vector<Variable>&, const Tensor& g) { return std::vector<Tensor>{g}; };
  CHECK_THROWS_WITH_AS(record("not_an_op", x.data().clone(), {x}, identity), doctest::Contains("not_an_op"), Error);
  // A grad_fn that returns the wrong shape is caught by the engine, naming the op.
  Variable bad = record("add", x.data().clone(), {x}, [](const std::vector<Variable>&, const Tensor&) {
    return std::vector<Tensor>{zeros({3}, DType::Float64)};
  });
  CHECK_THROWS_WITH_AS(sum(bad).backward(), doctest::Contains("'add' returned gradient"), Error);
}

TEST_CASE("ops on bad arguments throw moelab::Error naming the op") {
  Variable a(zeros({2, 3}, DType::Float64), true);
  Variable b(zeros({4}, DType::Float64), true);
  CHECK_THROWS_WITH_AS(add(a, b), doctest::Contains("add"), Error);
  CHECK_THROWS_WITH_AS(mul(a, b), doctest::Contains("mul"), Error);
  CHECK_THROWS_WITH_AS(matmul(a, a), doctest::Contains("matmul"), Error);
  CHECK_THROWS_WITH_AS(mse_loss(a, b), doctest::Contains("mse_loss"), Error);
  CHECK_THROWS_WITH_AS(concat({a, b}, 0), doctest::Contains("concat"), Error);
  CHECK_THROWS_WITH_AS(reshape(a, {5}), doctest::Contains("reshape"), Error);
  CHECK_THROWS_WITH_AS(rmsnorm(a, b, 1e-5), doctest::Contains("rmsnorm"), Error);
  CHECK_THROWS_WITH_AS(softmax(Variable(arange(0, 3))), doctest::Contains("softmax"), Error);
  // cross_entropy: float targets are refused.
  CHECK_THROWS_WITH_AS(cross_entropy(a, zeros({2}, DType::Float64)), doctest::Contains("cross_entropy"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(a, zeros({3}, DType::Int32)), doctest::Contains("cross_entropy"), Error);
  CHECK_THROWS_WITH_AS(index_select(a, from_vector(std::vector<std::int32_t>{5}, {1})),
                       doctest::Contains("index_select"), Error);
  CHECK_THROWS_WITH_AS(topk(a, 4), doctest::Contains("topk"), Error);
}

// mse_loss multiplies the difference by itself (autograd/ops_loss.cpp) so that it needs no unary
// op; that is square(d) to the last bit, forward and backward, in both float dtypes.
TEST_CASE("mse_loss is mean(square(pred - target)) bit for bit, gradients included") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(4);
    const Tensor p0 = normal({7, 5}, 0.0, 1.0, gen, dtype), t0 = normal({7, 5}, 0.0, 1.0, gen, dtype);
    Variable a(p0.clone(), true), b(t0.clone(), true), c(p0.clone(), true), d(t0.clone(), true);
    const Variable fused = mse_loss(a, b), reference = mean(square(c - d));
    CHECK(fused.data().to_vector<double>() == reference.data().to_vector<double>());
    fused.backward();
    reference.backward();
    CHECK(a.grad().to_vector<double>() == c.grad().to_vector<double>());
    CHECK(b.grad().to_vector<double>() == d.grad().to_vector<double>());
  }
}

TEST_CASE("a leaf's gradient is its own memory: no other gradient, seed or hook copy changes with it") {
  // run_backward keeps a leaf's first contribution without a copy only when nothing else holds it;
  // each case below hands the leaf a gradient something else holds, and writes through grad().
  const auto write = [](const Variable& v) {
    Tensor g = v.grad();
    g.data<double>()[0] = 42.0;
  };
  SUBCASE("add hands one tensor to both of its inputs") {
    Variable a(f64({1, 2}, {2}), true), b(f64({3, 4}, {2}), true);
    (a + b).backward(f64({5, 6}, {2}));
    write(a);
    check_close(b.grad(), {5, 6});
    check_close(a.grad(), {42, 6});
  }
  SUBCASE("the caller's seed") {
    Variable x(f64({1, 2}, {2}), true);
    const Tensor seed = f64({7, 8}, {2});
    x.backward(seed);
    write(x);
    check_close(seed, {7, 8});
  }
  SUBCASE("a hook that keeps the gradient it saw") {
    Variable x(f64({1, 2}, {2}), true);
    Tensor seen;
    x.register_hook([&](const Tensor& g) {
      seen = g;
      return Tensor();
    });
    sum(x * 3.0).backward();
    write(x);
    check_close(seen, {3, 3});
  }
  SUBCASE("a gradient that nothing else holds is kept, and a later backward adds to it") {
    Variable w(f64({1, 2, 3, 4}, {2, 2}), true);
    Variable x(f64({1, 1}, {1, 2}), false);
    sum(matmul(x, w)).backward();
    check_close(w.grad(), {1, 1, 1, 1});
    sum(matmul(x, w)).backward();
    check_close(w.grad(), {2, 2, 2, 2});
  }
}

TEST_CASE("sole_handle: one handle spanning its storage, no copies, no views") {
  Tensor t = f64({1, 2, 3, 4}, {4});
  CHECK(t.sole_handle());
  {
    Tensor copy = t;
    CHECK_FALSE(t.sole_handle());
  }
  CHECK(t.sole_handle());
  Tensor view = t.slice(1, 2);
  CHECK_FALSE(view.sole_handle());
  t = Tensor();
  CHECK_FALSE(view.sole_handle());  // the only handle, but on part of its storage
  CHECK_FALSE(Tensor().sole_handle());
}
