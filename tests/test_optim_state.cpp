// tests/test_optim_state.cpp — the Optimizer base class (group validation, base_lr, lr factors,
// zero_grad, flat order) and checkpoint state: state_tensors() / load_state_tensors() resume
// bitwise identically to an uninterrupted run, and every kind of mismatch is refused with a
// moelab::Error that names it.
#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/factories.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "tests/test_util.h"

using namespace moelab;

namespace {

// Runs f and checks it throws moelab::Error whose message contains every needle.
void throws_with(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const std::string& n : needles) CHECK_MESSAGE(what.find(n) != std::string::npos, "'", n, "' not in: ", what);
    return;
  }
  FAIL("expected a moelab::Error");
}

using Named = std::vector<std::pair<std::string, Tensor>>;
using Make = std::function<std::unique_ptr<Optimizer>(std::vector<Variable>)>;

std::vector<Variable> make_params(DType dtype) {
  Generator gen(5);
  return {Variable(normal({4, 3}, 0, 1, gen, dtype), true), Variable(normal({3}, 0, 1, gen, dtype), true),
          Variable(normal({2, 2}, 0, 1, gen, dtype), true)};
}

std::vector<Variable> clone_params(const std::vector<Variable>& ps) {
  std::vector<Variable> out;
  for (const Variable& p : ps) out.emplace_back(p.data().clone(), true);
  return out;
}

// Gradients for step s (parameter 2 gets none before step 2, so it has no state at the save).
void set_grads(std::vector<Variable>& ps, int s) {
  Generator gen(100 + static_cast<std::uint64_t>(s));
  for (std::size_t i = 0; i < ps.size(); ++i) {
    ps[i].zero_grad();
    const Tensor g = normal(ps[i].shape(), 0, 1, gen, ps[i].dtype());
    if (i == 2 && s < 2) continue;
    ps[i].set_grad(g);
  }
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         moelab::testing::to_doubles(a) == moelab::testing::to_doubles(b);
}

// 6 steps straight vs 3 steps, save, a fresh optimizer on copied parameters, load, 3 steps.
void check_resume(const Make& make, DType dtype) {
  std::vector<Variable> a = make_params(dtype);
  auto opt_a = make(a);
  for (int s = 0; s < 2; ++s) set_grads(a, s), opt_a->step();
  const Named saved = opt_a->state_tensors();
  std::vector<Variable> b = clone_params(a);
  auto opt_b = make(b);
  opt_b->load_state_tensors(saved);
  opt_b->set_steps_taken(opt_a->steps_taken());
  for (const auto& [name, t] : saved) CHECK_MESSAGE(name.back() != '2', name, ": parameter 2 had no update yet");
  for (int s = 2; s < 6; ++s) {
    set_grads(a, s), opt_a->step();
    set_grads(b, s), opt_b->step();
  }
  CHECK(opt_b->steps_taken() == 6);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(bitwise_equal(a[i].data(), b[i].data()));
  const Named sa = opt_a->state_tensors(), sb = opt_b->state_tensors();
  REQUIRE(sa.size() == sb.size());
  for (std::size_t k = 0; k < sa.size(); ++k) {
    CHECK(sa[k].first == sb[k].first);
    CHECK(bitwise_equal(sa[k].second, sb[k].second));
  }
}

std::unique_ptr<Optimizer> make_adamw(std::vector<Variable> ps) {
  return std::make_unique<AdamW>(std::move(ps), AdamOptions{.lr = 0.01});
}
std::unique_ptr<Optimizer> make_sgd(std::vector<Variable> ps) {
  return std::make_unique<SGD>(std::move(ps), 0.05, SGDOptions{.momentum = 0.9, .dampening = 0.1}, 0.01);
}

}  // namespace

