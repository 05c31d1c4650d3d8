// nn/moe/soft_moe.h — Soft MoE (Puigcerver et al., "From Sparse to Soft Mixtures of Experts",
// 2023), with evaluation on a chosen subset of experts (Algorithm 1 of Chung, Malik, Schneider,
// Li and Singh, "Beyond Parameter Count: Implicit Bias in Soft Mixture of Experts", 2024).
//
// A routed MoE sends each token to k experts. Soft MoE instead gives every expert p "slots"; each
// slot sees a convex combination of ALL the tokens of one example, and each token's output is a
// convex combination of ALL the slots' outputs. Nothing is discrete, so everything is
// differentiable and no token is dropped. Shapes, for B examples of m tokens of width d, n
// experts with p slots each (S = n*p slots, slot s = e*p + j belongs to expert e = s / p):
//
//   X     [B, m, d]       the input
//   phi   [d, S]          the only routing parameter: one d-vector per slot
//   L     [B, m, S]       logits  L = X @ phi                       (normalize = false)
//                                 L = X_hat @ (scale * phi_hat)     (normalize = true)
//   D     [B, m, S]       dispatch: softmax of L over the m TOKENS (axis 1); every column sums to 1
//   C     [B, m, S]       combine:  softmax of L over the S SLOTS  (axis 2); every row sums to 1
//   Xs    [B, S, d]       slot inputs  Xs = D^T X_hat  (normalize, slot_inputs = Normalized: the default)
//                                      Xs = D^T X      (normalize = false, or slot_inputs = Raw)
//                         (slot s = a weighted average of the tokens)
//   Ys    [B, S, d]       slot outputs Ys[b, s] = expert_{s/p}(Xs[b, s])   (a ReLU MLP d -> h -> d)
//   Y     [B, m, d]       output       Y = C Ys     (token i = a weighted average of the slots)
//
// Memory layout: Xs and Ys are stored expert-major, [S, B, d] (slot s of every example, then slot
// s + 1), by the slot_dispatch / slot_combine ops (autograd/ops_slot_mix.h), so that expert e's
// p*B rows are contiguous and the experts run as one batched product without a permute.
//
// Two summation orders for the experts (expert_order). The layer above is written in slot order:
// form Xs, run each expert on its slots, form Ys, mix. With p = 1 for brevity (slot e is expert e,
// h_e the hidden width f), the same function is
//   hidden  H[b, e]  = relu(sum_i D[b, i, e] (X[b, i] @ W_in[e]))     (= relu(Xs[b, e] @ W_in[e]))
//   output  Y[b, i]  = sum_e (C[b, i, e] H[b, e]) @ W_out[e]          (= sum_e C[b, i, e] Ys[b, e])
// since D^T and C are linear maps over tokens and slots and the experts' layers are linear maps
// over features, which commute (only the ReLU, applied per slot to the same H, does not move).
// Token order evaluates the right-hand sides: U = X @ [W_in[0] | ... | W_in[n-1]], one dense
// [B*m, d] @ [d, n*f] product; D mixes U's per-expert columns into H (a [B, n*f] tensor); C spreads
// H back per token into Z [B*m, n*f]; Y = Z @ [W_out[0]; ...; W_out[n-1]], one dense [B*m, n*f] @
// [n*f, d] product (ExpertBank::forward_mixed, the mixing in autograd/ops_slot_mix.h). No
// [B, S, d] tensor exists. The cost: each expert layer multiplies m token rows per example by all
// n experts instead of p slot rows by one expert each, m*f/(p*(f + m)) times the slot order's
// expert and mixing FLOPs (always below m/p; 2.4x for the MNIST n = 128, f = 6, m = 4); in
// exchange the products are two dense wide GEMMs instead of n narrow ones ([B*p, d] @ [d, f] with
// f = 6 fills a sixth of a 32-wide micro-kernel tile), and the [B, S, d] slot tensors (26 MB each
// at B = 256, n = 128, d = 196) are never written. Results agree to rounding (the sums run in
// another order), not bitwise.
// Which is faster depends on the shape. Measured on the MNIST model's training step (B = 256,
// m = 4, d = 196, f = floor(784 / n), one thread, median step, docs/results/bench.md): slot order
// wins at n = 16 and 32 (f = 49, 24: 5.4 against 9.3 ms, 7.1 against 9.0 ms), token order at
// n = 64 and 128 (f = 12, 6: 9.5 against 13.2 ms, 10.3 against 27.4 ms). Auto, the default, takes
// token order when f < 16 and m <= 4p, else slot order; Slots and Tokens force one (the tests
// compare them). Only the full layer (forward(x), or a subset that keeps every expert) has the
// choice: a proper subset always gathers its kept slots in slot order (below).
//
// Why D is over tokens and C over slots: a slot must receive a convex combination of tokens (so
// its input stays on the scale of one token whatever m is), which needs weights that sum to 1 over
// the tokens, i.e. a softmax down each column of L. A token must receive a convex combination of
// slot outputs, which needs weights that sum to 1 over the slots, i.e. a softmax along each row of
// the same L. One set of logits, two softmaxes.
//
// Normalisation (normalize = true, the papers' setting, and the default here): per token
// X_hat = X / (||X||_2 + 1e-6); per column phi_hat = phi / (||phi_col||_2 + 1e-6); a learnable
// scalar "scale" (shape [1], initialised to 1) multiplies phi_hat. The logits are then cosine
// similarities times scale, bounded by |scale| whatever the size of d or of the inputs (without
// it, large d or large inputs saturate both softmaxes). The squared norm is clamped at a tiny
// positive value before the square root, so an all-zero token (a blank image patch) gets a zero
// gradient instead of NaN; the value is unchanged for any norm above ~1e-15.
//
// What the slots mix when normalize is on (slot_inputs). The two papers' code differs here:
//   Normalized (the default)  Xs = D^T X_hat: the normalised tokens, for the logits AND the slots.
//              The implicit-bias paper's text ("one may normalize the input X before passing it
//              to the Soft MoE") and its released MNIST code (normalize_moe_input=True, which
//              l2-normalises the tokens before the layer) do this. The layer is then scale-
//              invariant: f(c X) = f(X) for c > 0 (up to the 1e-6), since X_hat, D and C do not
//              change. Both Soft MoE experiments (tasks/softmoe_mnist, tasks/softmoe_l2norm with
//              normalize) use it by default, as they reproduce that paper.
//   Raw        Xs = D^T X: the original Soft MoE's code (Puigcerver et al.'s JAX layer) normalises
//              only inside the logits; the slots mix the raw tokens, so with positively homogeneous
//              experts (bias-free ReLU MLPs) f(c X) = c f(X). Kept for that paper's layer.
// Without normalize there is no X_hat and slot_inputs changes nothing: Xs = D^T X.
//
// phi's initial values (phi_init): Uniform in [-1, 1) (the default; the implicit-bias paper's
// MNIST code) or LecunNormal, normal with std 1/sqrt(d) (the Soft MoE paper's JAX code, which
// truncates it; we do not). With normalize = true only phi's directions matter at the start;
// without it prefer LecunNormal, whose logits start at the scale of a Linear layer's.
//
// Evaluating with a subset of the experts (ExpertSubset). Zeroing expert e's rows of Ys removes
// it from every token's output; C and D are NOT renormalised (the paper and its code do not):
//   All        every expert (the same as forward(x))
//   TopK(k)    Algorithm 1: per example, score_e = sum over the m tokens and over expert e's p
//              slots of C; keep the k experts with the largest scores (ties to the lower id)
//   Random(k)  per example, k experts drawn uniformly without replacement from a Generator the
//              caller owns (examples in order; the same seed gives the same subsets)
//   Mask(m)    an explicit int32 mask of 0/1, [B, n] (per example) or [n] (the same for all)
// "Only the kept experts are computed": the slot rows of the kept (example, expert) pairs are
// gathered (index_select) grouped by expert (all kept slots of expert 0 across the batch, then
// expert 1, ...), the ExpertBank runs its two grouped GEMMs on those rows only, with offsets from
// the kept counts, and scatter_add_rows puts each result back into a [S*B, d] tensor of zeros. A
// dropped expert's weights are never read for that example, and an expert dropped for every
// example is not multiplied at all. (Xs is still computed for all slots: it is the cheap part.)
// The full forward is the same path with every expert kept, so TopK(n) and Mask(all ones) equal
// forward(x) bitwise. Every step is an autograd op, so training through a subset also works.
//
// Parameters, in registration (= initialisation) order: "phi" [d, S], "scale" [1] (normalize
// only), then the child "experts" (nn/moe/expert_bank.h): "experts.w_in" [n, d, h],
// "experts.w_out" [n, h, d] (+ "experts.b_in", "experts.b_out" with bias = true).
//
//   SoftMoEConfig c{.d = 196, .experts = 16, .hidden = 196 * 4 / 16};   // the MNIST setup
//   SoftMoE moe(c, gen);                                         // slots mix X_hat (the implicit-bias paper's)
//   c.slot_inputs = parse_slot_inputs("raw");                    // the original Soft MoE's layer: slots mix X
//   Variable y = moe.forward(x);                                 // x: [B, 4, 196] -> [B, 4, 196]
//   Variable y4 = moe.forward(x, ExpertSubset::top_k(4));        // Algorithm 1 with k = 4
//   Tensor kept = moe.last_mask();                               // int32 [B, 16], four 1s a row
//   Generator draw(7);
//   Variable yr = moe.forward(x, ExpertSubset::random(4, draw)); // the random baseline
//   Tensor scores = moe.expert_scores(x);                        // float64 [B, 16], no experts run
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/random.h"
#include "nn/module.h"
#include "nn/moe/expert_bank.h"

