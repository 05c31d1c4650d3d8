// nn/moe/moe_layer.cpp — route, sort by expert, gather, grouped GEMMs, gate, scatter-add back.
#include "nn/moe/moe_layer.h"

#include <algorithm>
#include <map>
#include <string>

#include "autograd/no_grad.h"
#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "autograd/precision.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/router_toolkit.h"
#include "nn/moe/routing_analysis.h"

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
                                              config.dtype, config.expert_activation));
  MOELAB_CHECK(config.shared_experts >= 0 && config.shared_ffn >= 0, "MoELayer",
               "shared_experts and shared_ffn must be >= 0, got ", config.shared_experts, " and ", config.shared_ffn);
  if (config.shared_experts > 0)
    shared_ = register_module("shared",
                              std::make_shared<MLP>(config.d, config.shared_width(), gen, config.bias, config.dtype,
                                                    config.expert_activation));
  MOELAB_CHECK(!config.shared_gate || config.shared_experts > 0, "MoELayer",
               "shared_gate scales the shared experts' output: it needs shared_experts >= 1");
  if (config.shared_gate)
    shared_gate_ = register_module("shared_gate",
                                   std::make_shared<Linear>(config.d, 1, gen, /*bias=*/false, config.dtype));
  // The router's after_optimizer_step runs after every optimizer step that updates this layer
  // (nn/optim/step_hooks.h), so no training loop has to call it: the hook hangs on the router's
  // first trainable parameter, or the layer's when the router has none.
  std::vector<Variable> anchors = router_->parameters();
  for (const Variable& p : parameters()) anchors.push_back(p);
  for (const Variable& p : anchors)
    if (p.requires_grad()) {
      step_hook_ = StepHook(p, [router = router_.get()] { router->after_optimizer_step(); });
      break;
    }
}

std::map<std::string, double> MoELayer::last_metrics() const {
  std::map<std::string, double> m = metrics_ ? metrics_() : std::map<std::string, double>{};
  // Token-id specialisation, when the forward's token ids are known (a Decoder sets them).
  const Tensor& ids = router_->token_ids();
  if (last_experts_.defined() && ids.defined() && ids.numel() == last_experts_.size(0)) {
    const double s = token_specialisation(ids.to(Device::cpu()).to_vector<std::int32_t>(),
                                          last_experts_.to(Device::cpu()).to_vector<std::int32_t>(),
                                          last_experts_.size(1), config_.experts);
    if (s >= 0) m["token_specialisation"] = s;
  }
  return m;
}

void MoELayer::set_routing_tape(std::shared_ptr<RoutingTape> tape, std::int64_t layer) {
  tape_ = std::move(tape);
  tape_layer_ = layer;
}

Variable MoELayer::forward(const Variable& x) {
  AuxLosses ignored;
  return forward_with_aux(x, ignored);
}

// x: [..., d] -> [..., d]
void MoELayer::set_token_ids(const Tensor& ids) {
  router_->set_token_ids(ids.defined() ? ids.reshape({ids.numel()}) : Tensor());
}

