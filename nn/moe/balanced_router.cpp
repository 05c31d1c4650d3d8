// nn/moe/balanced_router.cpp — balanced assignment (see the header for the rule and the paper).
#include "nn/moe/balanced_router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/router_toolkit.h"

namespace moelab {

namespace {
constexpr const char* kScheme = "BalancedRouter";
}  // namespace

std::vector<std::int32_t> balanced_assignment(const std::vector<double>& scores, std::int64_t T, std::int64_t E,
                                              std::int64_t k) {
  const char* op = "balanced_assignment";
  MOELAB_CHECK(T >= 1 && E >= 1 && k >= 1 && k <= E, op, "need T >= 1 and 1 <= k <= E, got T ", T, ", E ", E, ", k ", k);
  MOELAB_CHECK(static_cast<std::int64_t>(scores.size()) == T * E, op, "scores must hold T*E = ", T * E, " values");
  std::vector<std::int64_t> cap(static_cast<std::size_t>(E), (T * k) / E), load(static_cast<std::size_t>(E), 0);
  for (std::int64_t e = 0; e < (T * k) % E; ++e) ++cap[static_cast<std::size_t>(e)];
  std::vector<std::vector<std::int32_t>> held(static_cast<std::size_t>(T));
  const auto holds = [&](std::int64_t t, std::int64_t e) {
    const auto& h = held[static_cast<std::size_t>(t)];
    return std::find(h.begin(), h.end(), static_cast<std::int32_t>(e)) != h.end();
  };
  const auto give = [&](std::int64_t t, std::int64_t e) {
    held[static_cast<std::size_t>(t)].push_back(static_cast<std::int32_t>(e));
    ++load[static_cast<std::size_t>(e)];
  };

  // The greedy walk by decreasing score; stable, so ties keep pair order (lower t, then lower e).
  std::vector<std::int64_t> order(static_cast<std::size_t>(T * E));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return scores[static_cast<std::size_t>(a)] > scores[static_cast<std::size_t>(b)];
  });
  for (std::int64_t pair : order) {
    const std::int64_t t = pair / E, e = pair % E;
    if (static_cast<std::int64_t>(held[static_cast<std::size_t>(t)].size()) < k &&
        load[static_cast<std::size_t>(e)] < cap[static_cast<std::size_t>(e)] && !holds(t, e))
      give(t, e);
  }

  // Repair (k > 1 only): the room left is in experts the short token already holds. Move another
  // token u from an expert e2 that t lacks to the roomy expert r (u must lack r); t takes e2.
  for (std::int64_t t = 0; t < T; ++t) {
    while (static_cast<std::int64_t>(held[static_cast<std::size_t>(t)].size()) < k) {
      std::int64_t r = -1;
      for (std::int64_t e = 0; e < E && r < 0; ++e)
        if (load[static_cast<std::size_t>(e)] < cap[static_cast<std::size_t>(e)]) r = e;
      MOELAB_CHECK(r >= 0, op, "no room left for token ", t, " (internal error)");
      if (!holds(t, r)) {
        give(t, r);
        continue;
      }
      bool moved = false;
      for (std::int64_t u = 0; u < T && !moved; ++u) {
        if (u == t || holds(u, r)) continue;
        for (std::int32_t& e2 : held[static_cast<std::size_t>(u)]) {
          if (holds(t, e2)) continue;
          const std::int64_t taken = e2;
          e2 = static_cast<std::int32_t>(r);  // u moves from e2 to r
          ++load[static_cast<std::size_t>(r)];
          held[static_cast<std::size_t>(t)].push_back(static_cast<std::int32_t>(taken));  // t takes e2's place
          moved = true;
          break;
        }
      }
      MOELAB_CHECK(moved, op, "could not balance token ", t, " (internal error)");
    }
  }
  std::vector<std::int32_t> ids;
  ids.reserve(static_cast<std::size_t>(T * k));
  for (const auto& h : held) ids.insert(ids.end(), h.begin(), h.end());
  return ids;
}

BalancedRouter::BalancedRouter(std::int64_t d, std::int64_t experts, std::int64_t k, bool balance_eval,
                               Generator& gen, DType dtype)
    : Router(d, experts, k, kScheme), balance_eval_(balance_eval) {
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
    const std::vector<std::int32_t> ids = balanced_assignment(host_doubles(a.data()), T, E, k());  // reads back
    parts.chosen = from_vector(ids, {T, k()}).to(x.device());
  } else {
    parts.chosen = kernels::topk(a.data(), static_cast<int>(k())).indices;
  }
  parts.gates = gather_last(sigmoid(a), parts.chosen);  // [T, k]
  parts.probs = softmax(a).data();                      // for the router_entropy metric
  return make_routing_plan(parts, E);
}

std::shared_ptr<Router> make_balanced_router(const RouterConfig& config, Generator& gen) {
  check_router_options(config, {"balance_eval"}, kScheme);
  return std::make_shared<BalancedRouter>(config.d, config.experts, config.k,
                                          router_option_bool(config, "balance_eval", false, kScheme), gen,
                                          config.dtype);
}

}  // namespace moelab
