// nn/moe/top_k_router.h — token-choice top-k routing: each token picks its k best experts.
//
//   x: [T, d], weight W: [E, d] (PyTorch nn.Linear layout), optional bias b: [E]
//   logits = x W^T (+ b)                                   [T, E]
//   p      = softmax(logits) over the experts              [T, E]
//   S_t    = the k experts with the largest logits          [T, k] (ties: the lower expert id first)
//
// Gate modes (option "gates"):
//   "softmax-topk-renorm" (k >= 2's default) g_tj = p_t,S_tj / sum_i p_t,S_ti          Mixtral (Jiang et al. 2024);
//                                                                             GShard's top-2 (Algorithm 1)
//   "softmax-topk" (k = 1's default) g_tj = p_t,S_tj (no renormalisation)     Switch (k = 1), V-MoE
//   "topk-softmax"                   g_t  = softmax(logits_t,S_t)              the granularity paper's code
//   "equal"                          g_tj = 1 / k (constant)                   the granularity paper's theory;
//                                    the router then gets no gradient through the gates (a warning says so)
// The renormalised mode and topk-softmax give the same gates (softmax is shift-invariant); they
// are kept apart because the papers name them apart.
// THE k = 1 TRAP. With k = 1 both of them make every gate p/p = 1 (a softmax over one logit is 1),
// so the task loss sends the router exactly zero gradient: the router stays as initialised (only
// an aux loss or weight decay moves it). A router built that way is refused (moelab::Error, and
// exit 2 on the command line) unless option allow_constant_gates = "true" says it is meant (a
// teacher that never trains, a study of fixed routing). Top-1 routers that learn use
// "softmax-topk": Switch's gate p_t,e, DeepSeekMoE's un-renormalised softmax gate; it is the
// default at k = 1, so a router built with every default learns (a renormalised mode at k = 1 must
// be asked for, and is then refused as above). (The granularity paper is Boix-Adsera and
// Rigollet, "The power of fine-grained experts", 2025; every paper named here: docs/REFERENCES.md.)
//
// Options (RouterConfig::options; unknown keys and bad values are errors):
//   gates            see above
//   bias             "true": a trainable bias b: [E], initialised to 0 (the granularity paper's
//                    student adds one); default "false"
//   jitter           eps >= 0: in training mode only, x is multiplied elementwise by noise uniform
//                    in [1 - eps, 1 + eps] before the router (Switch Transformer); drawn from a
//                    random stream keyed by "jitter_seed" or else by one draw from the
//                    constructor's Generator (made only when jitter > 0), whose key and counter
//                    are the host buffer "jitter_state" (nn/random_stream.h): checkpoints save
//                    it, so a resumed run draws the same noise as an uninterrupted one
//   load_balance     coefficient a >= 0 of the Switch load-balancing loss (Fedus et al. 2021, eq. 4):
//                      a * E * sum_e f_e * P_e,  f_e = (assignments to e) / (T*k) (counted before
//                      any capacity drop, not differentiable), P_e = mean_t p_t,e
//                    (1 when perfectly balanced, for every k; HF Mixtral's version is k times this)
//   balance_scope    where load_balance counts f and P: "batch" (default) over every token of the
//                    step's batch, the global-batch form (Qiu et al. 2025, "Demons in the Detail",
//                    Qwen: balance over the global batch, not each micro-batch; without gradient
//                    accumulation a step is one batch); or "sequence": f and P per sequence
//                    of the batch (the MoE layer's [B, S, d], Router::route_sequences), the loss
//                    averaged over the sequences: the micro-batch-of-one-sequence form that paper
//                    compares against; or "global": f counted over every micro-batch of the
//                    optimizer step so far (gradient accumulation, nn/train_loop.h's accumulate),
//                    Megatron-LM's global_aux_loss: each training forward (training mode, gradients
//                    on) adds its counts to the router's BalanceCounts (nn/moe/router_toolkit.h) and
//                    the loss uses the shares over all of them with its own P; the counts are reset
//                    after every optimizer step (after_optimizer_step), so the last micro-batch of
//                    a step sees the whole step's f. Evaluation forwards count only themselves.
//                    The load_balance_raw metric stays the batch's
//   null_experts     N >= 0 zero-computation experts (MoE++, Jin et al. 2024, its "zero experts"):
//                    the router scores E + N experts (weight [E + N, d]); a slot that picks one
//                    of the N computes nothing: it becomes an unused slot (kUnusedSlot, its gate 0).
//                    With gates=softmax-topk-renorm its probability is zeroed before renormalising,
//                    as MoE++'s released gating() does, so the token's output is sum over its real
//                    slots of p_e / (sum of its k chosen p, nulls left out) * expert_e(x) (a token
//                    of real + null at k = 2 gives its real expert gate 1, whose gradient to the
//                    router is then 0; a token of nulls only gives 0); with softmax-topk and
//                    topk-softmax (MoE++'s Mixtral gating) a null's gate is simply not used, its
//                    share still in the softmax. load_balance then counts f and P over all E + N
//                    (a null expert is balanced like any other). Metrics: null_fraction (the share
//                    of the T*k choices that went to a null expert) and mean_slots (real slots per
//                    token); router_entropy is not reported. Not with forced or replay
//   copy_experts     M >= 0 copy experts (MoE++'s "copy experts": the expert is the identity), scored
//                    after the null ones (weight [E + N + M, d]); a slot that picks one computes no
//                    MLP (an unused slot for the expert bank) and adds its gate times the token's
//                    input to the output (RoutingPlan::direct_output: g_copy * x, differentiable in
//                    g). Balanced, counted and refused like the null ones; metric copy_fraction.
//   constant_experts C >= 0 constant experts (MoE++'s third kind), scored after the copy ones
//                    (weight [E + N + M + C, d]); constant expert c has a trained vector v_c [d]
//                    (parameter "constant_vectors" [C, d], drawn from N(0, 1) as MoE++'s code does)
//                    and a trained mixing matrix W_c [2, d] (parameter "constant_mix" [2C, d],
//                    nn.Linear's uniform init, no bias); its output is a0 * x + a1 * v_c with
//                    [a0, a1] = softmax(W_c x). A slot that picks it computes no MLP and adds its
//                    gate times that output (RoutingPlan::direct_output). Balanced, counted and
//                    refused like the null ones; metric constant_fraction. MoE++'s gating
//                    residuals and its tau-weighted balance loss are not implemented
//                    renormalize_kept renormalises over the kept real slots alone
//   z_loss           coefficient >= 0 of the router z-loss (ST-MoE, Zoph et al. 2022):
//                      mean_t logsumexp(logits_t)^2
//   allow_constant_gates  "true": accept k = 1 with softmax-topk-renorm or topk-softmax (see above);
//                    default "false"
//   capacity_factor  0 (default) = no dropping, as in the Mixture of Parrots experiments; else each
//                    expert keeps at most C = ceil(capacity_factor * T * k / E) assignments, taken
//                    in drop_order; the others are dropped (expert -1, gate 0) and the token passes
//                    through the layer's residual only for that slot (Switch, GShard)
//   drop_order       which assignments an expert over C keeps (nn/moe/router_toolkit.h):
//                    "tokens" (default: token t before t + 1, within a token its 1st choice first;
//                    Switch, Megatron-LM's "position"), "choices" (every token's 1st choice before
//                    any 2nd: GShard, DeepSpeed, flaxformer) or "probability" (the largest router
//                    probabilities first: Megatron-LM's default "probs"); needs capacity_factor
//   renormalize_kept "true": after dropping, each token's gates are divided by the sum of its kept
//                    gates (GShard and DeepSpeed's top-2); default "false"; needs capacity_factor
//   forced           "balanced": token t goes to experts (t k + j) mod E, j < k, whatever the scores
//                    (every expert the same load: a benchmarking mode that separates the cost of
//                    the experts from the imbalance of a learned router); gates as the gate mode
//                    computes them for those experts; default "none". Router replay (replay()
//                    below) forces recorded experts the same way.
// The counting and the capacity run on x's device (kernels::group_by_expert), so the router reads
// nothing back to the host; with a capacity, max_kept = min(T*k, E*C).
// The plan is made by make_routing_plan (nn/moe/router_toolkit.h). Metrics (computed when asked,
// from the last plan's device tensors): dropped_fraction, router_entropy (mean_t of -sum_e p log p,
// in nats), load_max_over_mean and load_cv (the toolkit's), capacity (when set), load_balance_raw
// and z_loss_raw (the two losses without coefficients, always reported).
//
// Everything differentiable is built from autograd ops (matmul, softmax, gather_last, div, ...),
// so gradients reach W, b and x through the gates and the aux losses; the selection itself (the
// top-k indices, the drop mask, f_e) is constant, as in every top-k router.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "nn/moe/router.h"
#include "nn/moe/router_toolkit.h"
#include "nn/random_stream.h"

