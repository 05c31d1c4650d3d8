// tests/test_optim.cpp — SGD, Adam and AdamW against a hand-written double-precision reference of
// PyTorch 1.13's formulas over several steps (weight decay, momentum, dampening, Nesterov,
// parameter groups with different lr and weight decay, parameters without a gradient skipped),
// in float32 and float64; float32 results pinned bitwise to values torch 1.13 printed; AdamW
// minimising a quadratic through autograd; the fused kernels' thread-count independence and
// argument checks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/parallel.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "tests/test_util.h"

using namespace moelab;
using moelab::testing::max_error;
using moelab::testing::to_doubles;

namespace {

// ---------------------------------------------------------------- the reference, in double
struct RefParam {
  std::vector<double> p, m, v, buf;
  std::int64_t step = 0;  // Adam: this parameter's update count
  bool has_buf = false;   // SGD: momentum buffer created
};

void ref_adam(RefParam& r, const std::vector<double>& grad, double lr, double wd, bool decoupled, double beta1,
              double beta2, double eps) {
  if (r.m.empty()) r.m.assign(r.p.size(), 0.0), r.v.assign(r.p.size(), 0.0);
  ++r.step;
  const double bc1 = 1 - std::pow(beta1, static_cast<double>(r.step));
  const double bc2 = 1 - std::pow(beta2, static_cast<double>(r.step));
  for (std::size_t i = 0; i < r.p.size(); ++i) {
    double g = grad[i];
    if (decoupled) r.p[i] *= 1 - lr * wd;
    else g += wd * r.p[i];
    r.m[i] = beta1 * r.m[i] + (1 - beta1) * g;
    r.v[i] = beta2 * r.v[i] + (1 - beta2) * g * g;
    r.p[i] -= lr / bc1 * r.m[i] / (std::sqrt(r.v[i]) / std::sqrt(bc2) + eps);
  }
}

void ref_sgd(RefParam& r, const std::vector<double>& grad, double lr, double wd, const SGDOptions& o) {
  if (!r.has_buf) r.buf.assign(r.p.size(), 0.0);
  for (std::size_t i = 0; i < r.p.size(); ++i) {
    double d = grad[i] + wd * r.p[i];
    if (o.momentum != 0) {
      r.buf[i] = r.has_buf ? o.momentum * r.buf[i] + (1 - o.dampening) * d : d;
      d = o.nesterov ? d + o.momentum * r.buf[i] : r.buf[i];
    }
    r.p[i] -= lr * d;
  }
  r.has_buf = o.momentum != 0;
}

// ---------------------------------------------------------------- the scenario
// Three parameters in two groups: group 0 = {a [3, 4], b [5]}, group 1 = {c [2, 3]}. Parameter b
// gets no gradient on steps 1 and 2 (0-based), so its per-parameter step count falls behind.
struct Scenario {
  std::vector<Shape> shapes = {{3, 4}, {5}, {2, 3}};
  std::vector<std::size_t> group_of = {0, 0, 1};
  double lr[2] = {0.05, 0.02};
  double wd[2] = {0.1, 0.0};
  int steps = 6;
  bool skipped(std::size_t param, int step) const { return param == 1 && (step == 1 || step == 2); }
};

std::vector<double> random_values(std::int64_t n, Generator& gen, double scale) {
  std::vector<double> out(static_cast<std::size_t>(n));
  for (double& x : out) x = scale * gen.next_normal();
  return out;
}

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup>)>;
using RefUpdate = std::function<void(RefParam&, const std::vector<double>&, double lr, double wd)>;

