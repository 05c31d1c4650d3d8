// nn/moe/aux_free_router.h — auxiliary-loss-free load balancing: a per-expert bias, added to the
// scores for the selection only, nudged after every optimizer step toward an even load.
//
// Wang, L., Gao, H., Zhao, C., Sun, X., Dai, D. "Auxiliary-Loss-Free Load Balancing Strategy for
// Mixture-of-Experts", arXiv 2408.15664 (2024); used by DeepSeek-AI, "DeepSeek-V3 Technical
// Report", arXiv 2412.19437 (2024).
// A load-balancing loss trades the task's gradient for balance; here no gradient is involved:
//
//   x: [T, d], weight W: [E, d]
//   s      = sigmoid(x W^T) (DeepSeek-V3; option score = "softmax": softmax over the experts)   [T, E]
//   S_t    = the k largest s_t + b (b: the expert bias [E], a buffer, not trained)            [T, k]
//   g_tj   = s_t,S_tj / sum_i s_t,S_ti  (the bias never enters a gate; option renorm = false
//            keeps g_tj = s_t,S_tj; at k = 1 the gate is always s_t,S_t1, as in Megatron-LM, which
//            renormalises only when k > 1: s/s = 1 would leave the router without a gradient)
//   after each optimizer step (Router::after_optimizer_step, which the MoE layer hangs on the
//   optimizer as a step hook, nn/optim/step_hooks.h): c_e = assignments to e in the training
//   forwards since the last update, and
//            b_e += u * sign(mean_e c - c_e)      (u: option update_rate, default 0.001)
//   so an overloaded expert becomes less attractive and an idle one more.
//
// The bias is state: it is registered as the buffer "expert_bias" (router.expert_bias inside a
// MoE layer), so checkpoints save it and resuming restores it bitwise (nn/io/checkpoint.h). The
// counts between two updates are not saved: training loops save after the update, when they are 0.
// Counting, the update and the sign are device ops (sign as positive_mask(x) - positive_mask(-x),
// exact here since mean_e c - c_e is a multiple of 1/E): nothing is read back.
// Selection per token depends only on that token and the bias, so a causal decoder stays causal.
//
// DeepSeek-V3's router in full (its inference/model.py Gate, and section 2.1.2 of the report),
// three more options, all off by default:
//   groups = G, topk_groups = M   group-limited (node-limited) routing: the E experts form G
//            groups of E / G; each token picks its M best groups by their scores and its k
//            experts among theirs only (V3: G = 8, M = 4). A group's score (group_score):
//              top2        the sum of its two largest s + b: DeepSeek-V3's inference/model.py
//                          Gate (the default)
//              k-per-group the sum of its floor(k / M) largest s + b: Megatron-LM's
//                          group_limited_topk (the same as top2 at V3's k = 8, M = 4; at k = 8
//                          of 32 experts in 4 groups with M = 1 it sums 8, and picks differ)
//   scale = c      the routed scaling factor: every gate is multiplied by c after the
//                  renormalisation (V3: 2.5), so the gates sum to c
//   seq_aux = a    the complementary sequence-wise balance loss, beside the bias (V3: a tiny a,
//                  0.0001). For each sequence of S tokens (Router::route_sequences: the MoE layer
//                  passes its [B, S, d] shape; a [T, d] input is one sequence):
//                    s'_t,e = s_t,e / sum_j s_t,j          (the scores normalised per token)
//                    f_e = E / (k S) * #{t in the sequence : e among t's k chosen experts}
//                    P_e = (1 / S) sum_t s'_t,e
//                    L = a * sum_e f_e P_e, averaged over the B sequences ("seq_aux" in the plan)
//                  f is a count (no gradient); the router learns from P.
//
// Options: score ("sigmoid" | "softmax"), renorm (default true), update_rate u >= 0 (0 freezes the
// bias), bias ("true": a trainable logit bias as well, distinct from the selection bias), groups,
// topk_groups, group_score, scale, seq_aux (above).
// Metrics: the toolkit's, and expert_bias_range = max_e b - min_e b.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/moe/router.h"

namespace moelab {

struct AuxFreeOptions {
  bool sigmoid = true;
  bool renorm = true;
  double update_rate = 1e-3;
  bool bias = false;
  std::int64_t groups = 1;       // G: expert groups (1: no group limit)
  std::int64_t topk_groups = 0;  // M: groups each token may use (0: all G)
  bool group_score_top2 = true;  // a group's score: its 2 best (DeepSeek-V3), else its k / M best (Megatron)
  double scale = 1.0;            // the routed scaling factor
  double seq_aux = 0.0;          // the sequence-wise balance loss's coefficient (0: none)
};

AuxFreeOptions parse_aux_free_options(const RouterConfig& config);

class AuxFreeRouter : public Router {
 public:
  AuxFreeRouter(std::int64_t d, std::int64_t experts, std::int64_t k, const AuxFreeOptions& options, Generator& gen,
                DType dtype = DType::Float32);

  // x: [T, d] -> plan; in training mode, adds the plan's tokens per expert to the pending counts.
  // route(x) treats the T tokens as one sequence (for seq_aux).
  RoutingPlan route(const Variable& x) override;
  // b += u * sign(mean(c) - c) over the pending counts, then clears them (no-op without any).
  void after_optimizer_step() override;
  // One when renormalised (k > 1); else sigmoid scores promise nothing, softmax ones sum to <= 1.
  GateSum gate_sum() const override {
    if (options_.scale != 1.0) return GateSum::Free;  // they sum to scale
    if (options_.renorm && k() > 1) return GateSum::One;
    return options_.sigmoid ? GateSum::Free : GateSum::AtMostOne;
  }

  // Router replay, as TopKRouter's: every route() from now on uses these experts (int32 [T, k] of
  // a plan, each in [0, E)) instead of its own biased selection, with the gates recomputed from
  // the current weights (unbiased scores, renormalised and scaled as usual; seq_aux and the bias
  // counts from the replayed experts); until stop_replay(). A batch of another T is an error.
  bool can_replay() const override { return true; }
  void replay(const Tensor& ids) override;
  void stop_replay() override { replay_ = Tensor(); }
  bool replaying() const { return replay_.defined(); }

  const Variable& weight() const { return weight_; }
  const Tensor& expert_bias() const { return expert_bias_; }  // [E], the selection bias

 private:
  AuxFreeOptions options_;
  Variable weight_, bias_;
  Tensor expert_bias_;  // a buffer: shares storage with the module's "expert_bias"
  Tensor pending_;      // [E] assignments counted since the last update (undefined: none)
  Tensor replay_;       // int32 [T, k] while replaying

  // The k experts of each token on the biased scores [T, E], within its topk_groups best groups.
  Tensor choose(const Tensor& biased) const;
  // The sequence-wise balance loss (seq_aux) of the chosen ids [T, k] and the scores [T, E].
  Variable sequence_balance_loss(const Variable& scores, const Tensor& chosen, std::int64_t sequence_length) const;
};

// The registry's factory for "aux-free".
std::shared_ptr<Router> make_aux_free_router(const RouterConfig& config, Generator& gen);

}  // namespace moelab
