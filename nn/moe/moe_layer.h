// nn/moe/moe_layer.h — the routed mixture-of-experts FFN: a Router plus an ExpertBank.
//
//   x: [..., d] -> flatten -> xf: [T, d]
//   plan = router(xf)                  experts int32 [T, k] (-1 dropped, -2 unused), gates [T, k]
//   groups  = kernels::group_by_expert(experts): a stable counting sort on the device
//   order   = the assignments a = t*k + j, kept ones grouped by expert, then dropped ones; first M
//   offsets = exclusive prefix sums of the per-expert kept counts          int32 [E + 1]
//   token[i] = a_i / k, a_i the i-th assignment in that order
//   xs = index_select(xf, token)                 [M, d]   rows grouped by expert
//   ys = experts(xs, offsets)                    [M, d]   two grouped GEMMs (nn/moe/expert_bank.h)
//   g  = index_select(gates flattened, a)        [M]
//   y  = scatter_add_rows_scaled(ys, g, token, T) [T, d]  y[token[i]] += g[i] * ys[i], i.e.
//                                                         y_t = sum_j g_tj expert_{e_tj}(x_t), added in
//                                                         the fixed sorted order (no atomics); one fused
//                                                         kernel, bitwise scatter_add_rows(ys * g[:, None])
//   -> reshape to x's shape
// Dropped and unused slots (both sentinels, nn/moe/router.h) contribute nothing (a token
// dropped by all its experts gets y_t = 0 and passes through the block's residual only). Stable
// sorting keeps, inside each expert's group, the token order t, so the result does not depend on
// thread timing.
//
// Children: "router" (built by name through the router registry, nn/moe/router.h) and "experts"
// (ExpertBank), so the parameters are router.weight (+ router.bias), experts.w_in, experts.w_out
// (+ experts.b_in, experts.b_out). forward_with_aux returns y and appends the plan's aux losses
// (already scaled by their coefficients) to the caller's AuxLosses; forward drops them (use it
// for evaluation). The last forward's tokens per expert (on the device) and metrics (computed
// when asked, reading the device then) are kept for logging.
//
// Nothing here reads back to the host: the sort, the offsets and the grouped products all stay
// on x's device (tests/test_transfers.cpp counts it). The row count M is T*k, or the router's
// bound on kept assignments (RoutingPlan::max_kept); dropped assignments sort past offsets[E],
// where the grouped products write zeros.
//
// Shared experts (DeepSeekMoE: Dai et al., "DeepSeekMoE: Towards Ultimate Expert Specialization in
// Mixture-of-Experts Language Models", arXiv 2401.06066). With shared_experts = N_s > 0 the layer
// adds N_s experts that every token uses, beside the routed ones:
//   y_t = shared(x_t) + sum_j g_tj * expert_{e_tj}(x_t)
// N_s MLPs of width f_s summed are one MLP of width N_s * f_s (their hidden units
// concatenated), so "shared" is one MLP child (nn/mlp.h: shared.up.weight [N_s f_s, d], twice the rows with swiglu,
// shared.down.weight [d, N_s f_s]), registered after the experts so that existing layers draw
// their initial values as before. DeepSeekMoE's other half, fine-grained experts, is a choice of
// sizes: m times more experts (experts = m E), each m times narrower (ffn = f / m), with m times
// more of them active (k = m k). Shared experts are a layer option, not a router: a router decides
// which experts a token uses and how much each counts, while shared experts bypass routing and
// own parameters; as an option they combine with every routing scheme (topk, top-p, aux-free...).
// They count fully in the active parameters (nn/moe/moe_decoder.h).
// With shared_gate (Qwen2-MoE's shared_expert_gate, Qwen1.5-MoE and Qwen2's released modeling
// code) the shared output is scaled per token by a learned sigmoid gate, one d-vector w_s:
//   y_t = sigmoid(x_t . w_s) * shared(x_t) + sum_j g_tj * expert_{e_tj}(x_t)
// "shared_gate" is a bias-free Linear(d, 1) child registered after "shared" (weight [1, d],
// PyTorch's initialisation), so a token can turn the shared experts down where the routed ones
// suffice.
//
//   MoEConfig c{.d = 64, .experts = 8, .k = 2, .ffn = 256, .router_options = {{"load_balance", "0.01"}}};
//   MoELayer moe(c, gen);
//   AuxLosses aux;
//   Variable y = moe.forward_with_aux(x, aux);         // x: [B, S, 64]
//   Variable loss = aux.added_to(task_loss);           // + every aux term (none: task_loss)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/random.h"
#include "nn/feed_forward.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/moe/expert_bank.h"
#include "nn/moe/router.h"
#include "nn/moe/routing_tape.h"
#include "nn/optim/step_hooks.h"