// Runs the scenario through `make` in `dtype` and through `ref`, checking every parameter after
// every step; returns the worst error seen.
double run_scenario(DType dtype, const MakeOptimizer& make, const RefUpdate& ref) {
  Scenario sc;
  Generator gen(7);
  std::vector<Variable> params;
  std::vector<RefParam> refs;
  for (const Shape& s : sc.shapes) {
    RefParam r;
    r.p = random_values(s.numel(), gen, 1.0);
    refs.push_back(r);
    params.emplace_back(from_vector(r.p, s).to(dtype), true);
  }
  std::vector<ParamGroup> groups(2);
  for (std::size_t i = 0; i < params.size(); ++i) groups[sc.group_of[i]].params.push_back(params[i]);
  for (int gi = 0; gi < 2; ++gi) groups[gi].lr = sc.lr[gi], groups[gi].weight_decay = sc.wd[gi];
  std::unique_ptr<Optimizer> opt = make(std::move(groups));

  double worst = 0;
  for (int step = 0; step < sc.steps; ++step) {
    opt->zero_grad();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::vector<double> g = random_values(sc.shapes[i].numel(), gen, 0.5);
      if (sc.skipped(i, step)) continue;
      params[i].set_grad(from_vector(g, sc.shapes[i]).to(dtype));
      // The reference sees the gradient as the optimizer does (rounded to dtype).
      ref(refs[i], to_doubles(params[i].grad()), sc.lr[sc.group_of[i]], sc.wd[sc.group_of[i]]);
    }
    opt->step();
    for (std::size_t i = 0; i < params.size(); ++i) worst = std::max(worst, max_error(params[i].data(), refs[i].p));
  }
  CHECK(opt->steps_taken() == sc.steps);
  return worst;
}

void check_both_dtypes(const MakeOptimizer& make, const RefUpdate& ref) {
  const double err64 = run_scenario(DType::Float64, make, ref);
  const double err32 = run_scenario(DType::Float32, make, ref);
  CHECK(err64 < 1e-12);
  CHECK(err32 < 5e-6);
}

}  // namespace

TEST_CASE("AdamW matches PyTorch's formulas over steps, groups and skipped parameters") {
  const AdamOptions o{.lr = 1e-3, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6};
  check_both_dtypes([&](std::vector<ParamGroup> g) { return std::make_unique<AdamW>(std::move(g), o); },
                    [&](RefParam& r, const std::vector<double>& g, double lr, double wd) {
                      ref_adam(r, g, lr, wd, true, o.beta1, o.beta2, o.eps);
                    });
}

TEST_CASE("Adam (L2 weight decay) matches PyTorch's formulas") {
  const AdamOptions o{};
  check_both_dtypes([&](std::vector<ParamGroup> g) { return std::make_unique<Adam>(std::move(g), o); },
                    [&](RefParam& r, const std::vector<double>& g, double lr, double wd) {
                      ref_adam(r, g, lr, wd, false, o.beta1, o.beta2, o.eps);
                    });
}

TEST_CASE("SGD matches PyTorch's formulas: plain, momentum with dampening, Nesterov") {
  for (const SGDOptions o : {SGDOptions{}, SGDOptions{.momentum = 0.9, .dampening = 0.25},
                             SGDOptions{.momentum = 0.8, .nesterov = true}}) {
    CAPTURE(o.momentum);
    CAPTURE(o.nesterov);
    check_both_dtypes([&](std::vector<ParamGroup> g) { return std::make_unique<SGD>(std::move(g), o); },
                      [&](RefParam& r, const std::vector<double>& g, double lr, double wd) { ref_sgd(r, g, lr, wd, o); });
  }
}

