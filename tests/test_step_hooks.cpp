// tests/test_step_hooks.cpp — nn/optim/step_hooks.h and what it replaced: Optimizer::step runs the
// hooks attached to its parameters, each once, in order, after the update; a dropped handle runs
// nothing; an optimizer that does not hold the parameter does not run its hook. An aux-free MoE
// layer trained by a loop that calls nothing but opt.step() balances (its expert bias moves): a
// loop written before the hooks had to call routers_after_optimizer_step, or the bias stayed 0.
// Also AuxLosses::added_to, so that a loop needs no defined() test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/parallel.h"
#include "nn/moe/moe_layer.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "nn/optim/step_hooks.h"

using namespace moelab;

TEST_CASE("StepHook: the optimizer runs its parameters' hooks after the update, once each, in order") {
  Variable a(full({2}, 1.0), true), b(full({2}, 1.0), true), other(full({2}, 1.0), true);
  std::vector<std::string> calls;
  double seen_a = 0;
  {
    StepHook h1(a, [&] {
      calls.push_back("a");
      seen_a = a.data().to_vector<float>()[0];  // after the update
    });
    StepHook h2(b, [&] { calls.push_back("b"); });
    StepHook h3(other, [&] { calls.push_back("other"); });
    SGD opt({a, b}, 0.5);
    for (Variable* p : {&a, &b}) p->set_grad(full({2}, 1.0));
    opt.step();
    CHECK(calls == std::vector<std::string>{"a", "b"});  // not "other": opt does not hold it
    CHECK(seen_a == doctest::Approx(0.5));                // 1 - 0.5 * 1: the hook saw the new value
    // A moved handle keeps the hook; the moved-from one is empty.
    StepHook moved = std::move(h1);
    CHECK(moved.active());
    CHECK_FALSE(h1.active());
    opt.step();
    CHECK(calls.size() == 4);
  }
  // Every handle gone: nothing runs.
  SGD opt({a, b, other}, 0.5);
  CHECK(run_step_hooks({a, b, other}) == 0);
  opt.step();
  CHECK(calls.size() == 4);
  // A frozen parameter (no gradient tracked) cannot carry one, nor can an empty function.
  CHECK_THROWS_AS(StepHook(Variable(zeros({2})), [] {}), Error);
  CHECK_THROWS_AS(StepHook(a, std::function<void()>()), Error);
}

TEST_CASE("an aux-free MoE layer balances in a loop that only calls opt.step(): the router's hook runs") {
  set_num_threads(1);
  Generator gen(4);
  MoEConfig c{.d = 6, .experts = 4, .k = 1, .ffn = 5, .router = "aux-free", .router_options = {{"update_rate", "0.1"}}};
  MoELayer moe(c, gen);
  AdamW opt(moe.parameters(), AdamOptions{.lr = 1e-2});
  const Tensor x = normal({32, 6}, 0.0, 1.0, gen), target = normal({32, 6}, 0.0, 1.0, gen);
  auto bias = [&] { return moe.named_buffers().at(0).second.to_vector<float>(); };
  REQUIRE(moe.named_buffers().at(0).first == "router.expert_bias");
  CHECK(bias() == std::vector<float>(4, 0.0f));
  for (int step = 0; step < 3; ++step) {
    AuxLosses aux;
    const Variable loss = aux.added_to(mse_loss(moe.forward_with_aux(Variable(x), aux), Variable(target)));
    opt.zero_grad();
    loss.backward();
    opt.step();  // nothing else: the bias update is the layer's step hook
  }
  // 32 tokens on 4 experts are not 8 each from a random router: a bias moves by 0.1 per update
  // (sign(mean - count) * update_rate), at most 0.3 in three.
  double moved = 0;
  for (float v : bias()) moved = std::max(moved, std::abs(static_cast<double>(v)));
  CHECK(moved > 0.05);
  CHECK(moved < 0.30001);
}

TEST_CASE("AuxLosses::added_to: the task loss alone when empty, else plus every term") {
  const Variable task(full({}, 2.0), true);
  AuxLosses none;
  CHECK_FALSE(none.total().defined());
  const Variable same = none.added_to(task);
  CHECK(same.data().item<double>() == 2.0);
  same.backward();
  CHECK(task.grad().item<double>() == 1.0);
  AuxLosses two;
  two.add("a", Variable(full({}, 0.25)));
  two.add("b", Variable(full({}, 0.5)));
  CHECK(two.added_to(task).data().item<double>() == 2.75);
}