namespace moelab {

enum class PhiInit { Uniform, LecunNormal };
// "uniform" or "lecun_normal" -> PhiInit; anything else throws moelab::Error.
PhiInit parse_phi_init(const std::string& name);

// What the slots mix when normalize is on (see above): the normalised tokens X_hat (the
// implicit-bias paper's code) or the raw tokens X (the original Soft MoE's code).
enum class SlotInputs { Normalized, Raw };
// "normalized" or "raw" -> SlotInputs; anything else throws moelab::Error.
SlotInputs parse_slot_inputs(const std::string& name);

// In which order the full layer (every expert kept) runs its experts (see "Two summation orders"
// above): Slots forms Xs and Ys, Tokens never does, Auto picks by shape (SoftMoE::token_order).
enum class ExpertOrder { Auto, Slots, Tokens };
// "auto", "slots" or "tokens" -> ExpertOrder; anything else throws moelab::Error.
ExpertOrder parse_expert_order(const std::string& name);

struct SoftMoEConfig {
  std::int64_t d = 0;                 // token width
  std::int64_t experts = 0;           // n
  std::int64_t slots_per_expert = 1;  // p
  std::int64_t hidden = 0;            // h, the experts' hidden width (0 means h = d)
  bool normalize = true;              // l2-normalised x and phi columns, learnable scale
  SlotInputs slot_inputs = SlotInputs::Normalized;  // with normalize: Xs = D^T X_hat, or D^T X (Raw)
  PhiInit phi_init = PhiInit::Uniform;
  bool bias = false;                  // expert biases b_in, b_out
  Activation activation = Activation::Relu;  // the experts' hidden activation (nn/activation.h)
  ExpertOrder expert_order = ExpertOrder::Auto;  // how forward(x) sums (not what it computes)
  DType dtype = DType::Float32;