TEST_CASE("float32 updates equal torch 1.13's bitwise (values printed by torch, three steps)") {
  // torch.optim.*([p], ...) on p = the values below, p.grad = each row of `grads`, three steps.
  const std::vector<double> p0 = {0.5, -1.25, 2.0, 0.0, 3.5, -0.75};
  const std::vector<std::vector<double>> grads = {
      {0.1, -0.2, 0.3, 0.0, -1.5, 2.0}, {0.25, 0.5, -0.125, 1.0, 0.0, -3.0}, {-0.4, 0.05, 0.3, -0.7, 2.5, 0.6}};
  auto run = [&](auto make) {
    Variable p(from_vector(p0, {6}).to(DType::Float32), true);
    auto opt = make(std::vector<Variable>{p});
    for (const auto& g : grads) {
      p.set_grad(from_vector(g, {6}).to(DType::Float32));
      opt->step();
    }
    return to_doubles(p.data());
  };
  // AdamW(lr=0.1, weight_decay=0.1)
  CHECK(run([](std::vector<Variable> ps) { return std::make_unique<AdamW>(ps, AdamOptions{.lr = 0.1, .weight_decay = 0.1}); }) ==
        std::vector<double>{0x1.39ebf4p-2, -0x1.32d6bap+0, 0x1.bf5bfap+0, -0x1.58a2f6p-4, 0x1.c42016p+1, -0x1.95ec28p-1});
  // Adam(lr=0.1, weight_decay=0.1)
  CHECK(run([](std::vector<Variable> ps) { return std::make_unique<Adam>(ps, AdamOptions{.lr = 0.1, .weight_decay = 0.1}); }) ==
        std::vector<double>{0x1.34b37p-2, -0x1.2a711cp+0, 0x1.bcc0dep+0, -0x1.59f1c6p-4, 0x1.cc32dcp+1, -0x1.9ecb64p-1});
  // SGD(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)
  CHECK(run([](std::vector<Variable> ps) {
          return std::make_unique<SGD>(ps, 0.1, SGDOptions{.momentum = 0.9, .nesterov = true}, 0.01);
        }) == std::vector<double>{0x1.e15104p-2, -0x1.50f294p+0, 0x1.db9f3cp+0, -0x1.19e278p-3, 0x1.c16e78p+1,
                                  -0x1.76ae48p-1});
}

TEST_CASE("AdamW and Adam defaults are PyTorch's") {
  Variable p(zeros({2}), true);
  AdamW w({p});
  CHECK(w.groups()[0].lr == 1e-3);
  CHECK(w.groups()[0].weight_decay == 0.01);
  CHECK(w.options().beta1 == 0.9);
  CHECK(w.options().beta2 == 0.999);
  CHECK(w.options().eps == 1e-8);
  CHECK(w.decoupled());
  Adam a({p}, {.lr = 3e-4});
  CHECK(a.groups()[0].lr == 3e-4);
  CHECK(a.groups()[0].weight_decay == 0.0);
  CHECK(!a.decoupled());
  CHECK(AdamW({p}, {.weight_decay = 0.0}).groups()[0].weight_decay == 0.0);
}

TEST_CASE("AdamW minimises a quadratic through autograd") {
  // loss = sum((w - target)^2); with weight decay 0 the minimum is w = target.
  Generator gen(3);
  const Tensor target = normal({4, 3}, 0.0, 1.0, gen);
  Variable w(zeros({4, 3}), true);
  AdamW opt({w}, {.lr = 0.05, .weight_decay = 0.0});
  double first = 0, last = 0;
  for (int s = 0; s < 400; ++s) {
    opt.zero_grad();
    const Variable diff = w - Variable(target);
    Variable loss = sum(diff * diff);
    loss.backward();
    opt.step();
    (s == 0 ? first : last) = loss.data().item<float>();
  }
  CHECK(first > 1.0);
  CHECK(last < 1e-4);
  CHECK(max_error(w.data(), to_doubles(target)) < 1e-2);
}

TEST_CASE("the fused kernels give the same bits on 1 and 2 threads") {
  Generator gen(11);
  const std::int64_t n = 100003;  // several chunks, not a multiple of the SIMD width
  const Tensor p0 = normal({n}, 0, 1, gen), g = normal({n}, 0, 1, gen), m0 = normal({n}, 0, 0.1, gen);
  const Tensor v0 = uniform({n}, 0, 0.1, gen);
  auto run = [&](int threads) {
    set_num_threads(threads);
    Tensor p = p0.clone(), m = m0.clone(), v = v0.clone(), buf = m0.clone();
    kernels::adam_update(p, g, m, v, {.lr = 0.01, .weight_decay = 0.1, .step = 3});
    kernels::sgd_update(p, g, buf, {.lr = 0.01, .momentum = 0.9, .weight_decay = 0.1, .nesterov = true});
    return std::vector<std::vector<float>>{p.to_vector<float>(), m.to_vector<float>(), v.to_vector<float>(),
                                           buf.to_vector<float>()};
  };
  const int before = num_threads();
  const auto one = run(1), two = run(2);
  set_num_threads(before);
  CHECK(one == two);
  CHECK(one[0] != p0.to_vector<float>());
}

