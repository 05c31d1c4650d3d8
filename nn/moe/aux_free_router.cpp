// nn/moe/aux_free_router.cpp — auxiliary-loss-free balancing (see the header for the math, papers).
#include "nn/moe/aux_free_router.h"

#include <algorithm>
#include <cmath>

#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/router_toolkit.h"

namespace moelab {

namespace {
constexpr const char* kScheme = "AuxFreeRouter";
using kernels::BinaryOp;
}  // namespace

AuxFreeOptions parse_aux_free_options(const RouterConfig& config) {
  check_router_options(config, {"score", "renorm", "update_rate", "bias"}, kScheme);
  AuxFreeOptions o;
  o.sigmoid = router_option_choice(config, "score", "sigmoid", {"sigmoid", "softmax"}, kScheme) == "sigmoid";
  o.renorm = router_option_bool(config, "renorm", true, kScheme);
  o.update_rate = router_option_double(config, "update_rate", 1e-3, kScheme);
  o.bias = router_option_bool(config, "bias", false, kScheme);
  return o;
}

AuxFreeRouter::AuxFreeRouter(std::int64_t d, std::int64_t experts, std::int64_t k, const AuxFreeOptions& options,
                             Generator& gen, DType dtype)
    : Router(d, experts, k, kScheme), options_(options) {
  MOELAB_CHECK(dtype != DType::Int32, kScheme, "needs a float dtype, got ", dtype);
  MOELAB_CHECK(options.update_rate >= 0.0 && std::isfinite(options.update_rate), kScheme,
               "update_rate must be a finite number >= 0, got ", options.update_rate);
  const double bound = 1.0 / std::sqrt(static_cast<double>(d));
  weight_ = register_parameter("weight", uniform({experts, d}, -bound, bound, gen, dtype));
  if (options.bias) bias_ = register_parameter("bias", zeros({experts}, dtype));
  expert_bias_ = register_buffer("expert_bias", zeros({experts}, dtype));
}

RoutingPlan AuxFreeRouter::route(const Variable& x) {
  check_input(x, kScheme);
  MOELAB_CHECK(x.dtype() == weight_.dtype(), kScheme, "x is ", x.dtype(), " but the router weight is ", weight_.dtype());
  const std::int64_t E = experts();
  Variable logits = matmul(x, weight_, false, /*trans_b=*/true);  // [T, E]
  if (bias_.defined()) logits = logits + bias_;
  const Variable scores = options_.sigmoid ? sigmoid(logits) : softmax(logits);  // [T, E]

  // Selection (constant) on the biased scores: [T, E] + [E] broadcasts the bias over tokens.
  const Tensor biased = kernels::add(scores.data(), expert_bias_);
  PlanParts parts;
  parts.chosen = kernels::topk(biased, static_cast<int>(k())).indices;  // [T, k]
  const Variable g = gather_last(scores, parts.chosen);                // unbiased scores
  // Renormalised only when k > 1, as Megatron-LM's router does: at k = 1 it would make every gate
  // s/s = 1 and the router would get no gradient from the task loss (the k = 1 trap).
  parts.gates = options_.renorm && k() > 1 ? renormalize_rows(g) : g;
  if (!options_.sigmoid) parts.probs = scores.data();
  // The bias buffer is updated in place later: the metric reads a snapshot of it.
  parts.extra = [b = kernels::mul(expert_bias_, 1.0)]() {  // a copy
    const std::vector<double> v = host_doubles(b);
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return std::map<std::string, double>{{"expert_bias_range", *hi - *lo}};
  };
  RoutingPlan plan = make_routing_plan(parts, E);

  if (is_training()) {
    const Tensor counts = kernels::cast(plan.tokens_per_expert, expert_bias_.dtype());
    pending_ = pending_.defined() ? kernels::add(pending_, counts) : counts;
  }
  return plan;
}

void AuxFreeRouter::after_optimizer_step() {
  if (!pending_.defined()) return;
  // err_e = mean(c) - c_e; sign(err) = [err > 0] - [err < 0]; b += u * sign(err)
  const Tensor err = kernels::sub(0.0, kernels::sub(pending_, kernels::mean(pending_)));
  const Tensor sign = kernels::sub(positive_mask(err), positive_mask(kernels::sub(0.0, err)));
  const Tensor updated =
      kernels::add(expert_bias_, kernels::mul(sign, options_.update_rate));
  kernels::copy(expert_bias_, updated);  // in place: the buffer's storage is the module's
  pending_ = Tensor();
}

std::shared_ptr<Router> make_aux_free_router(const RouterConfig& config, Generator& gen) {
  return std::make_shared<AuxFreeRouter>(config.d, config.experts, config.k, parse_aux_free_options(config), gen,
                                         config.dtype);
}

}  // namespace moelab
