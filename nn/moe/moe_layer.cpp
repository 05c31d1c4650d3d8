// nn/moe/moe_layer.cpp — route, sort by expert, gather, grouped GEMMs, gate, scatter-add back.
#include "nn/moe/moe_layer.h"

#include <vector>

#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"

namespace moelab {

MoELayer::MoELayer(const MoEConfig& config, Generator& gen) : config_(config) {
  MOELAB_CHECK(config.d >= 1 && config.experts >= 1, "MoELayer", "d and experts must be >= 1, got d ", config.d,
               ", experts ", config.experts);
  MOELAB_CHECK(config.k >= 1 && config.k <= config.experts, "MoELayer", "k must be in [1, ", config.experts,
               "], got ", config.k);
  RouterConfig rc{config.d, config.experts, config.k, config.dtype, config.router_options};
  router_ = register_module("router", make_router(config.router, rc, gen));
  experts_ = register_module(
      "experts", std::make_shared<ExpertBank>(config.experts, config.d, config.ffn_width(), gen, config.bias,
                                              config.dtype));
}

Variable MoELayer::last_aux_loss() const {
  Variable total;
  for (const auto& [name, loss] : aux_losses_) total = total.defined() ? total + loss : loss;
  return total;
}

// x: [..., d] -> [..., d]
Variable MoELayer::forward(const Variable& x) {
  check_defined(x.data(), "MoELayer", "x");
  const std::int64_t d = config_.d, E = config_.experts;
  MOELAB_CHECK(x.rank() >= 1 && x.size(-1) == d, "MoELayer", "x must be [..., ", d, "], got ", x.shape());
  const Variable xf = x.rank() == 2 ? x : reshape(x, {-1, d});  // [T, d]
  const std::int64_t T = xf.size(0);

  RoutingPlan plan = router_->route(xf);
  aux_losses_ = plan.aux_losses;
  metrics_ = plan.metrics;
  tokens_per_expert_ = plan.tokens_per_expert;
  const std::int64_t k = plan.experts.size(1);  // the router's k (a scheme may choose its own)

  // The kept assignments a = t*k + j and their experts, on the host (selection is not differentiated).
  const std::vector<std::int32_t> chosen = plan.experts.to(Device::cpu()).to_vector<std::int32_t>();
  std::vector<std::int32_t> kept, kept_expert;
  kept.reserve(chosen.size());
  kept_expert.reserve(chosen.size());
  for (std::size_t a = 0; a < chosen.size(); ++a) {
    if (chosen[a] < 0) continue;
    MOELAB_CHECK(chosen[a] < E, "MoELayer", "router returned expert ", chosen[a], " of ", E);
    kept.push_back(static_cast<std::int32_t>(a));
    kept_expert.push_back(chosen[a]);
  }
  const std::int64_t M = static_cast<std::int64_t>(kept.size());
  Variable y;
  if (M == 0) {
    y = mul(xf, 0.0);  // everything dropped: the layer adds nothing
  } else {
    // Stable sort by expert id: inside each expert's group the assignments stay in token order.
    const std::vector<std::int32_t> order =
        kernels::argsort(from_vector(kept_expert, {M})).to_vector<std::int32_t>();
    std::vector<std::int32_t> assignment(static_cast<std::size_t>(M)), token(static_cast<std::size_t>(M));
    std::vector<std::int32_t> offsets(static_cast<std::size_t>(E + 1), 0);
    for (std::int64_t i = 0; i < M; ++i) {
      const std::int32_t a = kept[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
      assignment[static_cast<std::size_t>(i)] = a;
      token[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(a / k);
      ++offsets[static_cast<std::size_t>(chosen[static_cast<std::size_t>(a)]) + 1];
    }
    for (std::int64_t e = 0; e < E; ++e) offsets[static_cast<std::size_t>(e + 1)] += offsets[static_cast<std::size_t>(e)];
    const Device dev = xf.device();
    const Tensor token_t = from_vector(token, {M}).to(dev);
    const Tensor assignment_t = from_vector(assignment, {M}).to(dev);
    const Tensor offsets_t = from_vector(offsets, {E + 1}).to(dev);

    const Variable xs = index_select(xf, token_t);                              // [M, d]
    const Variable ys = experts_->forward(xs, offsets_t);                      // [M, d]
    const Variable g = index_select(reshape(plan.gates, {T * k}), assignment_t);  // [M]
    // [M, d] * [M, 1]: the product broadcasts each gate along its row.
    y = scatter_add_rows(ys * reshape(g, {M, 1}), token_t, T);                 // [T, d]
  }
  return x.rank() == 2 ? y : reshape(y, x.shape());
}

}  // namespace moelab
