// examples/trace_gradients.h — the MoE gradients that examples/trace_step.cpp works out by hand:
// the router's weight gradient along each of its two paths (the gates, the load-balancing loss) and
// one expert's dW_in and dW_out, in plain loops over float64 host values, from the forward's
// tensors (MoEPieces, filled by trace_step's trace_moe) and the activations' gradients its probes
// read; each result printed x 1000 and set beside autograd's (trace_print.h's check_close).
// docs/TOUR.md, "Backward by hand", walks through the formulas.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/moe/expert_bank.h"
#include "trace_print.h"

namespace moelab::trace {

// The MoE layer's tensors that the router's and the experts' gradients are computed from by hand
// (trace_router_gradient, trace_expert_gradient): filled by trace_moe.
struct MoEPieces {
  Tensor x;                  // [T, d] the tokens the router scores
  Tensor probs;              // [T, E] softmax of the router's logits
  Tensor experts;            // [T, k] int32: the chosen experts
  Tensor gates;              // [T, k] the renormalised gates
  Tensor tokens_per_expert;  // [E] int32: assignments per expert (f_e = this / (T k))
  Tensor offsets;            // [E + 1] int32: expert e owns sorted rows [offsets[e], offsets[e + 1])
  Tensor xs, h;              // [T k, d], [T k, f]: the sorted rows and the experts' hidden layer
};

// dloss/dW_r, W_r: [E, d], along both paths that reach the router's logits:
//   the gates (cross-entropy): g_j = p_cj / S, S = sum_i p_ci, so dloss/dp_cj = (dg_j - sum_i dg_i g_i) / S
//     at the chosen experts (0 at the others: gather_last's backward scatters);
//   the load-balancing loss a E sum_e f_e P_e, P_e = mean_t p_te, f_e constant: dloss/dp_te = a E f_e / T;
// each then through the softmax (dl_te = p_te (dp_te - sum_e' p_te' dp_te')) and the product
// logits = x W_r^T (dW_r = dlogits^T x). Returns the sum of the two.
inline std::vector<double> trace_router_gradient(const MoEPieces& pieces, const Tensor& dgates, double a,
                                                 const Tensor& autograd_ce, const Tensor& autograd_aux,
                                                 const Tensor& autograd_total) {
  const std::vector<double> x = host(pieces.x), p = host(pieces.probs), g = host(pieces.gates), dg = host(dgates);
  const std::vector<std::int32_t> chosen = host_ints(pieces.experts), counts = host_ints(pieces.tokens_per_expert);
  const std::int64_t T = pieces.x.size(0), d = pieces.x.size(1), E = pieces.probs.size(1), k = pieces.gates.size(1);
  auto at = [](std::int64_t row, std::int64_t cols, std::int64_t col) {
    return static_cast<std::size_t>(row * cols + col);
  };
  auto softmax_backward = [&](const std::vector<double>& dp) {
    std::vector<double> dl(dp.size());
    for (std::int64_t t = 0; t < T; ++t) {
      double dot = 0.0;
      for (std::int64_t e = 0; e < E; ++e) dot += p[at(t, E, e)] * dp[at(t, E, e)];
      for (std::int64_t e = 0; e < E; ++e) dl[at(t, E, e)] = p[at(t, E, e)] * (dp[at(t, E, e)] - dot);
    }
    return dl;
  };
  auto weight_gradient = [&](const std::vector<double>& dl) {  // dlogits^T x: [E, d]
    std::vector<double> dw(static_cast<std::size_t>(E * d), 0.0);
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t e = 0; e < E; ++e)
        for (std::int64_t i = 0; i < d; ++i) dw[at(e, d, i)] += dl[at(t, E, e)] * x[at(t, d, i)];
    return dw;
  };

  std::vector<double> dp_gate(static_cast<std::size_t>(T * E), 0.0);
  for (std::int64_t t = 0; t < T; ++t) {
    double S = 0.0, dot = 0.0;
    for (std::int64_t j = 0; j < k; ++j) {
      S += p[at(t, E, chosen[at(t, k, j)])];
      dot += dg[at(t, k, j)] * g[at(t, k, j)];
    }
    for (std::int64_t j = 0; j < k; ++j) dp_gate[at(t, E, chosen[at(t, k, j)])] += (dg[at(t, k, j)] - dot) / S;
  }
  show("gates: dprobs", dp_gate, {T, E}, "(dg_j - sum_i dg_i g_i)/S at chosen, else 0", 8);
  const std::vector<double> dl_gate = softmax_backward(dp_gate);
  show("gates: dlogits", dl_gate, {T, E}, "p (dp - sum_e p_e dp_e): softmax backward", 8);
  const std::vector<double> dw_gate = weight_gradient(dl_gate);
  show("gates: dW_r", dw_gate, {E, d}, "dlogits^T x: from the cross-entropy alone");
  check_close("autograd's router gradient of the cross-entropy alone", dw_gate, autograd_ce);

