// nn/moe/expert_choice_router.cpp — expert-choice routing (see the header for the math, the
// paper and the causality caveat for decoders).
#include "nn/moe/expert_choice_router.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/router_toolkit.h"

namespace moelab {

namespace {

constexpr const char* kScheme = "ExpertChoiceRouter";

}  // namespace

ExpertChoiceOptions parse_expert_choice_options(const RouterConfig& config) {
  check_router_options(config, {"capacity_factor", "bias"}, kScheme);
  ExpertChoiceOptions o;
  o.capacity_factor = router_option_double(config, "capacity_factor", 1.0, kScheme);
  MOELAB_CHECK(o.capacity_factor > 0.0, kScheme, "option 'capacity_factor' must be > 0, got '",
               config.options.at("capacity_factor"), "'");
  o.bias = router_option_bool(config, "bias", false, kScheme);
  return o;
}

std::int64_t expert_choice_capacity(std::int64_t T, std::int64_t E, std::int64_t k, double capacity_factor) {
  const double c = std::ceil(capacity_factor * static_cast<double>(T * k) / static_cast<double>(E));
  return static_cast<std::int64_t>(std::clamp(c, 1.0, static_cast<double>(T)));
}

// ---------------------------------------------------------------- the routing computation
RoutingPlan expert_choice_route(const Variable& x, const Variable& weight, const Variable& bias, std::int64_t k,
                                const ExpertChoiceOptions& o) {
  const char* op = "expert_choice_route";
  MOELAB_CHECK(x.rank() == 2 && weight.rank() == 2 && x.size(1) == weight.size(1), op,
               "x must be [T, d] and weight [E, d], got x ", x.shape(), " and weight ", weight.shape());
  const std::int64_t T = x.size(0), E = weight.size(0);
  MOELAB_CHECK(T >= 1, op, "x must have at least one token, got ", x.shape());
  MOELAB_CHECK(k >= 1 && k <= E, op, "k must be in [1, E = ", E, "], got ", k);
  MOELAB_CHECK(o.capacity_factor > 0.0 && std::isfinite(o.capacity_factor), op,
               "capacity_factor must be a finite number > 0, got ", o.capacity_factor);
  MOELAB_CHECK(x.dtype() == weight.dtype(), op, "x is ", x.dtype(), " but the weight is ", weight.dtype());
  MOELAB_CHECK(!bias.defined() || (bias.rank() == 1 && bias.size(0) == E), op, "bias must be [", E, "], got ",
               bias.shape());

  // logits = x W^T (+ b): [T, E]; S = softmax over the experts: [T, E]
  Variable logits = matmul(x, weight, false, /*trans_b=*/true);
  if (bias.defined()) logits = logits + bias;
  const Variable probs = softmax(logits);

  // Selection (constant): each expert's C best tokens, ties to the lower token index. [E, C]
  const std::int64_t C = expert_choice_capacity(T, E, k, o.capacity_factor);
  const Device device = x.device();
  const DType dtype = x.dtype();
  const Tensor chosen = kernels::topk(kernels::transpose(probs.data()), static_cast<int>(C)).indices;  // [E, C]

  // The plan, E wide: column e of row t is expert e's decision about token t. All on the device:
  //   mask[t, e]   = 1 if expert e chose token t, else 0: ones scattered into [E, T], transposed
  //   chosen[t, e] = e where mask is 1, kUnusedSlot elsewhere (not a drop: e simply took others)
  const Tensor mask = kernels::transpose(kernels::scatter_add_last(ones({E, C}, dtype, device), chosen, T));  // [T, E]
  const Tensor column_ids = kernels::mul(ones({T, 1}, dtype, device),
                                            arange(0.0, static_cast<double>(E), 1.0, dtype, device).reshape({1, E}));
  PlanParts parts;
  parts.chosen = select_ids(kernels::cast(column_ids, DType::Int32), mask, kUnusedSlot);  // [T, E]
  parts.gates = probs * Variable(mask);  // S where chosen, 0 elsewhere
  parts.variable_slots = true;
  parts.max_kept = E * C;  // every expert takes exactly C tokens
  parts.probs = probs.data();
  parts.extra = [mask, T, E, C]() {
    const std::vector<double> chosen_mask = host_doubles(mask);
    std::int64_t unrouted = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      bool routed = false;
      for (std::int64_t e = 0; e < E; ++e) routed = routed || chosen_mask[static_cast<std::size_t>(t * E + e)] > 0.0;
      if (!routed) ++unrouted;
    }
    const double t = static_cast<double>(T);
    return std::map<std::string, double>{{"capacity", static_cast<double>(C)},
                                         {"unrouted_fraction", static_cast<double>(unrouted) / t},
                                         {"mean_experts_per_token", static_cast<double>(E * C) / t}};
  };
  RoutingPlan plan = make_routing_plan(parts, E);
  return plan;
}

// ---------------------------------------------------------------- the module
ExpertChoiceRouter::ExpertChoiceRouter(std::int64_t d, std::int64_t experts, std::int64_t k,
                                       const ExpertChoiceOptions& options, Generator& gen, DType dtype)
    : Router(d, experts, k, kScheme), options_(options) {
  MOELAB_CHECK(dtype != DType::Int32, kScheme, "needs a float dtype, got ", dtype);
  MOELAB_CHECK(options.capacity_factor > 0.0 && std::isfinite(options.capacity_factor), kScheme,
               "capacity_factor must be a finite number > 0, got ", options.capacity_factor);
  const double bound = 1.0 / std::sqrt(static_cast<double>(d));
  weight_ = register_parameter("weight", uniform({experts, d}, -bound, bound, gen, dtype));
  if (options.bias) bias_ = register_parameter("bias", zeros({experts}, dtype));
}

RoutingPlan ExpertChoiceRouter::route(const Variable& x) {
  check_input(x, kScheme);
  MOELAB_CHECK(x.dtype() == weight_.dtype(), kScheme, "x is ", x.dtype(), " but the router weight is ",
               weight_.dtype());
  return expert_choice_route(x, weight_, bias_, k(), options_);
}

std::shared_ptr<Router> make_expert_choice_router(const RouterConfig& config, Generator& gen) {
  return std::make_shared<ExpertChoiceRouter>(config.d, config.experts, config.k,
                                              parse_expert_choice_options(config), gen, config.dtype);
}

}  // namespace moelab
