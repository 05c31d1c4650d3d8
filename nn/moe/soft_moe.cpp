// nn/moe/soft_moe.cpp — routing logits, the two softmaxes, slot mixing, the kept experts' grouped
// GEMMs and the combine (see soft_moe.h for the math and the subset rules).
#include "nn/moe/soft_moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "autograd/no_grad.h"
#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "autograd/precision.h"
#include "core/factories.h"
#include "core/kernels.h"

namespace moelab {

PhiInit parse_phi_init(const std::string& name) {
  if (name == "uniform") return PhiInit::Uniform;
  if (name == "lecun_normal") return PhiInit::LecunNormal;
  fail("SoftMoE", "unknown phi_init '", name, "' (expected uniform or lecun_normal)");
}

SlotInputs parse_slot_inputs(const std::string& name) {
  if (name == "normalized") return SlotInputs::Normalized;
  if (name == "raw") return SlotInputs::Raw;
  fail("SoftMoE", "unknown slot_inputs '", name, "' (expected normalized or raw)");
}

ExpertOrder parse_expert_order(const std::string& name) {
  if (name == "auto") return ExpertOrder::Auto;
  if (name == "slots") return ExpertOrder::Slots;
  if (name == "tokens") return ExpertOrder::Tokens;
  fail("SoftMoE", "unknown expert_order '", name, "' (expected auto, slots or tokens)");
}

SoftMoE::SoftMoE(const SoftMoEConfig& config, Generator& gen) : config_(config) {
  const std::int64_t d = config.d, n = config.experts, p = config.slots_per_expert;
  MOELAB_CHECK(d >= 1 && n >= 1 && p >= 1 && config.hidden >= 0, "SoftMoE",
               "d, experts and slots_per_expert must be >= 1 and hidden >= 0, got d ", d, ", experts ", n,
               ", slots_per_expert ", p, ", hidden ", config.hidden);
  MOELAB_CHECK(config.dtype != DType::Int32, "SoftMoE", "needs a float dtype, got ", config.dtype);
  const Shape phi_shape{d, n * p};
  phi_ = register_parameter("phi", config.phi_init == PhiInit::Uniform
                                       ? uniform(phi_shape, -1.0, 1.0, gen, config.dtype)
                                       : normal(phi_shape, 0.0, 1.0 / std::sqrt(static_cast<double>(d)), gen,
                                                config.dtype));
  if (config.normalize) scale_ = register_parameter("scale", ones({1}, config.dtype));
  experts_ = register_module("experts", std::make_shared<ExpertBank>(n, d, config.hidden_width(), gen,
                                                                      config.bias, config.dtype, config.activation));
}

namespace {

// v: [..., k, ...] -> its l2 norm along axis. The sum of squares is clamped at a tiny positive
// floor before the square root, so a zero vector gets norm ~1e-15 (float32) or 1e-150 (float64)
// and a zero gradient (maximum sends it to the constant) instead of sqrt'(0) = inf -> NaN.
Variable l2_norm(const Variable& v, int axis, bool keepdim) {
  const double floor = v.dtype() == DType::Float64 ? 1e-300 : 1e-30;
  const Variable floor_v(full({1}, floor, v.dtype(), v.device()));
  return sqrt(maximum(sum(square(v), axis, keepdim), floor_v));
}

constexpr double kNormEps = 1e-6;  // x / (||x|| + eps), as the reference code

}  // namespace

void SoftMoE::check_input(const Variable& x) const {
  check_defined(x.data(), "SoftMoE", "x");
  MOELAB_CHECK(x.rank() == 3 && x.size(2) == config_.d && x.size(0) >= 1 && x.size(1) >= 1, "SoftMoE",
               "x must be [B, m, ", config_.d, "] with B, m >= 1, got ", x.shape());
  MOELAB_CHECK(x.dtype() == phi_.dtype(), "SoftMoE", "x is ", x.dtype(), " but the parameters are ", phi_.dtype());
}

// x: [B, m, d] -> the tokens the logits see: X_hat = X / (||X|| + eps) per token with normalize,
// else x itself.
Variable SoftMoE::routed_tokens(const Variable& x) const {
  if (!config_.normalize) return x;
  const std::int64_t B = x.size(0), m = x.size(1), d = config_.d;
  const Variable xf = reshape(x, {B * m, d});                                           // [B*m, d]
  // [B*m, d] / [B*m, 1] broadcasts each token's norm along its row.
  const Variable norms = l2_norm(xf, 1, /*keepdim=*/true) + kNormEps;                  // [B*m, 1]
  return reshape(xf / norms, {B, m, d});                                               // [B, m, d]
}

// x_tokens: [B, m, d], what routed_tokens gave -> L, D, C: [B, m, S]
SoftMoERouting SoftMoE::routing_of(const Variable& x_tokens) const {
  const std::int64_t B = x_tokens.size(0), m = x_tokens.size(1), d = config_.d, S = config_.slots();
  Variable w = phi_;
  // phi_hat = phi / (||phi_col|| + eps): [d, S] / [S] broadcasts over the leading axis.
  if (config_.normalize) w = (phi_ / (l2_norm(phi_, 0, /*keepdim=*/false) + kNormEps)) * scale_;  // [d, S]
  SoftMoERouting r;
  PrecisionScope fp32(Precision::Float32);  // slot scores stay float32 under any policy (autograd/precision.h)
  r.logits = reshape(matmul(reshape(x_tokens, {B * m, d}), w), {B, m, S});             // [B, m, S]
  r.combine = softmax(r.logits);                                                         // over slots
  r.dispatch = softmax(r.logits, 1);                                                     // over tokens
  return r;
}

// x: [B, m, d] -> L, D, C: [B, m, S]
SoftMoERouting SoftMoE::routing(const Variable& x) const {
  check_input(x);
  return routing_of(routed_tokens(x));
}

namespace {

// C: [B, m, S] -> float64 [B, n] on the host, score[b, e] = sum_i sum_j C[b, i, e*p + j].
Tensor scores_from_combine(const Tensor& combine, std::int64_t n, std::int64_t p) {
  const std::int64_t B = combine.size(0), m = combine.size(1), S = n * p;
  const std::vector<double> c = combine.to(Device::cpu()).to(DType::Float64).to_vector<double>();
  std::vector<double> scores(static_cast<std::size_t>(B * n), 0.0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t e = 0; e < n; ++e)
        for (std::int64_t j = 0; j < p; ++j)
          scores[static_cast<std::size_t>(b * n + e)] += c[static_cast<std::size_t>((b * m + i) * S + e * p + j)];
  return from_vector(scores, {B, n});
}

}  // namespace

Tensor SoftMoE::expert_scores(const Variable& x) const {
  NoGradGuard no_grad;
  return scores_from_combine(routing(x).combine.data(), config_.experts, config_.slots_per_expert);
}

// -> int32 keep mask, row-major [B, n]
std::vector<std::int32_t> SoftMoE::choose(const ExpertSubset& subset, const Variable& x,
                                          const Variable& combine) const {
  const std::int64_t B = x.size(0), n = config_.experts;
  std::vector<std::int32_t> keep(static_cast<std::size_t>(B * n), 0);
  using Kind = ExpertSubset::Kind;
  if (subset.kind == Kind::TopK || subset.kind == Kind::Random)
    MOELAB_CHECK(subset.k >= 1 && subset.k <= n, "SoftMoE", "a ", subset.kind == Kind::TopK ? "top-k" : "random",
                 " subset needs k in [1, ", n, "], got ", subset.k);
  switch (subset.kind) {
    case Kind::All:
      std::fill(keep.begin(), keep.end(), 1);
      break;
    case Kind::TopK: {
      // Algorithm 1; kernels::topk puts equal scores' lower expert id first.
      const Tensor scores = scores_from_combine(combine.data(), n, config_.slots_per_expert);
      const std::vector<std::int32_t> top =
          kernels::topk(scores, static_cast<int>(subset.k)).indices.to_vector<std::int32_t>();
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t j = 0; j < subset.k; ++j)
          keep[static_cast<std::size_t>(b * n + top[static_cast<std::size_t>(b * subset.k + j)])] = 1;
      break;
    }
    case Kind::Random: {
      MOELAB_CHECK(subset.gen != nullptr, "SoftMoE", "a random subset needs a Generator");
      // Per example, a partial Fisher-Yates shuffle: k draws without replacement.
      std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
      for (std::int64_t b = 0; b < B; ++b) {
        std::iota(ids.begin(), ids.end(), 0);
        for (std::int64_t i = 0; i < subset.k; ++i) {
          const std::int64_t j = i + subset.gen->next_below(static_cast<std::uint32_t>(n - i));
          std::swap(ids[static_cast<std::size_t>(i)], ids[static_cast<std::size_t>(j)]);
          keep[static_cast<std::size_t>(b * n + ids[static_cast<std::size_t>(i)])] = 1;
        }
      }
      break;
    }
    case Kind::Mask: {
      const Tensor& mask = subset.mask;
      MOELAB_CHECK(mask.defined() && mask.dtype() == DType::Int32 &&
                       (mask.shape() == Shape{B, n} || mask.shape() == Shape{n}),
                   "SoftMoE", "a mask subset needs an int32 mask [", B, ", ", n, "] or [", n, "], got ",
                   mask.defined() ? mask.str() : std::string("an undefined tensor"));
      const std::vector<std::int32_t> v = mask.to(Device::cpu()).to_vector<std::int32_t>();
      for (std::size_t i = 0; i < keep.size(); ++i) {
        const std::int32_t value = v[mask.rank() == 1 ? i % static_cast<std::size_t>(n) : i];
        MOELAB_CHECK(value == 0 || value == 1, "SoftMoE", "mask values must be 0 or 1, got ", value);
        keep[i] = value;
      }
      break;
    }
  }
  return keep;
}

