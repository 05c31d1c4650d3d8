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
}  // namespace

AuxFreeOptions parse_aux_free_options(const RouterConfig& config) {
  check_router_options(
      config, {"score", "renorm", "update_rate", "bias", "groups", "topk_groups", "group_score", "scale", "seq_aux"},
      kScheme);
  AuxFreeOptions o;
  o.sigmoid = router_option_choice(config, "score", "sigmoid", {"sigmoid", "softmax"}, kScheme) == "sigmoid";
  o.renorm = router_option_bool(config, "renorm", true, kScheme);
  o.update_rate = router_option_double(config, "update_rate", 1e-3, kScheme);
  o.bias = router_option_bool(config, "bias", false, kScheme);
  o.groups = router_option_int(config, "groups", 1, kScheme);
  o.topk_groups = router_option_int(config, "topk_groups", 0, kScheme);
  o.group_score_top2 = router_option_choice(config, "group_score", "top2", {"top2", "k-per-group"}, kScheme) == "top2";
  o.scale = router_option_double(config, "scale", 1.0, kScheme);
  o.seq_aux = router_option_double(config, "seq_aux", 0.0, kScheme);
  return o;
}

AuxFreeRouter::AuxFreeRouter(std::int64_t d, std::int64_t experts, std::int64_t k, const AuxFreeOptions& options,
                             Generator& gen, DType dtype)
    : Router(d, experts, k, kScheme), options_(options) {
  MOELAB_CHECK(dtype != DType::Int32, kScheme, "needs a float dtype, got ", dtype);
  MOELAB_CHECK(options.update_rate >= 0.0 && std::isfinite(options.update_rate), kScheme,
               "update_rate must be a finite number >= 0, got ", options.update_rate);
  const std::int64_t G = options.groups;
  MOELAB_CHECK(G >= 1 && experts % G == 0, kScheme, "groups must be >= 1 and divide the ", experts,
               " experts, got ", G);
  if (options_.topk_groups == 0) options_.topk_groups = G;
  const std::int64_t M = options_.topk_groups;
  MOELAB_CHECK(M >= 1 && M <= G, kScheme, "topk_groups must be in [1, groups = ", G, "], got ", M);
  if (options_.group_score_top2)
    MOELAB_CHECK(G == 1 || experts / G >= 2, kScheme, "a group's score sums its two best experts: groups of ",
                 experts / G, " expert(s) are too small (", experts, " experts in ", G, " groups)");
  else
    MOELAB_CHECK(M == G || (k / M >= 1 && k / M <= experts / G), kScheme,
                 "group_score = k-per-group sums each group's k / topk_groups = ", k, " / ", M, " best experts: it must "
                 "be in [1, ", experts / G, "] (the experts of a group)");
  MOELAB_CHECK(k <= M * (experts / G), kScheme, "k = ", k, " experts do not fit in ", M, " groups of ", experts / G);
  MOELAB_CHECK(options.scale > 0.0 && std::isfinite(options.scale), kScheme,
               "scale must be a finite number > 0, got ", options.scale);
  MOELAB_CHECK(options.seq_aux >= 0.0 && std::isfinite(options.seq_aux), kScheme,
               "seq_aux must be a finite number >= 0, got ", options.seq_aux);
  const double bound = 1.0 / std::sqrt(static_cast<double>(d));
  weight_ = register_parameter("weight", uniform({experts, d}, -bound, bound, gen, dtype));
  if (options.bias) bias_ = register_parameter("bias", zeros({experts}, dtype));
  expert_bias_ = register_buffer("expert_bias", zeros({experts}, dtype));
}

Tensor AuxFreeRouter::choose(const Tensor& biased) const {
  const int k = static_cast<int>(this->k());
  const std::int64_t G = options_.groups, M = options_.topk_groups;
  if (M == G) return kernels::topk(biased, k).indices;  // [T, k]: no group limit
  const std::int64_t T = biased.size(0), E = experts(), per = E / G;
  // A group's score: the sum of its two best biased scores (DeepSeek-V3, with the bias), or of
  // its k / M best (Megatron-LM's group_limited_topk).
  const int summed = options_.group_score_top2 ? 2 : static_cast<int>(k / M);
  const Tensor best = kernels::topk(biased.reshape({T * G, per}), summed).values;        // [T G, summed]
  const Tensor group_score = kernels::sum(best, 1).reshape({T, G});                      // [T, G]
  const Tensor picked = kernels::topk(group_score, static_cast<int>(M)).indices;          // int32 [T, M]
  // in_group[t, g] = 1 when g is among t's M groups: compare the picks with 0..G-1 and add.
  const Tensor groups = arange(0.0, static_cast<double>(G), 1.0, biased.dtype(), biased.device());  // [G]
  const Tensor in_group = kernels::sum(
      kernels::eq(kernels::cast(picked, biased.dtype()).reshape({T, M, 1}), groups), 1);  // [T, G]
  // Experts of the other groups drop to -1e30, far below any score + bias, so top-k skips them
  // (k <= M * per was checked). Written as in * s + (1 - in) * (-1e30): exact for the kept ones.
  const Tensor keep = kernels::mul(in_group.reshape({T, G, 1}), ones({1, 1, per}, biased.dtype(), biased.device()))
                          .reshape({T, E});                                                 // [T, E]
  const Tensor masked = kernels::add(kernels::mul(keep, biased), kernels::mul(kernels::sub(1.0, keep), -1e30));
  return kernels::topk(masked, k).indices;
}