Variable MoELayer::forward_with_aux(const Variable& x, AuxLosses& aux) {
  check_defined(x.data(), "MoELayer", "x");
  const std::int64_t d = config_.d, E = config_.experts;
  MOELAB_CHECK(x.rank() >= 1 && x.size(-1) == d, "MoELayer", "x must be [..., ", d, "], got ", x.shape());
  const Variable xf = x.rank() == 2 ? x : reshape(x, {-1, d});  // [T, d]
  const std::int64_t T = xf.size(0);

  // [B, S, d]: B sequences of S tokens, for routers that look at sequences; [T, d]: one sequence.
  const std::int64_t sequence_length = x.rank() >= 3 ? x.size(-2) : T;
  // A routing tape of this forward's phase replays its next entry (for this forward only: the
  // guard ends the replay however route returns) or records the plan's selection.
  const bool taped = tape_ && tape_->sees(is_training(), grad_enabled());
  const bool replaying = taped && !tape_->recording();
  if (replaying) router_->replay(tape_->next(tape_layer_, T, router_->k(), x.device()));
  struct EndReplay {
    Router* router;
    ~EndReplay() { if (router != nullptr) router->stop_replay(); }
  } end_replay{replaying ? router_.get() : nullptr};
  // The router's scores stay float32 under any precision policy (autograd/precision.h).
  RoutingPlan plan = [&] {
    PrecisionScope fp32(Precision::Float32);
    return router_->route_sequences(xf, sequence_length);
  }();
  if (taped && tape_->recording()) tape_->append(tape_layer_, plan.selected.defined() ? plan.selected : plan.experts);
  for (const auto& [name, loss] : plan.aux_losses) aux.add(name, loss);
  metrics_ = plan.metrics;
  tokens_per_expert_ = plan.tokens_per_expert;
  last_experts_ = plan.experts;
  const std::int64_t k = plan.experts.size(1);  // the router's k (a scheme may choose its own)
  MOELAB_CHECK((plan.experts.shape() == Shape{T, k}), "MoELayer", "the router returned experts ", plan.experts.shape(),
               " for ", T, " tokens");

  // Sort the assignments by expert on the device (selection is not differentiated): the kept ones
  // first, grouped by expert in token order, then the dropped ones. M rows are processed: all T*k,
  // or the router's bound on the kept ones when it knows one without the data (expert choice:
  // E*C), so that no shape depends on the data.
  // (Reused from the router when it sorted already: top-k does for its capacity.)
  // Both sentinels (dropped, unused) mean "no expert": group_by_expert sees -1 for either.
  const kernels::ExpertGroups groups =
      plan.groups ? *plan.groups : kernels::group_by_expert(ids_for_grouping(plan.experts), E);
  MOELAB_CHECK((groups.offsets.shape() == Shape{E + 1} && groups.order.shape() == Shape{T * k}), "MoELayer",
               "the router's groups do not match its plan: offsets ", groups.offsets.shape(), ", order ",
               groups.order.shape(), " for ", T, " x ", k, " assignments of ", E, " experts");
  const std::int64_t M = plan.max_kept >= 0 ? std::min(plan.max_kept, T * k) : T * k;
  const bool all_rows = M == T * k;
  const Tensor assignment = all_rows ? groups.order : kernels::narrow(groups.order, 0, 0, M);  // [M] a = t*k + j
  const Tensor token = all_rows ? groups.rows : kernels::narrow(groups.rows, 0, 0, M);         // [M] t = a / k

  const Variable xs = index_select(xf, token);                                  // [M, d]
  const Variable ys = experts_->forward(xs, groups.offsets);                   // [M, d] (0 past offsets[E])
  const Variable g = index_select(reshape(plan.gates, {T * k}), assignment);   // [M]
  // y[token[m]] += g[m] * ys[m]: one fused kernel, bitwise the broadcast product ys * g[:, None]
  // scattered back. A dropped assignment's row of ys is 0 and its gate is 0, so it adds nothing.
  Variable y = scatter_add_rows_scaled(ys, g, token, T);                       // [T, d]
  if (plan.direct_output.defined()) {                                          // the router's own experts
    MOELAB_CHECK(plan.direct_output.shape() == xf.shape(), "MoELayer", "the router's direct output is ",
                 plan.direct_output.shape(), ", not x's ", xf.shape());
    y = y + plan.direct_output;
  }
  if (shared_gate_)  // Qwen2-MoE: sigmoid(x w_s) [T, 1] scales each token's shared output [T, d]
    y = y + sigmoid(shared_gate_->forward(xf)) * shared_->forward(xf);
  else if (shared_)
    y = y + shared_->forward(xf);  // DeepSeekMoE's shared experts
  return x.rank() == 2 ? y : reshape(y, x.shape());
}

}  // namespace moelab
