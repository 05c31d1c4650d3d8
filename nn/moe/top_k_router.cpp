// nn/moe/top_k_router.cpp — token-choice top-k routing (see the header for the math and papers).
#include "nn/moe/top_k_router.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/router_toolkit.h"

namespace moelab {

namespace {

constexpr const char* kScheme = "TopKRouter";

}  // namespace

const char* gate_mode_name(GateMode mode) {
  switch (mode) {
    case GateMode::SoftmaxTopkRenorm: return "softmax-topk-renorm";
    case GateMode::SoftmaxTopk: return "softmax-topk";
    case GateMode::TopkSoftmax: return "topk-softmax";
    case GateMode::Equal: return "equal";
  }
  return "?";
}

TopKRouterOptions parse_top_k_options(const RouterConfig& config) {
  check_router_options(config, {"gates", "bias", "jitter", "jitter_seed", "load_balance", "z_loss", "capacity_factor",
                                "drop_order", "renormalize_kept", "forced", "allow_constant_gates", "balance_scope",
                                "null_experts", "copy_experts", "constant_experts"},
                       kScheme);
  TopKRouterOptions o;
  // The default gates: Mixtral's renormalised ones, but Switch's p itself at k = 1, where the
  // renormalised gate is p/p = 1 and the router would never learn (the k = 1 trap, the header), so
  // that a config with every default builds a router that learns.
  const std::string gates = router_option_choice(
      config, "gates", config.k == 1 ? "softmax-topk" : "softmax-topk-renorm", {"softmax-topk-renorm", "softmax-topk", "topk-softmax", "equal"}, kScheme);
  for (GateMode m : {GateMode::SoftmaxTopkRenorm, GateMode::SoftmaxTopk, GateMode::TopkSoftmax, GateMode::Equal})
    if (gates == gate_mode_name(m)) o.gates = m;
  o.bias = router_option_bool(config, "bias", false, kScheme);
  o.jitter = router_option_double(config, "jitter", 0.0, kScheme);
  MOELAB_CHECK(o.jitter < 1.0, kScheme, "option 'jitter' must be < 1 (noise factors stay positive), got ", o.jitter);
  o.load_balance = router_option_double(config, "load_balance", 0.0, kScheme);
  o.z_loss = router_option_double(config, "z_loss", 0.0, kScheme);
  o.capacity_factor = router_option_double(config, "capacity_factor", 0.0, kScheme);
  const std::string order =
      router_option_choice(config, "drop_order", "tokens", {"tokens", "choices", "probability"}, kScheme);
  for (CapacityOrder c : {CapacityOrder::Tokens, CapacityOrder::Choices, CapacityOrder::Probability})
    if (order == capacity_order_name(c)) o.drop_order = c;
  o.renormalize_kept = router_option_bool(config, "renormalize_kept", false, kScheme);
  o.forced_balanced = router_option_choice(config, "forced", "none", {"none", "balanced"}, kScheme) == "balanced";
  MOELAB_CHECK(o.capacity_factor > 0.0 || (o.drop_order == CapacityOrder::Tokens && !o.renormalize_kept), kScheme,
               "options 'drop_order' and 'renormalize_kept' say what happens when an expert is over its capacity: "
               "they need 'capacity_factor' > 0 (none is set, so nothing is ever dropped)");
  o.allow_constant_gates = router_option_bool(config, "allow_constant_gates", false, kScheme);
  const std::string scope = router_option_choice(config, "balance_scope", "batch", {"batch", "sequence", "global"}, kScheme);
  o.balance_per_sequence = scope == "sequence";
  o.balance_global = scope == "global";
  o.null_experts = router_option_int(config, "null_experts", 0, kScheme);
  o.copy_experts = router_option_int(config, "copy_experts", 0, kScheme);
  o.constant_experts = router_option_int(config, "constant_experts", 0, kScheme);
  MOELAB_CHECK(!o.forced_balanced || (o.null_experts == 0 && o.copy_experts == 0 && o.constant_experts == 0), kScheme,
               "forced = balanced routes to real experts only: it does not combine with null_experts, copy_experts "
               "or constant_experts");
  if (config.options.count("jitter_seed")) {
    const double s = router_option_double(config, "jitter_seed", 0.0, kScheme);
    MOELAB_CHECK(s == std::floor(s) && s < 1.8e19, kScheme, "option 'jitter_seed' must be a whole number, got '",
                 config.options.at("jitter_seed"), "'");
    o.jitter_seed = static_cast<std::uint64_t>(s);
  }
  return o;
}

bool top_k_gates_constant(GateMode mode, std::int64_t k) {
  return k == 1 && (mode == GateMode::SoftmaxTopkRenorm || mode == GateMode::TopkSoftmax);
}

// ---------------------------------------------------------------- the routing computation
RoutingPlan top_k_route(const Variable& x, const Variable& weight, const Variable& bias, std::int64_t k,
                        const TopKRouterOptions& o, const Tensor& noise, const Tensor& forced,
                        std::int64_t sequence_length, const Variable& constant_vectors,
                        const Variable& constant_mix, BalanceCounts* global_counts) {
  MOELAB_CHECK(x.rank() == 2 && weight.rank() == 2 && x.size(1) == weight.size(1), "top_k_route",
               "x must be [T, d] and weight [E, d], got x ", x.shape(), " and weight ", weight.shape());
  // The weight's rows: E experts, then o.null_experts null ones, o.copy_experts copy ones and
  // o.constant_experts constant ones (E_all in all; N + M + C of them "special": no MLP).
  const std::int64_t T = x.size(0), E_all = weight.size(0), N = o.null_experts, M = o.copy_experts,
                     C = o.constant_experts;
  const std::int64_t E = E_all - N - M - C, special = N + M + C;
  MOELAB_CHECK(T >= 1, "top_k_route", "x must have at least one token, got ", x.shape());
  MOELAB_CHECK(N >= 0 && M >= 0 && C >= 0 && E >= 1, "top_k_route", "the weight's ", E_all,
               " rows must hold at least one expert beside ", N, " null, ", M, " copy and ", C, " constant experts");
  MOELAB_CHECK(C == 0 || (constant_vectors.defined() && constant_mix.defined() &&
                          constant_vectors.shape() == Shape{C, x.size(1)} && constant_mix.shape() == Shape{2 * C, x.size(1)}),
               "top_k_route", C, " constant experts need constant_vectors [", C, ", ", x.size(1), "] and constant_mix [",
               2 * C, ", ", x.size(1), "]");
  MOELAB_CHECK(k >= 1 && k <= E_all, "top_k_route", "k must be in [1, E = ", E_all, "], got ", k);
  MOELAB_CHECK(x.dtype() == weight.dtype(), "top_k_route", "x is ", x.dtype(), " but the weight is ", weight.dtype());
  MOELAB_CHECK(!bias.defined() || (bias.rank() == 1 && bias.size(0) == E_all), "top_k_route", "bias must be [",
               E_all, "], got ", bias.shape());

  // logits = (x * noise) W^T (+ b): [T, E]; p = softmax(logits): [T, E]
  Variable xin = noise.defined() ? x * Variable(noise) : x;
  Variable logits = matmul(xin, weight, false, /*trans_b=*/true);
  if (bias.defined()) logits = logits + bias;
  Variable probs = softmax(logits);

  // Selection (constant): the k largest logits per token, ties to the lower expert id, unless the
  // experts are forced (a replay, or the balanced benchmark mode). [T, k]
  MOELAB_CHECK(!forced.defined() || (forced.dtype() == DType::Int32 && forced.shape() == Shape{T, k} &&
                                     forced.device() == x.device()),
               "top_k_route", "forced experts must be int32 [", T, ", ", k, "] on x's device, got ",
               forced.defined() ? forced.str() : std::string());
  MOELAB_CHECK(!forced.defined() || special == 0, "top_k_route",
               "forced (replayed) experts do not combine with null, copy or constant experts");
  const Tensor chosen_all = forced.defined() ? forced : kernels::topk(logits.data(), static_cast<int>(k)).indices;
  // Null experts (ids E .. E + N - 1) compute nothing, copy experts (E + N .. E + N + M - 1) and
  // constant experts (E + N + M .. E_all - 1) no MLP: their slots become kUnusedSlot, so the
  // experts' part of the output is the gated sum of the real slots alone (with renormalised gates
  // the copy and constant slots' share stays in the denominator, the null ones' does not: below).
  // [T, k], 0/1 float64
  Tensor ids, is_null, is_copy, is_constant, chosen = chosen_all;
  if (special > 0) {
    ids = kernels::cast(chosen_all, DType::Float64);
    const Tensor is_special = kernels::ge(ids, static_cast<double>(E));
    const Tensor past_nulls = kernels::ge(ids, static_cast<double>(E + N));
    is_constant = kernels::ge(ids, static_cast<double>(E + N + M));
    is_copy = kernels::sub(past_nulls, is_constant);
    is_null = kernels::sub(is_special, past_nulls);
    chosen = select_ids(chosen_all, kernels::sub(1.0, is_special), kUnusedSlot);
  }

  // Gates before dropping: [T, k]
  Variable gates;
  switch (o.gates) {
    case GateMode::SoftmaxTopkRenorm:
      if (N == 0) {
        gates = renormalize_rows(gather_last(probs, chosen_all));  // rows sum to 1
      } else {
        // MoE++'s released gating(): a null slot's probability is zeroed before the renormalisation,
        // so a token's real (and copy, constant) slots share all of its output; a token whose k
        // choices are all null gets no output (0 / 1 rather than 0 / 0). [T, k]
        const Tensor not_null = kernels::sub(1.0, is_null);
        const Tensor all_null = kernels::eq(kernels::sum(not_null, 1, /*keepdim=*/true), 0.0);  // [T, 1]
        const Variable kept = gather_last(probs, chosen_all) * Variable(kernels::cast(not_null, x.dtype()));
        gates = kept / (sum(kept, 1, /*keepdim=*/true) + Variable(kernels::cast(all_null, x.dtype())));
      }
      break;
    case GateMode::SoftmaxTopk: gates = gather_last(probs, chosen_all); break;
    case GateMode::TopkSoftmax: gates = softmax(gather_last(logits, chosen_all)); break;
    case GateMode::Equal: gates = Variable(full({T, k}, 1.0 / static_cast<double>(k), x.dtype(), x.device())); break;
  }

  // Counting and capacity on the device, in token order: assignment (t, j) before (t, j + 1)
  // before (t + 1, 0); each expert keeps its first `capacity` (router_toolkit.h; dropped gates := 0).
  const bool capped = o.capacity_factor > 0.0;
  const std::int64_t capacity =
      capped ? static_cast<std::int64_t>(std::ceil(o.capacity_factor * static_cast<double>(T * k) / E)) : -1;
  PlanParts parts;
  parts.chosen = chosen;
  parts.gates = gates;
  parts.capacity = capacity;
  parts.capacity_order = o.drop_order;
  // drop_order=probability ranks an over-full expert's assignments by the gates themselves (the
  // toolkit's default scores), as Megatron-LM's "probs" drop policy ranks by its `probs`: the
  // renormalised top-k gates by default (softmax over the k chosen logits, which is our
  // softmax-topk-renorm and topk-softmax), the raw softmax probabilities with
  // --moe-router-pre-softmax (our gates=softmax-topk). Ranking by the raw probability whatever
  // the gates (as before) kept other assignments at k >= 2: 2-6 of 64 tokens in an audit.
  parts.renormalize_kept = o.renormalize_kept;
  if (special == 0) {
    parts.probs = probs.data();
  } else {
    parts.variable_slots = true;  // special slots are unused slots: `slots` counts the real ones
    parts.extra = [is_null, is_copy, is_constant, N, M, C]() {
      const auto share = [](const Tensor& mask) {
        const std::vector<double> v = host_doubles(mask);
        double hits = 0;
        for (double z : v) hits += z;
        return v.empty() ? 0.0 : hits / static_cast<double>(v.size());
      };
      std::map<std::string, double> m;
      if (N > 0) m["null_fraction"] = share(is_null);
      if (M > 0) m["copy_fraction"] = share(is_copy);
      if (C > 0) m["constant_fraction"] = share(is_constant);
      return m;
    };
  }

  RoutingPlan plan = make_routing_plan(parts, E);
  if (M > 0) {
    // Copy experts: y += (sum of the token's copy gates) * x, differentiable in the gates. [T, d]
    const Variable copy_gate = sum(gates * Variable(kernels::cast(is_copy, x.dtype())), 1);  // [T]
    plan.direct_output = reshape(copy_gate, {T, 1}) * x;
  }
  if (C > 0) {
    // Constant expert c: y += g_c * (a0 * x + a1 * v_c), [a0, a1] = softmax(W_c x), differentiable
    // in the gates, W_c and v_c. [T, d]
    const Variable mix_logits = matmul(x, constant_mix, false, /*trans_b=*/true);  // [T, 2C]
    for (std::int64_t c = 0; c < C; ++c) {
      const Tensor picked = kernels::cast(kernels::eq(ids, static_cast<double>(E + N + M + c)), x.dtype());  // [T, k]
      const Variable gate_c = reshape(sum(gates * Variable(picked), 1), {T, 1});                           // [T, 1]
      const Variable a = softmax(narrow(mix_logits, 1, 2 * c, 2));                                          // [T, 2]
      const Variable out = narrow(a, 1, 0, 1) * x + matmul(narrow(a, 1, 1, 1), narrow(constant_vectors, 0, c, 1));
      plan.direct_output = plan.direct_output.defined() ? plan.direct_output + gate_c * out : gate_c * out;
    }
  }

  // f_e = wanted_e / (T*k): the routing decision before dropping (constant). [E]; with null
  // experts, over all E_all: each one's share of the T*k choices, nulls included.
  const Tensor f = special == 0 ? kernels::div(kernels::cast(plan.groups->wanted, x.dtype()), static_cast<double>(T * k))
                          : kernels::div(kernels::sum(kernels::eq(kernels::cast(chosen_all, x.dtype()).reshape({T * k, 1}),
                                                                  arange(0.0, static_cast<double>(E_all), 1.0, x.dtype(),
                                                                         x.device())),
                                                      0),
                                         static_cast<double>(T * k));

  // The toolkit's metrics plus the two aux losses' raw values (host, float64, on demand).
  plan.metrics = [common = plan.metrics, probs = probs.data(), logits = logits.data(), f, T, E = E_all]() {
    std::map<std::string, double> m = common();
    const std::vector<double> p = host_doubles(probs), l = host_doubles(logits), fe = host_doubles(f);
    double z_raw = 0.0;
    std::vector<double> P(static_cast<std::size_t>(E), 0.0);
    for (std::int64_t t = 0; t < T; ++t) {
      double mx = l[t * E];
      for (std::int64_t e = 1; e < E; ++e) mx = std::max(mx, l[t * E + e]);
      double s = 0.0;
      for (std::int64_t e = 0; e < E; ++e) {
        P[e] += p[t * E + e] / static_cast<double>(T);
        s += std::exp(l[t * E + e] - mx);
      }
      const double lse = mx + std::log(s);
      z_raw += lse * lse / static_cast<double>(T);
    }
    double lb_raw = 0.0;
    for (std::int64_t e = 0; e < E; ++e) lb_raw += static_cast<double>(E) * fe[e] * P[e];
    m["load_balance_raw"] = lb_raw;
    m["z_loss_raw"] = z_raw;
    return m;
  };

  // Aux losses (differentiable) when their coefficient is on.
  const std::int64_t S = sequence_length > 0 ? sequence_length : T;
  MOELAB_CHECK(T % S == 0, "top_k_route", "sequence_length ", S, " must divide the ", T, " tokens");
  if (o.load_balance > 0.0 && (!o.balance_per_sequence || S == T)) {
    // balance_scope = global: f over this step's micro-batches so far, this one included. [E]
    const Tensor f_loss = global_counts != nullptr ? global_counts->add(f, T * k) : f;
    plan.aux_losses.emplace_back("load_balance", switch_balance_loss(probs, f_loss, o.load_balance));
  } else if (o.load_balance > 0.0) {
    // Per sequence b of S tokens: f_be = (its assignments to e) / (S k), P_be = mean of its p; the
    // loss averaged over the B sequences. [B, E]
    plan.aux_losses.emplace_back("load_balance", switch_balance_loss(probs, choice_shares(chosen_all, E_all, T / S, x.dtype()),
                                                                     o.load_balance));
  }
  if (o.z_loss > 0.0) {
    // logsumexp(l_t) = l_t0 - log_softmax(l_t)_0, stable and built from differentiable ops. [T, 1]
    Variable lse = narrow(logits, 1, 0, 1) - narrow(log_softmax(logits), 1, 0, 1);
    plan.aux_losses.emplace_back("z_loss", mean(lse * lse) * o.z_loss);
  }
  return plan;
}

// ---------------------------------------------------------------- the module
TopKRouter::TopKRouter(std::int64_t d, std::int64_t experts, std::int64_t k, const TopKRouterOptions& options,
                       Generator& gen, DType dtype)
    : Router(d, experts, k, kScheme), options_(options) {
  MOELAB_CHECK(dtype != DType::Int32, kScheme, "needs a float dtype, got ", dtype);
  MOELAB_CHECK(options.jitter >= 0.0 && options.jitter < 1.0, kScheme, "jitter must be in [0, 1), got ", options.jitter);
  MOELAB_CHECK(options.load_balance >= 0.0 && options.z_loss >= 0.0 && options.capacity_factor >= 0.0, kScheme,
               "load_balance, z_loss and capacity_factor must be >= 0");
  MOELAB_CHECK(!top_k_gates_constant(options.gates, k) || options.allow_constant_gates, kScheme,
               "k = 1 with gates = ", gate_mode_name(options.gates),
               " makes every gate p/p = 1, so the router gets no gradient from the task loss and never learns "
               "(only an aux loss or weight decay would move it). Use gates = softmax-topk (Switch's and "
               "DeepSeekMoE's top-1 gate, p itself), k >= 2, or option allow_constant_gates = true if a fixed "
               "router is what you want");
  const double bound = 1.0 / std::sqrt(static_cast<double>(d));
  MOELAB_CHECK(options.null_experts >= 0 && options.copy_experts >= 0 && options.constant_experts >= 0, kScheme,
               "null_experts, copy_experts and constant_experts must be >= 0, got ", options.null_experts, ", ",
               options.copy_experts, " and ", options.constant_experts);
  const std::int64_t C = options.constant_experts;
  const std::int64_t rows = experts + options.null_experts + options.copy_experts + C;  // real, null, copy, constant
  weight_ = register_parameter("weight", uniform({rows, d}, -bound, bound, gen, dtype));
  if (options.bias) bias_ = register_parameter("bias", zeros({rows}, dtype));
  if (C > 0) {
    // MoE++'s ConstantExpert: the vector from N(0, 1), the mixing layer as nn.Linear(d, 2, bias=False).
    constant_vectors_ = register_parameter("constant_vectors", normal({C, d}, 0.0, 1.0, gen, dtype));
    constant_mix_ = register_parameter("constant_mix", uniform({2 * C, d}, -bound, bound, gen, dtype));
  }
  if (options.jitter > 0.0) {
    // The stream's key and counter are a host buffer: checkpoints save them, so a resumed run draws
    // the noise the uninterrupted one would have.
    const std::uint64_t key = options.jitter_seed ? *options.jitter_seed : gen.next_u32();
    jitter_ = RandomStream(register_buffer("jitter_state", RandomStream::initial_state(key), BufferPlace::Host));
  }
  if (options.gates == GateMode::Equal) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      std::cerr << "moelab: warning: TopKRouter with gates=equal: every gate is 1/k, so the router weights get no "
                   "gradient from the task loss (only from aux losses, if any)\n";
  }
}

