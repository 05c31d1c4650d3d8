// nn/moe/balanced_router.cpp — balanced assignment (see the header for the rule and the paper).
#include "nn/moe/balanced_router.h"

#include <cmath>
#include <string>

#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/balanced_assignment.h"
#include "nn/moe/router_toolkit.h"

namespace moelab {

namespace {
constexpr const char* kScheme = "BalancedRouter";
}  // namespace

BalancedRouter::BalancedRouter(std::int64_t d, std::int64_t experts, std::int64_t k, bool balance_eval,
                               Generator& gen, DType dtype, BalancedAssignment assignment)
    : Router(d, experts, k, kScheme), balance_eval_(balance_eval), assignment_(assignment) {
  MOELAB_CHECK(dtype != DType::Int32, kScheme, "needs a float dtype, got ", dtype);
  const double bound = 1.0 / std::sqrt(static_cast<double>(d));
  weight_ = register_parameter("weight", uniform({experts, d}, -bound, bound, gen, dtype));
}

RoutingPlan BalancedRouter::route(const Variable& x) {
  check_input(x, kScheme);
  MOELAB_CHECK(x.dtype() == weight_.dtype(), kScheme, "x is ", x.dtype(), " but the router weight is ", weight_.dtype());
  const std::int64_t T = x.size(0), E = experts();
  const Variable a = matmul(x, weight_, false, /*trans_b=*/true);  // [T, E]
  PlanParts parts;
  if (is_training() || balance_eval_) {
    const std::vector<double> scores = host_doubles(a.data());  // reads back
    std::vector<std::int32_t> ids;
    if (assignment_ == BalancedAssignment::Exact) ids = exact_balanced_assignment(scores, T, E, k());
    else if (assignment_ == BalancedAssignment::Sinkhorn) ids = sinkhorn_assignment(scores, T, E, k());
    else ids = greedy_balanced_assignment(scores, T, E, k());
    parts.chosen = from_vector(ids, {T, k()}).to(x.device());
  } else {
    parts.chosen = kernels::topk(a.data(), static_cast<int>(k())).indices;
  }
  parts.gates = gather_last(sigmoid(a), parts.chosen);  // [T, k]
  parts.probs = softmax(a).data();                      // for the router_entropy metric
  return make_routing_plan(parts, E);
}

std::shared_ptr<Router> make_balanced_router(const RouterConfig& config, Generator& gen) {
  check_router_options(config, {"balance_eval", "assignment"}, kScheme);
  const auto found = config.options.find("assignment");
  const std::string name = found == config.options.end() ? "greedy" : found->second;
  MOELAB_CHECK(name == "greedy" || name == "exact" || name == "sinkhorn", kScheme, "router option assignment='", name,
               "': expected greedy, exact or sinkhorn");
  const BalancedAssignment assignment = name == "exact"      ? BalancedAssignment::Exact
                                        : name == "sinkhorn" ? BalancedAssignment::Sinkhorn
                                                             : BalancedAssignment::Greedy;
  return std::make_shared<BalancedRouter>(config.d, config.experts, config.k,
                                          router_option_bool(config, "balance_eval", false, kScheme), gen,
                                          config.dtype, assignment);
}

}  // namespace moelab
