// tests/test_relu_router.cpp — ReMoE's ReLU routing (nn/moe/relu_router.h).
//   - the plan by hand: slot e is expert e where relu(x . w_e) > 0, gate = that value, slots count
//     them; the L1 term lambda E sum_e f_e P_e with f over T k, hand-computed
//   - the controller: lambda * alpha when the sparsity is below 1 - k/E, / alpha above, once per
//     optimizer step for all the routers of a decoder (moe_feed_forward links them), and only
//     training forwards count; link_relu_routers links any model's routers
//   - training steers the sparsity from about 1/2 at initialisation to near the target 1 - k/E
//   - options and k refused with messages
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/no_grad.h"
#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/moe_decoder.h"
#include "nn/moe/moe_layer.h"
#include "nn/moe/relu_router.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "test_util.h"

using namespace moelab;
using moelab::testing::to_doubles;

namespace {

std::shared_ptr<ReluRouter> relu_router(std::int64_t d, std::int64_t E, std::int64_t k, Generator& gen,
                                        const std::string& l1_init = "0.5") {
  return std::dynamic_pointer_cast<ReluRouter>(
      make_relu_router(RouterConfig{d, E, k, DType::Float64, {{"l1_init", l1_init}}}, gen));
}

double lambda_of(const ReluRouter& r) { return r.control()->lambda(); }

void set_weight(const ReluRouter& r, const Tensor& w) {
  Tensor data = r.weight().data();  // a handle on the parameter's storage
  kernels::copy(data, w);
}

}  // namespace

TEST_CASE("ReLU routing: experts where the gate is positive, gate = relu, the L1 term by hand") {
  Generator gen(1);
  const auto router = relu_router(2, 3, 1, gen);
  // w_0 = (1, 0), w_1 = (0, 1), w_2 = (-1, -1)
  set_weight(*router, from_vector(std::vector<double>{1, 0, 0, 1, -1, -1}, {3, 2}));
  const Tensor x = from_vector(std::vector<double>{2, 1, -1, 3, -1, -2}, {3, 2});
  // logits: t0 (2, 1, -3), t1 (-1, 3, -2), t2 (-1, -2, 3)
  const RoutingPlan plan = router->route(Variable(x));
  CHECK(plan.experts.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, kUnusedSlot, kUnusedSlot, 1,
                                                                            kUnusedSlot, kUnusedSlot, kUnusedSlot, 2});
  CHECK(to_doubles(plan.gates.data()) == std::vector<double>{2, 1, 0, 0, 3, 0, 0, 0, 3});
  CHECK(plan.slots.to_vector<std::int32_t>() == std::vector<std::int32_t>{2, 1, 1});
  // f = (1, 2, 1) / (T k = 3); P = mean_t R = (2/3, 4/3, 1); lambda E sum f P = 0.5 * 3 * (2/9 + 8/9 + 3/9)
  REQUIRE(plan.aux_losses.size() == 1);
  CHECK(plan.aux_losses[0].first == "l1_reg");
  CHECK(plan.aux_losses[0].second.data().item<double>() == doctest::Approx(0.5 * 3 * 13.0 / 9.0).epsilon(1e-14));
  const auto m = plan.metrics();
  CHECK(m.at("sparsity") == doctest::Approx(5.0 / 9.0));
  CHECK(m.at("mean_slots") == doctest::Approx(4.0 / 3.0));
  CHECK(m.at("l1_coefficient") == 0.5);
}

TEST_CASE("the L1 controller: x alpha below the target sparsity, / alpha above, training forwards only") {
  Generator gen(2);
  const auto router = relu_router(2, 4, 1, gen);  // target sparsity 3/4
  set_weight(*router, from_vector(std::vector<double>{1, 0, 0, 1, 1, 1, -1, -1}, {4, 2}));
  const Tensor dense = from_vector(std::vector<double>{1, 1}, {1, 2});     // gates 1, 1, 2, 0: sparsity 1/4
  const Tensor sparse = from_vector(std::vector<double>{-1, -1}, {1, 2});  // gates 0, 0, 0, 2: sparsity 3/4
  const Tensor none = from_vector(std::vector<double>{-1, 0.5}, {1, 2});   // gates 0, .5, 0, .5: 1/2
  router->train();
  router->route(Variable(dense));
  router->after_optimizer_step();
  CHECK(lambda_of(*router) == doctest::Approx(0.5 * 1.2));
  router->after_optimizer_step();  // no forward since: unchanged
  CHECK(lambda_of(*router) == doctest::Approx(0.5 * 1.2));
  router->route(Variable(sparse));  // exactly on target: sign 0
  router->after_optimizer_step();
  CHECK(lambda_of(*router) == doctest::Approx(0.5 * 1.2));
  {
    NoGradGuard no_grad;  // evaluation does not count
    router->route(Variable(dense));
  }
  router->eval();
  router->route(Variable(dense));
  router->train();
  router->after_optimizer_step();
  CHECK(lambda_of(*router) == doctest::Approx(0.5 * 1.2));
  // The mean of two forwards (1/2 and 1/2) is below 3/4: up again.
  router->route(Variable(none));
  router->route(Variable(none));
  router->after_optimizer_step();
  CHECK(lambda_of(*router) == doctest::Approx(0.5 * 1.2 * 1.2));
  // Sparsity 3/4, then 1 (every weight 0, every gate 0): the mean 7/8 is above 3/4, down.
  router->route(Variable(sparse));
  set_weight(*router, zeros({4, 2}, DType::Float64));
  router->route(Variable(dense));
  router->after_optimizer_step();  // mean of 3/4 and 1: above the target
  CHECK(lambda_of(*router) == doctest::Approx(0.5 * 1.2));
}

