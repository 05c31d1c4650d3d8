// nn/moe/top_p_router.cpp — top-p (dynamic-k) routing (see the header for the math and paper).
#include "nn/moe/top_p_router.h"

#include <cmath>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/router_toolkit.h"

namespace moelab {

namespace {
constexpr const char* kScheme = "TopPRouter";
}  // namespace

TopPRouterOptions parse_top_p_options(const RouterConfig& config) {
  check_router_options(config, {"threshold", "gates", "entropy_loss", "load_balance", "bias"}, kScheme);
  TopPRouterOptions o;
  o.threshold = router_option_double(config, "threshold", 0.4, kScheme);
  MOELAB_CHECK(o.threshold > 0.0 && o.threshold <= 1.0, kScheme, "option 'threshold' must be in (0, 1], got ",
               o.threshold);
  o.renorm = router_option_choice(config, "gates", "softmax", {"softmax", "renorm"}, kScheme) == "renorm";
  o.entropy_loss = router_option_double(config, "entropy_loss", 0.0, kScheme);
  o.load_balance = router_option_double(config, "load_balance", 0.0, kScheme);
  o.bias = router_option_bool(config, "bias", false, kScheme);
  return o;
}

RoutingPlan top_p_route(const Variable& x, const Variable& weight, const Variable& bias, std::int64_t K,
                        const TopPRouterOptions& o) {
  const char* op = "top_p_route";
  MOELAB_CHECK(x.rank() == 2 && weight.rank() == 2 && x.size(1) == weight.size(1), op,
               "x must be [T, d] and weight [E, d], got x ", x.shape(), " and weight ", weight.shape());
  const std::int64_t T = x.size(0), E = weight.size(0);
  MOELAB_CHECK(T >= 1, op, "x must have at least one token, got ", x.shape());
  MOELAB_CHECK(K >= 1 && K <= E, op, "k (the most experts per token) must be in [1, E = ", E, "], got ", K);
  MOELAB_CHECK(o.threshold > 0.0 && o.threshold <= 1.0, op, "threshold must be in (0, 1], got ", o.threshold);

  Variable logits = matmul(x, weight, false, /*trans_b=*/true);  // [T, E]
  if (bias.defined()) logits = logits + bias;
  const Variable probs = softmax(logits);  // [T, E]

  // Selection (constant): experts by decreasing p; slot j used while the mass before it < threshold.
  const kernels::TopKResult sorted = kernels::topk(probs.data(), static_cast<int>(K));     // [T, K]
  const Tensor before = exclusive_prefix_sums(sorted.values);                              // [T, K]
  const Tensor used = positive_mask(kernels::sub(o.threshold, before));  // 0/1

  PlanParts parts;
  parts.chosen = select_ids(sorted.indices, used, kUnusedSlot);
  Variable g = gather_last(probs, sorted.indices) * Variable(used);  // [T, K], 0 in unused slots
  parts.gates = o.renorm ? renormalize_rows(g) : g;
  parts.variable_slots = true;
  parts.probs = probs.data();
  RoutingPlan plan = make_routing_plan(parts, E);

  if (o.entropy_loss > 0.0) {
    // mean_t -sum_e p log p
    const Variable h = mean(sum(probs * log_softmax(logits), 1)) * -1.0;
    plan.aux_losses.emplace_back("entropy", h * o.entropy_loss);
  }
  if (o.load_balance > 0.0) {
    // f_e = used slots of e / all used slots (constant) [E]
    const Tensor counts = kernels::cast(plan.tokens_per_expert, x.dtype());
    const Tensor f = kernels::div(counts, kernels::sum(counts));
    plan.aux_losses.emplace_back("load_balance", switch_balance_loss(probs, f, o.load_balance));
  }
  return plan;
}

TopPRouter::TopPRouter(std::int64_t d, std::int64_t experts, std::int64_t max_k, const TopPRouterOptions& options,
                       Generator& gen, DType dtype)
    : Router(d, experts, max_k, kScheme), options_(options) {
  MOELAB_CHECK(dtype != DType::Int32, kScheme, "needs a float dtype, got ", dtype);
  const double bound = 1.0 / std::sqrt(static_cast<double>(d));
  weight_ = register_parameter("weight", uniform({experts, d}, -bound, bound, gen, dtype));
  if (options.bias) bias_ = register_parameter("bias", zeros({experts}, dtype));
}

RoutingPlan TopPRouter::route(const Variable& x) {
  check_input(x, kScheme);
  MOELAB_CHECK(x.dtype() == weight_.dtype(), kScheme, "x is ", x.dtype(), " but the router weight is ", weight_.dtype());
  return top_p_route(x, weight_, bias_, k(), options_);
}

std::shared_ptr<Router> make_top_p_router(const RouterConfig& config, Generator& gen) {
  return std::make_shared<TopPRouter>(config.d, config.experts, config.k, parse_top_p_options(config), gen,
                                      config.dtype);
}

}  // namespace moelab
