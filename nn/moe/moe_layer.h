// nn/moe/moe_layer.h — the routed mixture-of-experts FFN: a Router plus an ExpertBank.
//
//   x: [..., d] -> flatten -> xf: [T, d]
//   plan = router(xf)                  experts int32 [T, k] (-1 = dropped), gates [T, k]
//   keep the M assignments a = t*k + j with experts[a] >= 0 (M = T*k unless a capacity drops some)
//   order   = stable argsort of their expert ids (kernels::argsort)        int32 [M]
//   offsets = exclusive prefix sums of the per-expert counts               int32 [E + 1]
//   token[i] = a_i / k, a_i the i-th kept assignment in that order
//   xs = index_select(xf, token)                 [M, d]   rows grouped by expert
//   ys = experts(xs, offsets)                    [M, d]   two grouped GEMMs (nn/moe/expert_bank.h)
//   g  = index_select(gates flattened, a)        [M]      reshaped to [M, 1]
//   y  = scatter_add_rows(ys * g, token, T)      [T, d]   ([M, d] * [M, 1] broadcasts each gate
//                                                         along its row) y_t = sum_j g_tj expert_{e_tj}(x_t),
//                                                         added in the fixed sorted order (no atomics)
//   -> reshape to x's shape
// Dropped assignments contribute nothing (a token dropped by all its experts gets y_t = 0 and
// passes through the block's residual only). Stable sorting keeps, inside each expert's group,
// the token order t, so the result does not depend on thread timing.
//
// Children: "router" (built by name through the router registry, nn/moe/router.h) and "experts"
// (ExpertBank), so the parameters are router.weight (+ router.bias), experts.w_in, experts.w_out
// (+ experts.b_in, experts.b_out). FeedForward::forward returns only y; the plan's aux losses
// (already scaled by their coefficients), metrics and tokens per expert of the last forward are
// kept and read with last_aux_losses(), last_aux_loss(), last_metrics(), last_tokens_per_expert().
//
//   MoEConfig c{.d = 64, .experts = 8, .k = 2, .ffn = 256, .router_options = {{"load_balance", "0.01"}}};
//   MoELayer moe(c, gen);
//   Variable y = moe.forward(x);                       // x: [B, S, 64]
//   Variable loss = task_loss + moe.last_aux_loss();   // undefined when the router has no aux loss
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/random.h"
#include "nn/feed_forward.h"
#include "nn/moe/expert_bank.h"
#include "nn/moe/router.h"

namespace moelab {

struct MoEConfig {
  std::int64_t d = 0;        // token dimension
  std::int64_t experts = 0;  // E
  std::int64_t k = 1;        // assignments per token
  std::int64_t ffn = 0;      // expert hidden width f (0 means f = d)
  std::string router = "topk";
  std::map<std::string, std::string> router_options;  // passed to the router's factory
  bool bias = false;                                  // expert biases b_in, b_out
  DType dtype = DType::Float32;

  std::int64_t ffn_width() const { return ffn > 0 ? ffn : d; }
};

class MoELayer : public FeedForward {
 public:
  // Builds the router (first, so it draws its initial values first) and then the experts.
  MoELayer(const MoEConfig& config, Generator& gen);

  // x: [..., d] -> [..., d]; records the plan's aux losses, metrics and load.
  Variable forward(const Variable& x) override;

  const MoEConfig& config() const { return config_; }
  Router& router() const { return *router_; }
  ExpertBank& experts() const { return *experts_; }

  // Of the last forward (empty / undefined before the first):
  const std::vector<std::pair<std::string, Variable>>& last_aux_losses() const { return aux_losses_; }
  Variable last_aux_loss() const;  // their sum (0-d); undefined when there is none
  const std::map<std::string, double>& last_metrics() const { return metrics_; }
  const Tensor& last_tokens_per_expert() const { return tokens_per_expert_; }  // int32 [E]

 private:
  MoEConfig config_;
  std::shared_ptr<Router> router_;
  std::shared_ptr<ExpertBank> experts_;
  std::vector<std::pair<std::string, Variable>> aux_losses_;
  std::map<std::string, double> metrics_;
  Tensor tokens_per_expert_;
};

}  // namespace moelab