TEST_CASE("Optimizer validates its groups") {
  Variable a(zeros({2}), true), b(zeros({3}), true);
  CHECK_NOTHROW(SGD({ParamGroup{{a}, 0.1}, ParamGroup{{}, 0.1}, ParamGroup{{b}, 0.2}}));
  throws_with([&] { SGD({ParamGroup{{a}, 0.1}, ParamGroup{{a}, 0.2}}); }, {"Optimizer", "group 1 param 0", "only once"});
  throws_with([&] { SGD({ParamGroup{{a, b, a}, 0.1}}); }, {"group 0 param 2", "same parameter as flat param 0"});
  Variable a_again = a;  // another handle to the same parameter
  throws_with([&] { SGD({a, a_again}, 0.1); }, {"only once"});
  throws_with([&] { SGD({ParamGroup{{a}, -0.1}}); }, {"group 0", "lr must be finite and >= 0"});
  throws_with([&] { SGD({ParamGroup{{a}, 0.1, -1, -0.5}}); }, {"weight_decay"});
  throws_with([&] { SGD({Variable()}, 0.1); }, {"group 0 param 0"});
  throws_with([&] { SGD({Variable(zeros({2}, DType::Int32))}, 0.1); }, {"float32 or float64"});
  throws_with([&] { SGD(std::vector<ParamGroup>{ParamGroup{}}); }, {"no parameters"});
  throws_with([&] { SGD(std::vector<ParamGroup>{}); }, {"no parameters"});
}

TEST_CASE("base_lr, set_lr_factor, zero_grad and the flat order") {
  Variable a(zeros({2}), true), b(zeros({3}), true), c(zeros({1}), true);
  AdamW opt({ParamGroup{.params = {a, b}, .lr = 0.1}, ParamGroup{.params = {c}, .lr = 0.3, .base_lr = 1.0}});
  CHECK(opt.groups()[0].base_lr == 0.1);  // copied from lr
  CHECK(opt.groups()[1].base_lr == 1.0);  // kept
  opt.set_lr_factor(0.5);
  CHECK(opt.groups()[0].lr == doctest::Approx(0.05));
  CHECK(opt.groups()[1].lr == doctest::Approx(0.5));
  opt.set_lr_factor(0.0);
  CHECK(opt.groups()[0].lr == 0.0);
  CHECK_THROWS_AS(opt.set_lr_factor(-1.0), Error);
  const auto flat = opt.flat_params();
  REQUIRE(flat.size() == 3);
  CHECK(flat[0].node() == a.node());
  CHECK(flat[1].node() == b.node());
  CHECK(flat[2].node() == c.node());
  a.set_grad(ones({2}));
  c.set_grad(ones({1}));
  opt.zero_grad();
  CHECK(!a.grad().defined());
  CHECK(!c.grad().defined());
  // A step with lr 0 and no decay changes nothing but still counts.
  a.set_grad(ones({2}));
  opt.step();
  CHECK(opt.steps_taken() == 1);
  CHECK(moelab::testing::to_doubles(a.data()) == std::vector<double>{0, 0});
}

TEST_CASE("state round trip resumes bitwise identically (AdamW and SGD, float32 and float64)") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    CAPTURE(dtype);
    check_resume(make_adamw, dtype);
    check_resume(make_sgd, dtype);
  }
}

TEST_CASE("state_tensors names, shapes and snapshot semantics") {
  std::vector<Variable> ps = make_params(DType::Float32);
  AdamW opt(ps);
  CHECK(opt.state_tensors().empty());  // nothing before the first update
  set_grads(ps, 0);
  opt.step();
  const Named s = opt.state_tensors();
  REQUIRE(s.size() == 6);  // parameters 0 and 1; parameter 2 had no gradient
  CHECK(s[0].first == "exp_avg.0");
  CHECK(s[1].first == "exp_avg_sq.0");
  CHECK(s[2].first == "step.0");
  CHECK(s[3].first == "exp_avg.1");
  CHECK(s[0].second.shape() == Shape{4, 3});
  CHECK(s[2].second.shape() == Shape{});
  CHECK(s[2].second.dtype() == DType::Float64);
  CHECK(s[2].second.item<double>() == 1.0);
  const std::vector<double> before = moelab::testing::to_doubles(s[0].second);
  set_grads(ps, 1);
  opt.step();
  CHECK(moelab::testing::to_doubles(s[0].second) == before);  // a copy, not the live buffer
  SGD plain(ps, 0.1);
  plain.step();
  CHECK(plain.state_tensors().empty());  // no momentum, no state
}

