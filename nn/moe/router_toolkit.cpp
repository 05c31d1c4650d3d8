// nn/moe/router_toolkit.cpp — the routers' shared pieces (see the header for shapes and metrics).
#include "nn/moe/router_toolkit.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/routing_analysis.h"

namespace moelab {

namespace {

using kernels::BinaryOp;

// Integer ids through float64 (exact for any int32): the float ops run on every device.
Tensor as_f64(const Tensor& ids) { return kernels::cast(ids, DType::Float64); }

}  // namespace

Variable renormalize_rows(const Variable& g) {
  MOELAB_CHECK(g.rank() == 2, "renormalize_rows", "g must be [T, k], got ", g.shape());
  return g / sum(g, 1, /*keepdim=*/true);  // [T, k] / [T, 1]
}

Variable switch_balance_loss(const Variable& probs, const Tensor& f, double coefficient) {
  MOELAB_CHECK(probs.rank() == 2, "switch_balance_loss", "probs must be [T, E], got ", probs.shape());
  const std::int64_t T = probs.size(0), E = probs.size(1);
  MOELAB_CHECK((f.rank() == 1 && f.size(0) == E) || (f.rank() == 2 && f.size(1) == E && f.size(0) >= 1 && T % f.size(0) == 0),
               "switch_balance_loss", "f must be [", E, "] or [B, ", E, "] with B dividing ", T, ", got ", f.shape());
  const double scale = coefficient * static_cast<double>(E);
  if (f.rank() == 1) return sum(mean(probs, 0) * Variable(f)) * scale;  // [E] . [E]
  const std::int64_t B = f.size(0);
  const Variable P = mean(reshape(probs, {B, T / B, E}), 1);  // [B, E]
  return mean(sum(P * Variable(f), 1)) * scale;
}

Tensor BalanceCounts::add(const Tensor& f, std::int64_t decisions) {
  MOELAB_CHECK(f.rank() == 1 && decisions >= 1, "BalanceCounts", "f must be [E] and decisions >= 1, got ", f.shape(),
               " and ", decisions);
  const Tensor counts = kernels::mul(f, static_cast<double>(decisions));  // [E]
  if (counts_.defined())
    MOELAB_CHECK(counts_.shape() == f.shape() && counts_.device() == f.device() && counts_.dtype() == f.dtype(),
                 "BalanceCounts", "f is ", f.dtype(), " ", f.shape(), " on ", f.device(), " but the counts so far are ",
                 counts_.dtype(), " ", counts_.shape(), " on ", counts_.device());
  counts_ = counts_.defined() ? kernels::add(counts_, counts) : counts;
  decisions_ += static_cast<double>(decisions);
  ++micro_batches_;
  return kernels::div(counts_, decisions_);
}

void BalanceCounts::reset() {
  counts_ = Tensor();
  decisions_ = 0.0;
  micro_batches_ = 0;
}

Tensor choice_shares(const Tensor& chosen, std::int64_t experts, std::int64_t sequences, DType dtype) {
  MOELAB_CHECK(chosen.rank() == 2 && sequences >= 1 && chosen.size(0) % sequences == 0, "choice_shares",
               "chosen must be [T, k] with T divisible by ", sequences, " sequences, got ", chosen.shape());
  const std::int64_t T = chosen.size(0), k = chosen.size(1), S = T / sequences;
  const Tensor all_experts = arange(0.0, static_cast<double>(experts), 1.0, dtype, chosen.device());  // [E]
  const Tensor hits = kernels::eq(kernels::cast(chosen, dtype).reshape({sequences, S * k, 1}), all_experts);
  return kernels::div(kernels::sum(hits, 1), static_cast<double>(S * k));  // [B, E]
}

Variable repeat_column(const Variable& col, std::int64_t k) {
  MOELAB_CHECK(col.rank() == 2 && col.size(1) == 1 && k >= 1, "repeat_column", "col must be [T, 1] and k >= 1, got ",
               col.shape(), " and k ", k);
  return col * Variable(ones({1, k}, col.dtype(), col.device()));  // [T, 1] * [1, k] -> [T, k]
}

Tensor repeat_column(const Tensor& col, std::int64_t k) {
  MOELAB_CHECK(col.rank() == 2 && col.size(1) == 1 && k >= 1, "repeat_column", "col must be [T, 1] and k >= 1, got ",
               col.shape(), " and k ", k);
  return kernels::mul(col, ones({1, k}, col.dtype(), col.device()));
}

Tensor positive_mask(const Tensor& x) {
  // min(max(x * 1e300, 0), 1) in float64: any x >= 1e-300 saturates to 1, x <= 0 gives 0.
  const Tensor f = x.dtype() == DType::Float64 ? x : kernels::cast(x, DType::Float64);
  const Tensor m = kernels::minimum(kernels::maximum(kernels::mul(f, 1e300), 0.0), 1.0);
  const DType out = x.dtype() == DType::Int32 ? DType::Float64 : x.dtype();
  return out == DType::Float64 ? m : kernels::cast(m, out);
}

Tensor slot_mask(const Tensor& ids, DType dtype) {
  MOELAB_CHECK(ids.dtype() == DType::Int32, "slot_mask", "ids must be int32, got ", ids.dtype());
  // ids + 1 > 0  <=>  ids >= 0
  const Tensor m = positive_mask(kernels::add(as_f64(ids), 1.0));
  return dtype == DType::Float64 ? m : kernels::cast(m, dtype);
}

Tensor select_ids(const Tensor& ids, const Tensor& keep, std::int32_t sentinel) {
  MOELAB_CHECK(ids.dtype() == DType::Int32 && keep.shape() == ids.shape(), "select_ids",
               "ids must be int32 and keep the same shape, got ids ", ids.dtype(), " ", ids.shape(), " and keep ",
               keep.shape());
  // (ids - s) * keep + s
  const double s = static_cast<double>(sentinel);
  const Tensor k = kernels::cast(keep, DType::Float64);
  const Tensor out = kernels::add(kernels::mul(kernels::sub(as_f64(ids), s), k), s);
  return kernels::cast(out, DType::Int32);
}

Tensor ids_for_grouping(const Tensor& ids) {
  MOELAB_CHECK(ids.dtype() == DType::Int32, "ids_for_grouping", "ids must be int32, got ", ids.dtype());
  return kernels::cast(kernels::maximum(as_f64(ids), -1.0), DType::Int32);
}

Tensor exclusive_prefix_sums(const Tensor& v) {
  MOELAB_CHECK(v.rank() == 2 && v.dtype() != DType::Int32, "exclusive_prefix_sums", "v must be a float [T, k], got ",
               v.dtype(), " ", v.shape());
  // U[i, j] = [j - i > 0], made on v's device from two aranges (nothing uploaded). [k, k]
  const std::int64_t k = v.size(1);
  const Tensor idx = arange(0.0, static_cast<double>(k), 1.0, v.dtype(), v.device());
  const Tensor u = positive_mask(kernels::sub(idx.reshape({1, k}), idx.reshape({k, 1})));
  return kernels::matmul(v, u);  // [T, k] @ [k, k]
}

// ---------------------------------------------------------------- router replay
Tensor checked_replay_ids(const Tensor& ids, std::int64_t k, std::int64_t experts, const char* scheme) {
  MOELAB_CHECK(ids.defined() && ids.dtype() == DType::Int32 && ids.rank() == 2 && ids.size(1) == k, scheme,
               "replay needs the int32 [T, ", k, "] experts of a plan, got ",
               ids.defined() ? ids.str() : std::string("an undefined tensor"));
  const std::vector<std::int32_t> host = ids.to(Device::cpu()).to_vector<std::int32_t>();
  for (std::size_t a = 0; a < host.size(); ++a) {
    MOELAB_CHECK(host[a] >= 0 && host[a] < experts, scheme, "replay: assignment ", a, " has expert ", host[a],
                 ", outside [0, ", experts, ") (record a plan's `selected`, the choice before any drop)");
    for (std::size_t j = a - a % static_cast<std::size_t>(k); j < a; ++j)
      MOELAB_CHECK(host[j] != host[a], scheme, "replay: token ", a / static_cast<std::size_t>(k), " has expert ",
                   host[a], " twice");
  }
  return ids;
}

// ---------------------------------------------------------------- host helpers for metrics
std::vector<double> host_doubles(const Tensor& t) { return t.to(Device::cpu()).to(DType::Float64).to_vector<double>(); }

std::map<std::string, double> load_metrics(const std::vector<double>& counts) {
  const double n = static_cast<double>(counts.size());
  double total = 0, top = 0;
  for (double c : counts) total += c, top = std::max(top, c);
  const double mean = counts.empty() ? 0.0 : total / n;
  double var = 0;
  for (double c : counts) var += (c - mean) * (c - mean) / n;
  return {{"load_max_over_mean", mean > 0 ? top / mean : 0.0},
          {"load_cv", mean > 0 ? std::sqrt(var) / mean : 0.0},
          {"max_violation", max_violation(counts)}};
}

double mean_entropy(const std::vector<double>& p, std::int64_t T, std::int64_t E) {
  double entropy = 0.0;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t e = 0; e < E; ++e) {
      const double pe = p[static_cast<std::size_t>(t * E + e)];
      if (pe > 0.0) entropy -= pe * std::log(pe);
    }
  return entropy / static_cast<double>(T);
}