  std::int64_t slots() const { return experts * slots_per_expert; }
  std::int64_t hidden_width() const { return hidden > 0 ? hidden : d; }
};

// Which experts a forward pass computes; build one with the factories below.
struct ExpertSubset {
  enum class Kind { All, TopK, Random, Mask };
  Kind kind = Kind::All;
  std::int64_t k = 0;          // TopK, Random: experts kept per example, 1 <= k <= n
  Generator* gen = nullptr;    // Random: the caller's generator (advanced by every call)
  Tensor mask;                 // Mask: int32 0/1, [B, n] or [n]

  static ExpertSubset all() { return {}; }
  static ExpertSubset top_k(std::int64_t k) { return {Kind::TopK, k, nullptr, Tensor()}; }
  static ExpertSubset random(std::int64_t k, Generator& gen) { return {Kind::Random, k, &gen, Tensor()}; }
  static ExpertSubset from_mask(Tensor mask) { return {Kind::Mask, 0, nullptr, std::move(mask)}; }
};

// The routing weights of one input, all [B, m, S] and differentiable.
struct SoftMoERouting {
  Variable logits;    // L
  Variable dispatch;  // D, softmax over tokens (axis 1)
  Variable combine;   // C, softmax over slots (axis 2)
};

class SoftMoE : public Module {
 public:
  // Draws phi first, then the experts (w_in, [b_in], w_out, [b_out]) from gen.
  SoftMoE(const SoftMoEConfig& config, Generator& gen);

