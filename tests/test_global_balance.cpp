// tests/test_global_balance.cpp — balance_scope = global: the Switch balance loss with f counted
// over the optimizer step's micro-batches so far (Megatron-LM's global_aux_loss), against a hand
// computation on the host.
//
//   - two micro-batches: the first one's loss uses its own f, the second's the counts of both
//     (c1 + c2) / (2 T k) with its own P; values and the router weight's gradient of the second
//     loss (worked by hand: d/dl_tj of sum_e f_e p_te / T = p_tj (f_j - sum_e f_e p_te) / T) to 1e-12
//   - after_optimizer_step resets the counts (the third micro-batch is batch scope again), and an
//     evaluation forward (eval mode or no gradients) neither adds nor uses them
//   - through train_loop with accumulate = 3 on a MoE layer: the optimizer step's hook resets the
//     counts, so every step counts 3 micro-batches and starts again
//   - balance_scope accepts batch, sequence, global and refuses anything else
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/no_grad.h"
#include "autograd/ops.h"
#include "core/factories.h"
#include "nn/loss.h"
#include "nn/moe/moe_layer.h"
#include "nn/moe/top_k_router.h"
#include "nn/optim/sgd.h"
#include "nn/train_loop.h"
#include "test_util.h"

using namespace moelab;
using moelab::testing::to_doubles;

namespace {

constexpr std::int64_t E = 4, K = 2, D = 3, T = 5;
constexpr double kCoefficient = 0.1;

struct HostRouting {
  std::vector<double> probs;   // [T, E] softmax of the logits
  std::vector<double> counts;  // [E] the top-2 choices per expert
};

// logits = x W^T, probs = softmax, each token's two largest logits (ties to the lower id).
HostRouting host_routing(const std::vector<double>& x, const std::vector<double>& w) {
  HostRouting r{std::vector<double>(T * E), std::vector<double>(E, 0.0)};
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<double> l(E);
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t i = 0; i < D; ++i) l[e] += x[t * D + i] * w[e * D + i];
    const double mx = *std::max_element(l.begin(), l.end());
    double s = 0;
    for (double v : l) s += std::exp(v - mx);
    for (std::int64_t e = 0; e < E; ++e) r.probs[t * E + e] = std::exp(l[e] - mx) / s;
    std::vector<std::int64_t> order{0, 1, 2, 3};
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return l[a] > l[b]; });
    r.counts[order[0]] += 1, r.counts[order[1]] += 1;
  }
  return r;
}

// a E sum_e f_e P_e with P the batch's mean probabilities.
double balance_loss(const HostRouting& r, const std::vector<double>& f) {
  double loss = 0;
  for (std::int64_t e = 0; e < E; ++e) {
    double P = 0;
    for (std::int64_t t = 0; t < T; ++t) P += r.probs[t * E + e] / T;
    loss += kCoefficient * E * f[e] * P;
  }
  return loss;
}

// d loss / d W [E, D] for fixed f: a E sum_t sum_j p_tj (f_j - sum_e f_e p_te) / T * x_t.
std::vector<double> balance_loss_gradient(const HostRouting& r, const std::vector<double>& f,
                                          const std::vector<double>& x) {
  std::vector<double> g(E * D, 0.0);
  for (std::int64_t t = 0; t < T; ++t) {
    double mean_f = 0;
    for (std::int64_t e = 0; e < E; ++e) mean_f += f[e] * r.probs[t * E + e];
    for (std::int64_t j = 0; j < E; ++j) {
      const double dl = kCoefficient * E * r.probs[t * E + j] * (f[j] - mean_f) / T;
      for (std::int64_t i = 0; i < D; ++i) g[j * D + i] += dl * x[t * D + i];
    }
  }
  return g;
}

std::shared_ptr<TopKRouter> global_router(Generator& gen) {
  RouterConfig c{D, E, K, DType::Float64,
                 {{"load_balance", "0.1"}, {"balance_scope", "global"}, {"gates", "softmax-topk-renorm"}}};
  return std::dynamic_pointer_cast<TopKRouter>(make_top_k_router(c, gen));
}

double aux_value(const RoutingPlan& plan) {
  REQUIRE(plan.aux_losses.size() == 1);
  return plan.aux_losses[0].second.data().item<double>();
}

}  // namespace