const char* capacity_order_name(CapacityOrder order) {
  switch (order) {
    case CapacityOrder::Tokens: return "tokens";
    case CapacityOrder::Choices: return "choices";
    case CapacityOrder::Probability: return "probability";
  }
  return "?";
}

namespace {

struct CapacityDrop {
  Tensor kept;    // int32 [T, k]: grouping ids with -1 where the capacity dropped
  Tensor wanted;  // int32 [E]: assignments per expert before the capacity
};

// Each expert keeps its first `capacity` assignments in `order` (Choices or Probability), by
// running the counting sort on the assignments laid out in that order and putting the result back
// in [T, k]. ids: int32 [T, k] with -1 for dropped (group_by_expert's input); scores: [T, k].
CapacityDrop drop_in_order(const Tensor& ids, std::int64_t E, std::int64_t capacity, CapacityOrder order,
                           const Tensor& scores) {
  const std::int64_t T = ids.size(0), k = ids.size(1), N = T * k;
  if (order == CapacityOrder::Choices) {
    // [k, T]: row j holds every token's j-th choice, so all first choices come before any second.
    const kernels::ExpertGroups g = kernels::group_by_expert(kernels::transpose(ids, 0, 1), E, capacity);
    return {kernels::transpose(g.kept, 0, 1), g.wanted};
  }
  // Probability: the assignments sorted by decreasing score (topk over all N: ties to the lower
  // index, i.e. token order), grouped in that order, then scattered back to their places.
  const Tensor by_score = kernels::topk(kernels::cast(scores, DType::Float64).reshape({1, N}), static_cast<int>(N))
                              .indices.reshape({N});                                  // int32 [N]
  const Tensor sorted_ids = kernels::index_select(ids.reshape({N, 1}), by_score);     // [N, 1]
  const kernels::ExpertGroups g = kernels::group_by_expert(sorted_ids, E, capacity);  // kept: [N, 1]
  const Tensor back = kernels::scatter_add_rows(as_f64(g.kept), by_score, N);         // each row once: exact
  return {kernels::cast(back, DType::Int32).reshape({T, k}), g.wanted};
}

}  // namespace