  // x: [B, m, d] -> [B, m, d] with every expert.
  Variable forward(const Variable& x);
  // x: [B, m, d] -> [B, m, d] with only the subset's experts computed (the others' slot outputs
  // are 0). Records the kept experts in last_mask().
  Variable forward(const Variable& x, const ExpertSubset& subset);

  // x: [B, m, d] -> L, D, C (no experts run).
  SoftMoERouting routing(const Variable& x) const;
  // x: [B, m, d] -> float64 [B, n] on the host: Algorithm 1's scores, sum over tokens i and slots
  // j of C[b, i, e*p + j] (added in that order, in double). No graph is recorded.
  Tensor expert_scores(const Variable& x) const;

  // Of the last forward (undefined / 0 before the first):
  const Tensor& last_mask() const { return last_mask_; }                // int32 [B, n], 1 = kept
  std::int64_t last_computed_slots() const { return last_computed_; }  // slot rows the experts ran on

  // Whether the full layer on m tokens runs in token order (expert_order, or Auto's rule).
  bool token_order(std::int64_t m) const;
  // Changes how later forwards sum (not what they compute); bench/softmoe_order_bench.cpp
  // alternates the two orders on one layer.
  void set_expert_order(ExpertOrder order) { config_.expert_order = order; }

  const SoftMoEConfig& config() const { return config_; }
  ExpertBank& experts() const { return *experts_; }
  const Variable& phi() const { return phi_; }
  const Variable& scale() const { return scale_; }  // undefined without normalize

 private:
  void check_input(const Variable& x) const;
  // x: [B, m, d] -> X_hat (normalize) or x; X_hat: [B, m, d] -> L, D, C.
  Variable routed_tokens(const Variable& x) const;
  SoftMoERouting routing_of(const Variable& x_tokens) const;
  // The keep mask int32 [B * n] (row-major [B, n]) for a subset; combine is C.
  std::vector<std::int32_t> choose(const ExpertSubset& subset, const Variable& x, const Variable& combine) const;
  // xs: [S, B, d] -> ys: [S, B, d] (expert-major slots), running only the kept experts' slots.
  Variable run_experts(const Variable& xs, const std::vector<std::int32_t>& keep);

  SoftMoEConfig config_;
  Variable phi_, scale_;
  std::shared_ptr<ExpertBank> experts_;
  Tensor last_mask_;
  std::int64_t last_computed_ = 0;
};

}  // namespace moelab