TEST_CASE("a decoder's ReLU routers share one lambda, updated once per optimizer step") {
  Generator gen(3);
  DecoderConfig c{.vocab = 9, .d = 8, .layers = 3, .heads = 2};
  Decoder model(c, gen, moe_feed_forward(MoEConfig{.experts = 4, .k = 1, .router = "relu",
                                                   .router_options = {{"l1_init", "0.01"}}}));
  std::vector<ReluRouter*> routers;
  for (std::int64_t i = 0; i < 3; ++i)
    routers.push_back(&dynamic_cast<ReluRouter&>(dynamic_cast<MoELayer&>(model.layer(i).ffn()).router()));
  CHECK(routers[0]->control() == routers[1]->control());
  CHECK(routers[0]->control() == routers[2]->control());
  CHECK(link_relu_routers(model) == 3);
  SGD opt(model.parameters(), 0.0);  // lr 0: only the hooks act
  const Tensor ids = from_vector(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  AuxLosses aux;
  const Variable logits = model.forward(ids, aux);
  aux.added_to(sum(logits)).backward();
  const double before = routers[0]->control()->lambda();
  opt.step();  // three routers' hooks run: one update
  const double after = routers[0]->control()->lambda();
  CHECK((after == doctest::Approx(before * 1.2) || after == doctest::Approx(before / 1.2)));
  for (ReluRouter* r : routers) CHECK(r->named_buffers().front().second.to_vector<double>()[0] == after);
  // Two independently built decoders do not share.
  Decoder other(c, gen, moe_feed_forward(MoEConfig{.experts = 4, .k = 1, .router = "relu"}));
  CHECK(dynamic_cast<ReluRouter&>(dynamic_cast<MoELayer&>(other.layer(0).ffn()).router()).control() !=
        routers[0]->control());
}

TEST_CASE("ReLU routing learns its sparsity: from about 1/2 at initialisation to near 1 - k/E") {
  // One MoE layer (E = 8, k = 2: target 0.75) fits a random linear map with Adam; lambda starts at
  // 1e-4 so that a short run reaches the regime where the L1 term bites. Measured at these
  // settings, sparsity at the first step -> mean of the last 50 of 400 steps: seed 1 0.54 -> 0.69,
  // 2 0.51 -> 0.76, 3 0.48 -> 0.64, 4 0.62 -> 0.74, 5 0.62 -> 0.78, 6 0.30 -> 0.89 (lambda swings
  // by factors of 1.2 per step, so it overshoots both ways). Asserted: every seed ends nearer the
  // target than it started, and the seeds' mean ends within 0.1 of it.
  constexpr double kTarget = 0.75;
  double mean_last = 0;
  for (std::uint64_t seed : {1, 2, 3, 4}) {
    INFO("seed ", seed);
    Generator gen(seed);
    MoELayer moe(MoEConfig{.d = 8, .experts = 8, .k = 2, .ffn = 8, .router = "relu",
                           .router_options = {{"l1_init", "1e-4"}}, .dtype = DType::Float64},
                 gen);
    const Tensor map = normal({8, 8}, 0.0, 0.5, gen, DType::Float64);
    // Tokens with a common offset, as hidden states have: a bias-free ReLU router can then turn its
    // rows away from it (with inputs symmetric about 0 every row is active for half of them, and
    // no weight changes that).
    const Tensor offset = normal({1, 8}, 0.0, 1.0, gen, DType::Float64);
    Adam opt(moe.parameters(), AdamOptions{.lr = 3e-3});
    double first = -1, last = 0;
    for (int step = 0; step < 400; ++step) {
      const Tensor x = kernels::add(normal({64, 8}, 0.0, 1.0, gen, DType::Float64), offset);
      const Variable target(kernels::matmul(x, map));
      AuxLosses aux;
      const Variable y = moe.forward_with_aux(Variable(x), aux);
      const Variable err = y - target;
      opt.zero_grad();
      aux.added_to(mean(err * err)).backward();
      opt.step();
      const double s = moe.last_metrics().at("sparsity");
      if (step == 0) first = s;
      if (step >= 350) last += s / 50.0;  // the last 50 steps' mean
    }
    CHECK(std::abs(last - kTarget) < std::abs(first - kTarget));
    mean_last += last / 4.0;
  }
  CHECK(std::abs(mean_last - kTarget) < 0.1);
}

TEST_CASE("ReLU router options and k are checked") {
  Generator gen(4);
  CHECK_THROWS_WITH(make_relu_router(RouterConfig{4, 4, 4, DType::Float64, {}}, gen), doctest::Contains("below E"));
  CHECK_THROWS_WITH(make_relu_router(RouterConfig{4, 4, 1, DType::Float64, {{"l1_multiplier", "1"}}}, gen),
                    doctest::Contains("must be > 1"));
  CHECK_THROWS_WITH(make_relu_router(RouterConfig{4, 4, 1, DType::Float64, {{"l1_init", "0"}}}, gen),
                    doctest::Contains("must be > 0"));
  CHECK_THROWS_WITH(make_relu_router(RouterConfig{4, 4, 1, DType::Float64, {{"threshold", "0.5"}}}, gen),
                    doctest::Contains("threshold"));
}