// ---------------------------------------------------------------- the plan
RoutingPlan make_routing_plan(const PlanParts& parts, std::int64_t E) {
  const char* op = "make_routing_plan";
  check_defined(parts.chosen, op, "chosen");
  MOELAB_CHECK(parts.chosen.dtype() == DType::Int32 && parts.chosen.rank() == 2, op,
               "chosen must be int32 [T, k], got ", parts.chosen.dtype(), " ", parts.chosen.shape());
  const std::int64_t T = parts.chosen.size(0), k = parts.chosen.size(1);
  MOELAB_CHECK(parts.gates.defined() && parts.gates.shape() == parts.chosen.shape(), op, "gates must be [", T, ", ", k,
               "] like chosen, got ", parts.gates.defined() ? parts.gates.shape().str() : std::string("undefined"));
  MOELAB_CHECK(!parts.keep.defined() || parts.keep.shape() == parts.chosen.shape(), op, "keep must be [", T, ", ", k,
               "] like chosen, got ", parts.keep.shape());
  MOELAB_CHECK(!parts.probs.defined() || (parts.probs.rank() == 2 && parts.probs.size(0) == T &&
                                          parts.probs.size(1) == E),
               op, "probs must be [", T, ", ", E, "], got ", parts.probs.shape());
  MOELAB_CHECK(E >= 1, op, "experts must be >= 1, got ", E);
  MOELAB_CHECK(!parts.capacity_scores.defined() || parts.capacity_scores.shape() == parts.chosen.shape(), op,
               "capacity_scores must be [", T, ", ", k, "] like chosen, got ", parts.capacity_scores.shape());

  // Scheme drops first (keep = 0 -> kDroppedSlot, but an unused slot stays unused), then the
  // capacity in token order on the device.
  Tensor ids = parts.chosen;
  if (parts.keep.defined()) {
    // drop = (1 - keep) * [id >= 0]; ids := ids where drop is 0, -1 where it is 1
    const Tensor not_kept = kernels::sub(1.0, kernels::cast(parts.keep, DType::Float64));
    const Tensor drop = kernels::mul(not_kept, slot_mask(ids, DType::Float64));
    ids = select_ids(ids, kernels::sub(1.0, drop), kDroppedSlot);
  }
  std::int64_t capacity = parts.capacity;
  Tensor wanted;  // the counts before the capacity, when it was applied in another order than tokens
  if (capacity >= 0 && parts.capacity_order != CapacityOrder::Tokens) {
    const Tensor grouping = parts.variable_slots ? ids_for_grouping(ids) : ids;
    const CapacityDrop c = drop_in_order(grouping, E, capacity, parts.capacity_order,
                                         parts.capacity_scores.defined() ? parts.capacity_scores : parts.gates.data());
    // drop = [id >= 0] * [kept < 0]: unused slots stay unused, earlier drops stay dropped
    const Tensor drop = kernels::mul(slot_mask(ids, DType::Float64),
                                        kernels::sub(1.0, slot_mask(c.kept, DType::Float64)));
    ids = select_ids(ids, kernels::sub(1.0, drop), kDroppedSlot);
    wanted = c.wanted;
    capacity = -1;  // applied: the grouping below only sorts
  }
  kernels::ExpertGroups groups =
      kernels::group_by_expert(parts.variable_slots ? ids_for_grouping(ids) : ids, E, capacity);
  if (wanted.defined()) groups.wanted = wanted;

  RoutingPlan plan;
  plan.selected = parts.chosen;  // before any drop: what a replay gives back
  plan.groups = std::make_shared<const kernels::ExpertGroups>(groups);
  plan.tokens_per_expert = counts_from_offsets(groups.offsets);
  if (parts.variable_slots) {
    // unused = [ids == -2] = [-1 - ids > 0]; experts = kept - unused puts -2 back in those slots
    const Tensor unused = positive_mask(kernels::sub(-1.0, as_f64(ids)));  // [T, k]
    plan.experts = kernels::cast(kernels::sub(as_f64(groups.kept), unused), DType::Int32);
    plan.slots = kernels::cast(kernels::sub(static_cast<double>(k), kernels::sum(unused, 1)), DType::Int32);  // [T]
  } else {
    plan.experts = groups.kept;
  }
  // Gates are 0 in every sentinel slot: a product with the constant 0/1 mask of kept ids (skipped
  // when nothing can have been dropped or left unused, so that plain top-k stays one op shorter).
  const bool may_zero = parts.keep.defined() || parts.capacity >= 0 || parts.variable_slots;
  plan.gates = may_zero ? parts.gates * Variable(slot_mask(groups.kept, parts.gates.dtype())) : parts.gates;
  if (parts.renormalize_kept) {
    // g / sum of the row's kept g; a row with nothing kept divides its zeros by 1.
    const Variable row_sum = sum(plan.gates, 1, /*keepdim=*/true);  // [T, 1]
    const Tensor empty_row = kernels::sub(1.0, positive_mask(row_sum.data()));
    plan.gates = plan.gates / (row_sum + Variable(kernels::cast(empty_row, plan.gates.dtype())));
  }
  if (parts.max_kept >= 0)
    plan.max_kept = std::min(parts.max_kept, T * k);
  else if (parts.capacity >= 0)
    plan.max_kept = std::min(T * k, E * parts.capacity);

  plan.metrics = [experts = plan.experts, counts = plan.tokens_per_expert, probs = parts.probs, extra = parts.extra,
                  capacity = parts.capacity, variable = parts.variable_slots, T, k, E]() {
    const std::vector<std::int32_t> h = experts.to(Device::cpu()).to_vector<std::int32_t>();
    const double dropped = static_cast<double>(std::count(h.begin(), h.end(), kDroppedSlot));
    const double unused = static_cast<double>(std::count(h.begin(), h.end(), kUnusedSlot));
    const double used = static_cast<double>(T * k) - unused;
    std::map<std::string, double> m = load_metrics(host_doubles(counts));
    m["dropped_fraction"] = used > 0 ? dropped / used : 0.0;
    if (probs.defined()) m["router_entropy"] = mean_entropy(host_doubles(probs), T, E);
    if (variable) m["mean_slots"] = used / static_cast<double>(T);
    if (capacity >= 0) m["capacity"] = static_cast<double>(capacity);
    if (extra)
      for (const auto& [name, value] : extra()) m[name] = value;
    return m;
  };
  return plan;
}

}  // namespace moelab