// xs: [S, B, d] (expert-major slots) -> ys: [S, B, d]; the rows of dropped (example, expert)
// pairs stay 0.
Variable SoftMoE::run_experts(const Variable& xs, const std::vector<std::int32_t>& keep) {
  const std::int64_t B = xs.size(1), n = config_.experts, p = config_.slots_per_expert, S = n * p, d = config_.d;
  if (std::all_of(keep.begin(), keep.end(), [](std::int32_t v) { return v != 0; })) {
    // Every expert on every example (training, and the full model at evaluation): each expert
    // takes its p*B slot rows, contiguous in [S, B, d] = [n, p*B, d]: two batched products
    // (ExpertBank::forward_each), no permute. Nothing depends on data: no sort, no upload.
    last_computed_ = B * S;
    return reshape(experts_->forward_each(reshape(xs, {n, p * B, d})), {S, B, d});
  }
  // A subset (evaluation: Algorithm 1, random subsets, masks), chosen on the host. Kept slot rows
  // of xs viewed as [S*B, d] (row (e*p + j)*B + b), grouped by expert: expert 0's slots of every
  // kept example (example order, then slot order), then expert 1's, ...; offsets from the
  // per-expert counts.
  std::vector<std::int32_t> rows, offsets(static_cast<std::size_t>(n + 1), 0);
  for (std::int64_t e = 0; e < n; ++e) {
    for (std::int64_t b = 0; b < B; ++b) {
      if (!keep[static_cast<std::size_t>(b * n + e)]) continue;
      for (std::int64_t j = 0; j < p; ++j) rows.push_back(static_cast<std::int32_t>((e * p + j) * B + b));
    }
    offsets[static_cast<std::size_t>(e + 1)] = static_cast<std::int32_t>(rows.size());
  }
  const std::int64_t M = static_cast<std::int64_t>(rows.size());
  last_computed_ = M;
  if (M == 0) return Variable(zeros({S, B, d}, xs.dtype(), xs.device()));  // every expert dropped
  const Tensor rows_t = from_vector(rows, {M}).to(xs.device());
  const Tensor offsets_t = from_vector(offsets, {n + 1}).to(xs.device());
  const Variable ys_kept = experts_->forward(index_select(reshape(xs, {S * B, d}), rows_t), offsets_t);  // [M, d]
  // Each kept row is written once into zeros (0 + y == y exactly); dropped rows stay 0.
  return reshape(scatter_add_rows(ys_kept, rows_t, S * B), {S, B, d});
}