TEST_CASE("load_state_tensors refuses mismatched state and names the problem") {
  std::vector<Variable> ps = make_params(DType::Float32);
  AdamW opt(ps);
  for (int s = 0; s < 3; ++s) set_grads(ps, s), opt.step();
  const Named good = opt.state_tensors();
  auto without = [&](const std::string& name) {
    Named out;
    for (const auto& e : good)
      if (e.first != name) out.push_back(e);
    return out;
  };
  auto with = [&](Named base, const std::string& name, Tensor t) {
    base.emplace_back(name, std::move(t));
    return base;
  };
  auto replaced = [&](const std::string& name, Tensor t) { return with(without(name), name, std::move(t)); };
  AdamW fresh(clone_params(ps));
  CHECK_NOTHROW(fresh.load_state_tensors(good));
  throws_with([&] { fresh.load_state_tensors(without("exp_avg_sq.1")); },
              {"AdamW::load_state_tensors", "parameter 1", "missing exp_avg_sq.1"});
  throws_with([&] { fresh.load_state_tensors(with(good, "exp_avg.7", zeros({2}))); },
              {"'exp_avg.7'", "optimizer has 3 parameters"});
  throws_with([&] { fresh.load_state_tensors(with(good, "momentum_buffer.0", zeros({4, 3}))); },
              {"unknown buffer 'momentum_buffer'"});
  throws_with([&] { fresh.load_state_tensors(with(good, "exp_avg", zeros({4, 3}))); }, {"'exp_avg' is not"});
  throws_with([&] { fresh.load_state_tensors(with(good, "exp_avg.0", zeros({4, 3}))); }, {"'exp_avg.0' is given twice"});
  throws_with([&] { fresh.load_state_tensors(replaced("exp_avg.0", zeros({3, 4}))); },
              {"'exp_avg.0' is float32 [3, 4]", "parameter 0 is float32 [4, 3]"});
  throws_with([&] { fresh.load_state_tensors(replaced("exp_avg_sq.0", zeros({4, 3}, DType::Float64))); },
              {"'exp_avg_sq.0' is float64"});
  throws_with([&] { fresh.load_state_tensors(replaced("step.1", zeros({}, DType::Float64))); },
              {"'step.1'", "whole number >= 1"});
  throws_with([&] { fresh.load_state_tensors(replaced("step.1", ones({1}, DType::Float64))); },
              {"'step.1' must be a 0-d float64 counter"});
  // Several problems are reported together.
  throws_with([&] { fresh.load_state_tensors(with(without("step.0"), "bogus.0", zeros({1}))); },
              {"missing step.0", "unknown buffer 'bogus'"});
  // SGD: a wrong shape, and state given to an SGD without momentum.
  SGD sgd(clone_params(ps), 0.1, {.momentum = 0.9});
  throws_with([&] { sgd.load_state_tensors({{"momentum_buffer.1", zeros({4})}}); },
              {"SGD::load_state_tensors", "'momentum_buffer.1' is float32 [4]", "[3]"});
  SGD plain(clone_params(ps), 0.1);
  throws_with([&] { plain.load_state_tensors({{"momentum_buffer.0", zeros({4, 3})}}); }, {"without momentum"});
}

TEST_CASE("a failed load changes nothing") {
  std::vector<Variable> ps = make_params(DType::Float64);
  AdamW opt(ps);
  set_grads(ps, 0);
  opt.step();
  const Named before = opt.state_tensors();
  Named bad = before;
  bad.emplace_back("exp_avg.9", zeros({1}, DType::Float64));
  CHECK_THROWS_AS(opt.load_state_tensors(bad), Error);
  const Named after = opt.state_tensors();
  REQUIRE(after.size() == before.size());
  for (std::size_t k = 0; k < after.size(); ++k) CHECK(bitwise_equal(after[k].second, before[k].second));
}