TEST_CASE("balance_scope = global: the second micro-batch's loss uses both micro-batches' f (hand computation)") {
  Generator gen(3);
  const auto router = global_router(gen);
  REQUIRE(router);
  const std::vector<double> w = to_doubles(router->weight().data());
  const Tensor x1 = normal({T, D}, 0.0, 1.0, gen, DType::Float64), x2 = normal({T, D}, 0.0, 1.0, gen, DType::Float64);
  const HostRouting r1 = host_routing(to_doubles(x1), w), r2 = host_routing(to_doubles(x2), w);
  std::vector<double> f1(E), f2(E), f12(E);
  for (std::int64_t e = 0; e < E; ++e) {
    f1[e] = r1.counts[e] / (T * K);
    f2[e] = r2.counts[e] / (T * K);
    f12[e] = (r1.counts[e] + r2.counts[e]) / (2 * T * K);
  }
  REQUIRE(f12 != f2);  // the two micro-batches route differently, so the test can tell the scopes apart

  router->train();
  CHECK(router->counted_micro_batches() == 0);
  const RoutingPlan p1 = router->route(Variable(x1));
  CHECK(aux_value(p1) == doctest::Approx(balance_loss(r1, f1)).epsilon(1e-12));
  const RoutingPlan p2 = router->route(Variable(x2));
  CHECK(router->counted_micro_batches() == 2);
  CHECK(std::abs(aux_value(p2) - balance_loss(r2, f12)) <= 1e-12);
  CHECK(std::abs(aux_value(p2) - balance_loss(r2, f2)) > 1e-6);  // not the micro-batch's own f

  // Its gradient with respect to the router weight: P2's, with f fixed at the step's shares.
  router->zero_grad();
  p2.aux_losses[0].second.backward();
  const std::vector<double> want = balance_loss_gradient(r2, f12, to_doubles(x2));
  CHECK(testing::max_error(router->weight().grad(), want) <= 1e-12);

  // Evaluation forwards neither add nor use the counts.
  {
    NoGradGuard no_grad;
    CHECK(aux_value(router->route(Variable(x2))) == doctest::Approx(balance_loss(r2, f2)).epsilon(1e-12));
  }
  router->eval();
  CHECK(aux_value(router->route(Variable(x2))) == doctest::Approx(balance_loss(r2, f2)).epsilon(1e-12));
  router->train();
  CHECK(router->counted_micro_batches() == 2);

  // After the optimizer step: a new step, the micro-batch's own f again.
  router->after_optimizer_step();
  CHECK(router->counted_micro_batches() == 0);
  CHECK(aux_value(router->route(Variable(x2))) == doctest::Approx(balance_loss(r2, f2)).epsilon(1e-12));
}

TEST_CASE("balance_scope = global in train_loop with accumulate = 3: every step counts its 3 micro-batches") {
  Generator gen(5);
  MoEConfig c{.d = 6, .experts = 4, .k = 2, .dtype = DType::Float64};
  c.router_options = {{"load_balance", "0.01"}, {"balance_scope", "global"}};
  MoELayer moe(c, gen);
  auto& router = dynamic_cast<TopKRouter&>(moe.router());
  SGD opt(moe.parameters(), 0.05);
  const Tensor x = normal({3, 4, 6}, 0.0, 1.0, gen, DType::Float64);
  std::vector<std::int64_t> counted;
  LoopHooks h;
  std::int64_t calls = 0;
  h.batch_loss = [&](std::int64_t) {
    StepLoss s;
    const Variable xs = narrow(Variable(x), 0, calls++ % 3, 1);  // [1, 4, 6]
    const Variable y = moe.forward_with_aux(xs, s.aux);
    s.loss = mean(y * y);
    counted.push_back(router.counted_micro_batches());
    return s;
  };
  train_loop(moe, opt, {.steps = 2, .accumulate = 3}, h);
  CHECK(counted == std::vector<std::int64_t>{1, 2, 3, 1, 2, 3});
  CHECK(router.counted_micro_batches() == 0);  // reset by the optimizer step's hook
}

TEST_CASE("balance_scope takes batch, sequence or global") {
  Generator gen(1);
  for (const char* scope : {"batch", "sequence", "global"})
    CHECK_NOTHROW(make_top_k_router(RouterConfig{D, E, K, DType::Float64, {{"balance_scope", scope}}}, gen));
  CHECK_THROWS_WITH(make_top_k_router(RouterConfig{D, E, K, DType::Float64, {{"balance_scope", "step"}}}, gen),
                    doctest::Contains("global"));
}