bool TopKRouter::can_replay() const {
  return options_.null_experts == 0 && options_.copy_experts == 0 && options_.constant_experts == 0;
}

std::string TopKRouter::why_no_replay() const {
  return "replay does not combine with null, copy or constant experts (a plan's special slots are unused slots, "
         "not ids to replay)";
}

void TopKRouter::replay(const Tensor& ids) {
  MOELAB_CHECK(can_replay(), kScheme, why_no_replay());
  replay_ = checked_replay_ids(ids, k(), experts(), kScheme);
}

void TopKRouter::stop_replay() { replay_ = Tensor(); }

RoutingPlan TopKRouter::route(const Variable& x) {
  check_input(x, kScheme);
  const std::int64_t sequence_length = current_sequence_length(x);  // route_sequences' S, or T
  MOELAB_CHECK(x.dtype() == weight_.dtype(), kScheme, "x is ", x.dtype(), " but the router weight is ", weight_.dtype());
  Tensor noise;
  if (is_training() && options_.jitter > 0.0) {
    // Drawn on x's device (fill_uniform), so nothing is uploaded.
    noise = Tensor::empty(x.shape(), x.dtype(), x.device());
    Generator gen = jitter_.generator();
    kernels::fill_uniform(noise, 1.0 - options_.jitter, 1.0 + options_.jitter, gen);
    jitter_.store(gen);
  }
  Tensor forced = replay_;
  if (!forced.defined() && options_.forced_balanced) {
    // Token t takes experts (t k + j) mod E, j < k: every expert the same load (+-1), distinct
    // experts per token. Made on the host once per (T, device) and kept.
    const std::int64_t T = x.size(0), k = this->k(), E = experts();
    if (!balanced_ids_.defined() || balanced_ids_.size(0) != T || balanced_ids_.device() != x.device()) {
      std::vector<std::int32_t> ids(static_cast<std::size_t>(T * k));
      for (std::int64_t a = 0; a < T * k; ++a) ids[static_cast<std::size_t>(a)] = static_cast<std::int32_t>(a % E);
      balanced_ids_ = from_vector(ids, {T, k}, x.device());
    }
    forced = balanced_ids_;
  }
  if (forced.defined())
    MOELAB_CHECK(forced.size(0) == x.size(0), kScheme, "replayed experts are for ", forced.size(0),
                 " tokens, this batch has ", x.size(0));
  // Only training forwards are micro-batches of a step; an evaluation counts only itself.
  BalanceCounts* global = options_.balance_global && is_training() && grad_enabled() ? &global_counts_ : nullptr;
  return top_k_route(x, weight_, bias_, k(), options_, noise, forced, sequence_length, constant_vectors_,
                     constant_mix_, global);
}

void TopKRouter::after_optimizer_step() { global_counts_.reset(); }

GateSum TopKRouter::gate_sum() const {
  // A special slot's share stays in the other gates' denominator: they sum to at most 1.
  if (options_.null_experts > 0 || options_.copy_experts > 0 || options_.constant_experts > 0) return options_.gates == GateMode::Equal ? GateSum::Free : GateSum::AtMostOne;
  return options_.gates == GateMode::SoftmaxTopk ? GateSum::AtMostOne : GateSum::One;
}

std::shared_ptr<Router> make_top_k_router(const RouterConfig& config, Generator& gen) {
  return std::make_shared<TopKRouter>(config.d, config.experts, config.k, parse_top_k_options(config), gen,
                                      config.dtype);
}

}  // namespace moelab