namespace moelab {

struct MoEConfig {
  std::int64_t d = 0;        // token dimension
  std::int64_t experts = 0;  // E
  std::int64_t k = 1;        // assignments per token
  std::int64_t ffn = 0;      // expert hidden width f (0 means f = d)
  std::string router = "topk";
  std::map<std::string, std::string> router_options{};  // passed to the router's factory
  bool bias = false;                                  // expert biases b_in, b_out
  DType dtype = DType::Float32;
  std::int64_t shared_experts = 0;  // DeepSeekMoE's always-active experts (0: none), see above
  std::int64_t shared_ffn = 0;      // hidden width of each shared expert (0: ffn_width())
  bool shared_gate = false;         // Qwen2-MoE's sigmoid gate on the shared output (needs shared_experts)
  // The hidden activation of every routed and shared expert: relu (the papers'), gelu, or swiglu
  // (Mixtral, DeepSeek, Qwen, OLMoE: 3 d f parameters an expert instead of 2 d f; nn/activation.h).
  Activation expert_activation = Activation::Relu;

  std::int64_t ffn_width() const { return ffn > 0 ? ffn : d; }
  std::int64_t shared_width() const { return shared_experts * (shared_ffn > 0 ? shared_ffn : ffn_width()); }
};

class MoELayer : public FeedForward {
 public:
  // Builds the router (first, so it draws its initial values first) and then the experts.
  MoELayer(const MoEConfig& config, Generator& gen);

  // x: [..., d] -> [..., d]; appends the plan's aux losses to aux, records its metrics and load.
  Variable forward_with_aux(const Variable& x, AuxLosses& aux) override;
  // The same without the aux losses (evaluation).
  Variable forward(const Variable& x) override;
  // The token ids of the following forwards' positions (int32, x's shape without its last axis),
  // handed to the router flattened to [T] (Router::set_token_ids); a Decoder calls this.
  void set_token_ids(const Tensor& ids) override;

  const MoEConfig& config() const { return config_; }
  Router& router() const { return *router_; }
  ExpertBank& experts() const { return *experts_; }
  MLP* shared() const { return shared_.get(); }  // null without shared experts
  Linear* shared_gate() const { return shared_gate_.get(); }  // null without shared_gate

  // Of the last forward (empty / undefined before the first):
  // The router's metrics for the last forward, computed now (this reads the device), and
  // token_specialisation (nn/moe/routing_analysis.h) when the router knows the token ids.
  std::map<std::string, double> last_metrics() const;
  const Tensor& last_tokens_per_expert() const { return tokens_per_expert_; }  // int32 [E]
  // int32 [T, k]: the experts of the last forward's plan (-1 dropped, -2 unused), e.g. to replay
  // them later (TopKRouter::replay).
  const Tensor& last_experts() const { return last_experts_; }

  // Records or replays this layer's experts as layer number `layer` of `tape` (nn/moe/routing_tape.h;
  // attach_routing_tape sets every layer of a decoder); null detaches. Forwards of the tape's phase
  // append the plan's `selected` experts (recording) or route with the tape's next entry (replaying).
  void set_routing_tape(std::shared_ptr<RoutingTape> tape, std::int64_t layer);

 private:
  MoEConfig config_;
  std::shared_ptr<Router> router_;
  std::shared_ptr<ExpertBank> experts_;
  std::shared_ptr<MLP> shared_;
  std::shared_ptr<Linear> shared_gate_;
  RouterMetrics metrics_;
  Tensor tokens_per_expert_, last_experts_;
  std::shared_ptr<RoutingTape> tape_;  // null unless recording or replaying
  std::int64_t tape_layer_ = 0;
  StepHook step_hook_;  // runs router_->after_optimizer_step() after every optimizer step
};

}  // namespace moelab