TEST_CASE("adam_update and sgd_update check their arguments") {
  Tensor p = zeros({3}), g = ones({3}), m = zeros({3}), v = zeros({3}), buf = zeros({3});
  auto throws_with = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
    } catch (const Error& e) {
      const std::string what = e.what();
      CHECK_MESSAGE(what.find(needle) != std::string::npos, what);
      return;
    }
    FAIL("no moelab::Error containing '" << needle << "'");
  };
  Tensor undefined, wrong_shape = zeros({4}), wrong_dtype = zeros({3}, DType::Float64), ints = zeros({3}, DType::Int32);
  throws_with([&] { kernels::adam_update(p, wrong_shape, m, v, {}); }, "adam_update: grad has shape [4]");
  throws_with([&] { kernels::adam_update(p, g, wrong_dtype, v, {}); }, "exp_avg is float64");
  throws_with([&] { kernels::adam_update(p, g, m, undefined, {}); }, "exp_avg_sq");
  throws_with([&] { kernels::adam_update(ints, g, m, v, {}); }, "param must be float32 or float64");
  throws_with([&] { kernels::adam_update(p, g, m, m, {}); }, "share storage");
  Tensor alias = p.reshape({3});
  throws_with([&] { kernels::adam_update(p, g, alias, v, {}); }, "share storage");
  throws_with([&] { kernels::adam_update(p, g, m, v, {.beta1 = 1.0}); }, "beta1");
  throws_with([&] { kernels::adam_update(p, g, m, v, {.beta2 = -0.1}); }, "beta2");
  throws_with([&] { kernels::adam_update(p, g, m, v, {.lr = -1}); }, "lr must be");
  throws_with([&] { kernels::adam_update(p, g, m, v, {.eps = NAN}); }, "eps must be");
  throws_with([&] { kernels::adam_update(p, g, m, v, {.weight_decay = -0.5}); }, "weight_decay");
  throws_with([&] { kernels::adam_update(p, g, m, v, {.step = 0}); }, "step");
  throws_with([&] { kernels::sgd_update(p, wrong_shape, buf, {}); }, "sgd_update: grad has shape [4]");
  throws_with([&] { kernels::sgd_update(p, g, buf, {.momentum = -1}); }, "momentum must be");
  Tensor none;
  throws_with([&] { kernels::sgd_update(p, g, none, {.momentum = 0.9}); }, "momentum_buffer");
  throws_with([&] { kernels::sgd_update(p, g, buf, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}); },
              "nesterov");
  throws_with([&] { kernels::sgd_update(p, g, buf, {.momentum = 0.0, .nesterov = true}); }, "nesterov");
  // Nothing above changed p; momentum 0 needs no buffer.
  CHECK(to_doubles(p) == std::vector<double>{0, 0, 0});
  kernels::sgd_update(p, g, none, {.lr = 0.5});
  CHECK(to_doubles(p) == std::vector<double>{-0.5, -0.5, -0.5});
  // Optimizer-level option checks.
  Variable w(zeros({2}), true);
  CHECK_THROWS_AS(SGD({w}, 0.1, SGDOptions{.momentum = 0.0, .nesterov = true}), Error);
  CHECK_THROWS_AS(SGD({w}, -0.1), Error);
  CHECK_THROWS_AS(AdamW({w}, {.beta2 = 1.0}), Error);
  CHECK_THROWS_AS(Adam({w}, {.eps = -1e-8}), Error);
}