bool SoftMoE::token_order(std::int64_t m) const {
  switch (config_.expert_order) {
    case ExpertOrder::Slots: return false;
    case ExpertOrder::Tokens: return true;
    case ExpertOrder::Auto: break;
  }
  // Narrow experts (f < 16) and few tokens per slot (m <= 4p, so token order does at most 4x the
  // slot order's expert FLOPs): the rule and its measurements are in the header.
  return config_.hidden_width() < 16 && m <= 4 * config_.slots_per_expert;
}

Variable SoftMoE::forward(const Variable& x) { return forward(x, ExpertSubset::all()); }

// x: [B, m, d] -> [B, m, d]
Variable SoftMoE::forward(const Variable& x, const ExpertSubset& subset) {
  check_input(x);
  const Variable x_hat = routed_tokens(x);  // X_hat with normalize, else x
  const SoftMoERouting r = routing_of(x_hat);
  const std::vector<std::int32_t> keep = choose(subset, x, r.combine);
  // The slots mix X_hat (the implicit-bias paper's layer) or X (the original Soft MoE's; see the header).
  const Variable& mixed = config_.slot_inputs == SlotInputs::Normalized ? x_hat : x;
  last_mask_ = from_vector(keep, {x.size(0), config_.experts});
  const std::int64_t B = x.size(0), m = x.size(1), n = config_.experts, p = config_.slots_per_expert;
  if (token_order(m) && std::all_of(keep.begin(), keep.end(), [](std::int32_t v) { return v != 0; })) {
    // Every expert kept, in token order: no [B, S, d] tensor (see the header).
    last_computed_ = B * n * p;
    return experts_->forward_mixed(mixed, reshape(r.dispatch, {B, m, n, p}), reshape(r.combine, {B, m, n, p}));
  }
  // Slot order, the slots expert-major: Xs = D^T X as [S, B, d], Y = C Ys from Ys [S, B, d].
  const Variable xs = slot_dispatch(r.dispatch, mixed);  // [B, m, S], [B, m, d] -> [S, B, d]
  const Variable ys = run_experts(xs, keep);             // [S, B, d]
  return slot_combine(r.combine, ys);                    // [B, m, S], [S, B, d] -> [B, m, d]
}

}  // namespace moelab