namespace moelab {

enum class GateMode { SoftmaxTopkRenorm, SoftmaxTopk, TopkSoftmax, Equal };
const char* gate_mode_name(GateMode mode);

struct TopKRouterOptions {
  GateMode gates = GateMode::SoftmaxTopkRenorm;
  bool bias = false;
  double jitter = 0.0;
  double load_balance = 0.0;
  double z_loss = 0.0;
  double capacity_factor = 0.0;
  CapacityOrder drop_order = CapacityOrder::Tokens;
  bool renormalize_kept = false;
  bool forced_balanced = false;
  bool allow_constant_gates = false;
  bool balance_per_sequence = false;  // balance_scope = "sequence"
  bool balance_global = false;        // balance_scope = "global" (the step's micro-batches so far)
  std::int64_t null_experts = 0;      // zero-computation experts beside the E real ones
  std::int64_t copy_experts = 0;      // identity experts after the null ones
  std::int64_t constant_experts = 0;  // MoE++'s constant experts after the copy ones
  std::optional<std::uint64_t> jitter_seed;
};

// Parses config.options (throws moelab::Error naming an unknown key or a bad value).
TopKRouterOptions parse_top_k_options(const RouterConfig& config);

// True when every gate of a top-k plan is the constant 1: k = 1 with a gate mode that normalises
// over the chosen experts (softmax-topk-renorm, topk-softmax). The router then gets no gradient
// from the task loss.
bool top_k_gates_constant(GateMode mode, std::int64_t k);

// The routing computation for given parameters, so that tests can differentiate with respect to
// leaves of their own. x: [T, d], weight: [E, d], bias: [E] or undefined, 1 <= k <= E;
// noise: [T, d] multiplicative jitter factors, or undefined for none; forced: int32 [T, k] experts
// to use instead of the top-k selection (gates, aux losses and capacity as usual), or undefined;
// sequence_length: the tokens per sequence for balance_scope = sequence (-1: all T, one sequence).
// constant_vectors [C, d] and constant_mix [2C, d]: the constant experts' parameters (C =
// options.constant_experts; undefined when C = 0). global_counts: with balance_scope = global, the
// step's counts so far, to which this batch's are added (null: the batch's f alone).
RoutingPlan top_k_route(const Variable& x, const Variable& weight, const Variable& bias, std::int64_t k,
                        const TopKRouterOptions& options, const Tensor& noise = Tensor(),
                        const Tensor& forced = Tensor(), std::int64_t sequence_length = -1,
                        const Variable& constant_vectors = Variable(), const Variable& constant_mix = Variable(),
                        BalanceCounts* global_counts = nullptr);

class TopKRouter : public Router {
 public:
  // Registers "weight" [E, d] (uniform in +-1/sqrt(d), as nn.Linear) and, with options.bias, "bias" [E].
  TopKRouter(std::int64_t d, std::int64_t experts, std::int64_t k, const TopKRouterOptions& options, Generator& gen,
             DType dtype = DType::Float32);