Variable AuxFreeRouter::sequence_balance_loss(const Variable& scores, const Tensor& chosen,
                                              std::int64_t sequence_length) const {
  const std::int64_t T = scores.size(0), E = experts(), k = this->k(), S = sequence_length, B = T / S;
  const DType dtype = scores.dtype();
  // f[b, e] = E / (k S) * (times e was chosen in sequence b): compare every choice with 0..E-1.
  const Tensor all_experts = arange(0.0, static_cast<double>(E), 1.0, dtype, scores.device());  // [E]
  const Tensor hits = kernels::eq(kernels::cast(chosen, dtype).reshape({B, S * k, 1}), all_experts);  // [B, S k, E]
  const Tensor f = kernels::mul(kernels::sum(hits, 1), static_cast<double>(E) / static_cast<double>(k * S));  // [B, E]
  // P[b, e] = mean over the sequence of the per-token normalised scores.
  const Variable normalised = scores / sum(scores, 1, /*keepdim=*/true);             // [T, E]
  const Variable P = mean(reshape(normalised, {B, S, E}), 1);                       // [B, E]
  return mean(sum(Variable(f) * P, 1)) * options_.seq_aux;                          // []
}

RoutingPlan AuxFreeRouter::route(const Variable& x) {
  check_input(x, kScheme);
  const std::int64_t sequence_length = current_sequence_length(x);  // route_sequences' S, or T
  MOELAB_CHECK(x.dtype() == weight_.dtype(), kScheme, "x is ", x.dtype(), " but the router weight is ", weight_.dtype());
  const std::int64_t E = experts();
  Variable logits = matmul(x, weight_, false, /*trans_b=*/true);  // [T, E]
  if (bias_.defined()) logits = logits + bias_;
  const Variable scores = options_.sigmoid ? sigmoid(logits) : softmax(logits);  // [T, E]

  // Selection (constant) on the biased scores: [T, E] + [E] broadcasts the bias over tokens.
  const Tensor biased = kernels::add(scores.data(), expert_bias_);
  PlanParts parts;
  if (replay_.defined())
    MOELAB_CHECK(replay_.size(0) == x.size(0), kScheme, "replayed experts are for ", replay_.size(0),
                 " tokens, this batch has ", x.size(0));
  parts.chosen = replay_.defined() ? replay_.to(x.device()) : choose(biased);  // [T, k]
  const Variable g = gather_last(scores, parts.chosen);          // unbiased scores
  // Renormalised only when k > 1, as Megatron-LM's router does: at k = 1 it would make every gate
  // s/s = 1 and the router would get no gradient from the task loss (the k = 1 trap).
  const Variable renormed = options_.renorm && k() > 1 ? renormalize_rows(g) : g;
  parts.gates = options_.scale != 1.0 ? renormed * options_.scale : renormed;
  if (!options_.sigmoid) parts.probs = scores.data();
  // The bias buffer is updated in place later: the metric reads a snapshot of it.
  parts.extra = [b = kernels::mul(expert_bias_, 1.0)]() {  // a copy
    const std::vector<double> v = host_doubles(b);
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return std::map<std::string, double>{{"expert_bias_range", *hi - *lo}};
  };
  RoutingPlan plan = make_routing_plan(parts, E);
  if (options_.seq_aux > 0.0)
    plan.aux_losses.emplace_back("seq_aux", sequence_balance_loss(scores, parts.chosen, sequence_length));

  if (is_training()) {
    const Tensor counts = kernels::cast(plan.tokens_per_expert, expert_bias_.dtype());
    pending_ = pending_.defined() ? kernels::add(pending_, counts) : counts;
  }
  return plan;
}

void AuxFreeRouter::replay(const Tensor& ids) { replay_ = checked_replay_ids(ids, k(), experts(), kScheme); }

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