  std::vector<double> f(static_cast<std::size_t>(E)), dp_aux(static_cast<std::size_t>(T * E));
  for (std::int64_t e = 0; e < E; ++e)
    f[static_cast<std::size_t>(e)] = counts[static_cast<std::size_t>(e)] / static_cast<double>(T * k);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t e = 0; e < E; ++e)
      dp_aux[at(t, E, e)] = a * static_cast<double>(E) * f[static_cast<std::size_t>(e)] / static_cast<double>(T);
  show("aux: f", f, {E}, "f_e = assignments_e / (T k), a constant (x 1)", 6, 1.0);
  show("aux: dprobs", dp_aux, {T, E}, "a E f_e / T, the same in every row", 8);
  const std::vector<double> dw_aux = weight_gradient(softmax_backward(dp_aux));
  show("aux: dW_r", dw_aux, {E, d}, "through the softmax and x: from the aux alone");
  check_close("autograd's router gradient of the aux loss alone", dw_aux, autograd_aux);

  std::vector<double> total(dw_gate.size());
  for (std::size_t i = 0; i < total.size(); ++i) total[i] = dw_gate[i] + dw_aux[i];
  show("router: dW_r", total, {E, d}, "the sum: AdamW's gradient of router.weight");
  check_close("autograd's router gradient of the whole loss", total, autograd_total);
  return total;
}

// One expert's weight gradients from its own rows (the busiest expert; the lowest id on a tie):
//   y_r = relu(xs_r W_in[e]) W_out[e] for the rows r of expert e, so
//   dW_out[e] = h_e^T dy_e,   dh_e = (dy_e W_out[e]^T) * (h_e > 0),   dW_in[e] = xs_e^T dh_e,
// dy being experts.y's gradient (its probe): the gate already in it, from the combine's backward.
inline void trace_expert_gradient(const MoEPieces& pieces, const ExpertBank& bank, const Tensor& dys,
                                  const Tensor& autograd_w_in, const Tensor& autograd_w_out) {
  const std::vector<std::int32_t> offsets = host_ints(pieces.offsets);
  const std::int64_t E = static_cast<std::int64_t>(offsets.size()) - 1, d = pieces.xs.size(1), f = pieces.h.size(1);
  std::int64_t e = 0;
  for (std::int64_t i = 1; i < E; ++i)
    if (offsets[i + 1] - offsets[i] > offsets[e + 1] - offsets[e]) e = i;
  const std::int64_t first = offsets[e], rows = offsets[e + 1] - offsets[e];
  const std::vector<double> xs = host(pieces.xs), h = host(pieces.h), dy = host(dys), w_out = host(bank.w_out().data());
  auto at = [](std::int64_t row, std::int64_t cols, std::int64_t col) {
    return static_cast<std::size_t>(row * cols + col);
  };
  std::printf("expert %lld: sorted rows %lld..%lld (%lld assignments)\n", static_cast<long long>(e),
              static_cast<long long>(first), static_cast<long long>(first + rows - 1), static_cast<long long>(rows));
  std::vector<double> dw_out(static_cast<std::size_t>(f * d), 0.0), dw_in(static_cast<std::size_t>(d * f), 0.0);
  for (std::int64_t r = first; r < first + rows; ++r) {
    for (std::int64_t j = 0; j < f; ++j)
      for (std::int64_t i = 0; i < d; ++i) dw_out[at(j, d, i)] += h[at(r, f, j)] * dy[at(r, d, i)];
    for (std::int64_t j = 0; j < f; ++j) {
      if (h[at(r, f, j)] <= 0.0) continue;  // relu's backward: no gradient where it output 0
      double dh = 0.0;
      for (std::int64_t i = 0; i < d; ++i) dh += dy[at(r, d, i)] * w_out[static_cast<std::size_t>((e * f + j) * d + i)];
      for (std::int64_t i = 0; i < d; ++i) dw_in[at(i, f, j)] += xs[at(r, d, i)] * dh;
    }
  }
  show("dW_out[e]", dw_out, {f, d}, "h_e^T dy_e: its rows' hidden x their dy");
  check_close("autograd's ffn.experts.w_out gradient [e]", dw_out, block_of(autograd_w_out, e));
  show("dW_in[e]", dw_in, {d, f}, "xs_e^T ((dy_e W_out[e]^T) * relu'(h_e))");
  check_close("autograd's ffn.experts.w_in gradient [e]", dw_in, block_of(autograd_w_in, e));
}

}  // namespace moelab::trace