  // x: [T, d] -> plan; draws jitter noise in training mode when options.jitter > 0. Called
  // directly, x is one sequence of T; through route_sequences (the MoE layer), x is sequences of
  // its S (current_sequence_length; it matters for balance_scope = sequence only). A subclass that
  // overrides it is what the layer calls, and may call TopKRouter::route(x) within.
  RoutingPlan route(const Variable& x) override;
  // Resets the balance_scope = global counts (the step's micro-batches are done).
  void after_optimizer_step() override;
  // The micro-batches counted since the last optimizer step (balance_scope = global; else 0).
  std::int64_t counted_micro_batches() const { return global_counts_.micro_batches(); }
  // One for the renormalised modes, topk-softmax and equal; AtMostOne for softmax-topk.
  GateSum gate_sum() const override;

  // Router replay (Router::replay): the experts (int32 [T, k] of a plan's `selected`, each in
  // [0, E)) replace this router's own selection, the gates recomputed from the current weights by
  // the gate mode and a capacity applied again; until stop_replay(). RL trainers replay the
  // experts of the rollout in the training forward; comparisons of schemes can share one routing.
  // Not with null, copy or constant experts (their slots are not experts to replay).
  bool can_replay() const override;
  std::string why_no_replay() const override;
  void replay(const Tensor& ids) override;
  void stop_replay() override;
  bool replaying() const { return replay_.defined(); }

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }  // undefined without options.bias
  // The constant experts' v [C, d] and W [2C, d]; undefined without options.constant_experts.
  const Variable& constant_vectors() const { return constant_vectors_; }
  const Variable& constant_mix() const { return constant_mix_; }
  const TopKRouterOptions& options() const { return options_; }

 private:
  TopKRouterOptions options_;
  Variable weight_, bias_;
  Variable constant_vectors_, constant_mix_;  // constant_experts > 0 only
  RandomStream jitter_;  // the "jitter_state" host buffer, with jitter > 0 only (nn/random_stream.h)
  Tensor replay_;        // int32 [T, k] while replaying
  Tensor balanced_ids_;  // forced = balanced: the last batch size's ids, kept on its device
  BalanceCounts global_counts_;  // balance_scope = global: this step's micro-batches so far
};

// The registry's factory for "topk".
std::shared_ptr<Router> make_top_k_router(const RouterConfig& config, Generator& gen);

}  // namespace moelab
