// examples/trace_step.cpp — one training step of a tiny MoE decoder, every tensor printed.
//
// The model is the real one (nn/moe/moe_decoder.h: a Decoder whose FFN is a MoELayer), at a size
// whose tensors fit on a line:
//   B = 2 sequences, T = 4 tokens, d = 8, vocab V = 16, 1 layer, 2 heads (hd = 4),
//   E = 4 experts of width f = 16, top-k = 2 (Mixtral's renormalised gates), Switch load balancing 0.01.
// The program walks the forward through the same public pieces the layers call, in the order they
// call them (Embedding, RMSNorm, Attention's Linears and autograd ops, TopKRouter::route,
// kernels::group_by_expert, the autograd grouped_matmul, index_select, scatter_add_rows_scaled, the head,
// nn::cross_entropy), printing each tensor; then it checks that each stepped piece gives the same
// bits as the layer's own forward (Attention::forward, ExpertBank::forward, MoELayer::forward_with_aux,
// Decoder::forward) and prints "matches ...: yes" — or "no" and exits with status 1, so the trace
// cannot drift from the code it describes. Then the model's own loss goes backward (the gradient
// of every parameter), the stepped loss too (the same parameter gradients, checked, and those of
// the main activations, read through zero-valued probes: A + Z with Z a zero leaf, dloss/dZ =
// dloss/dA). The MoE-specific gradients are then written out by hand in plain loops: the router's
// along the gates and along the load-balancing loss, and the busiest expert's dW_in and dW_out,
// each checked against autograd ("agrees with ...: yes", to 1e-5 relative). Last, one AdamW step
// updates the parameters (a few values before and after).
//
// Each line: name, shape, the role in a phrase, and the first values (3 decimals; int32 tensors in
// full, rows separated by |). The output is deterministic (fixed seed, one thread), so
// docs/TOUR.md pastes it and tests/tour_check.sh checks the paste is still what this prints.
//
//   build/trace_step            # the whole trace (112 lines); --heads 1 or 4, --seed N to vary it
//   build/trace_step --seed 3   # another draw of the weights and tokens
#include <algorithm>
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "autograd/graph_print.h"
#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/openmp_wait.h"
#include "core/parallel.h"
#include "nn/loss.h"
#include "nn/moe/moe_decoder.h"
#include "nn/moe/top_k_router.h"
#include "nn/nn.h"
#include "nn/optim/adam.h"
#include "trace_gradients.h"
#include "trace_print.h"

using namespace moelab;
using namespace moelab::trace;

namespace {

MoEPieces pieces;  // what trace_moe saw, for the gradients by hand (trace_gradients.h)

// What each parameter of the model is, by its dotted name (nn/decoder.h, nn/moe/moe_decoder.h).
std::string role_of(const std::string& name) {
  const std::vector<std::pair<std::string, std::string>> roles = {
      {"embed.weight", "one learned vector per vocabulary entry"},
      {"attn_norm.weight", "RMSNorm scale before attention (ones)"},
      {"attn.q.weight", "query projection Wq [out, in]"},
      {"attn.k.weight", "key projection Wk"},
      {"attn.v.weight", "value projection Wv"},
      {"attn.o.weight", "output projection Wo, joins the heads"},
      {"ffn_norm.weight", "RMSNorm scale before the MoE layer (ones)"},
      {"ffn.router.weight", "router W_r: one row of d per expert"},
      {"ffn.experts.w_in", "each expert's first layer [E, d, f]"},
      {"ffn.experts.w_out", "each expert's second layer [E, f, d]"},
      {"norm.weight", "final RMSNorm scale (ones)"},
      {"head.weight", "LM head: one row of d per vocabulary entry"},
  };
  for (const auto& [suffix, role] : roles)
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return role;
  return "";
}

// The gradient's norm, and for the embedding how many of its rows backward touched (only the rows
// of the tokens in ids get a gradient).
std::string grad_note(const std::string& name, const Tensor& g) {
  const std::vector<double> v = g.to(Device::cpu()).to(DType::Float64).to_vector<double>();
  double sq = 0.0;
  for (double x : v) sq += x * x;
  std::string note = "|grad| = " + num(std::sqrt(sq));
  if (name == "embed.weight") {
    const std::int64_t rows = g.size(0), cols = g.size(1);
    std::int64_t nonzero = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      bool any = false;
      for (std::int64_t c = 0; c < cols; ++c) any = any || v[static_cast<std::size_t>(r * cols + c)] != 0.0;
      nonzero += any ? 1 : 0;
    }
    note += ", rows != 0: " + std::to_string(nonzero) + " of " + std::to_string(rows) + " (the ids')";
  }
  return note;
}

std::string probe_role(const std::string& name) {
  const std::vector<std::pair<std::string, std::string>> roles = {
      {"embed", "the residual stream's start; back to embed rows"},
      {"attn.probs", "softmax_backward makes it dloss/dscores"},
      {"attn.out", "equals residual 1's: the add passes it on"},
      {"ffn_norm", "dloss/d(MoE input), via experts and router"},
      {"plan.gates", "<dloss/dy_t, expert output>: the router learns"},
      {"experts.y", "g times dloss/dy of the row's token"},
      {"moe.y", "dloss/d(block output), as the add passes it"},
      {"logits", "(softmax - onehot(target)) / 8 positions"},
  };
  for (const auto& [n, role] : roles)
    if (n == name) return role;
  return "";
}

// A direct child of `m` by its registered name, as its concrete type.
template <class M>
M& child(const Module& m, const std::string& name) {
  for (const auto& [n, c] : m.children())
    if (n == name) {
      M* p = dynamic_cast<M*>(c.get());
      MOELAB_CHECK(p != nullptr, "trace_step", "child '", name, "' is not of the expected type");
      return *p;
    }
  MOELAB_CHECK(false, "trace_step", "no child named '", name, "'");
  throw Error("unreachable");
}

// ---------------------------------------------------------------- activation gradients
// Only leaves keep a gradient, so the gradient of an activation A is read through a probe: the
// stepped forward goes on with A + Z, Z a zero leaf that requires a gradient. Adding 0 changes no
// value, and dloss/dZ = dloss/dA.
std::vector<std::pair<std::string, Variable>> probes;
Variable probed(const std::string& name, const Variable& a) {
  Variable z(zeros(a.shape(), a.dtype(), a.device()), /*requires_grad=*/true);
  probes.emplace_back(name, z);
  return a + z;
}

// ---------------------------------------------------------------- the stepped layers
// Attention::forward (nn/attention.cpp) without a cache, one call at a time. a: [B, T, d]
Variable trace_attention(const Attention& attn, const Variable& a) {
  const std::int64_t B = a.size(0), T = a.size(1), d = attn.dim(), H = attn.heads(), hd = attn.head_dim();
  const Linear &wq = child<Linear>(attn, "q"), &wk = child<Linear>(attn, "k"), &wv = child<Linear>(attn, "v"),
               &wo = child<Linear>(attn, "o");
  auto split_heads = [&](const Variable& y, bool rotate) {  // [B, T, d] -> [B, H, T, hd]
    Variable h = reshape(y, {B, T, H, hd});
    if (rotate) h = rope(h, 0, attn.rope_theta());
    return permute(h, {0, 2, 1, 3});
  };
  // As the fused kernel (core/cpu/attention.cpp): q unscaled, the scale applied to each score after
  // the product. (Scaling q first matched it only when 1 / sqrt(hd) is a power of two.)
  const Variable q_lin = wq.forward(a);
  line("attn.q", q_lin, "a Wq^T: queries");
  const Variable q = split_heads(q_lin, true);
  line("attn.q (heads, rope)", q, "split into H heads, rotated by position (RoPE)");
  const Variable k = split_heads(wk.forward(a), true);
  line("attn.k (heads, rope)", k, "a Wk^T, split and rotated: keys");
  const Variable v = split_heads(wv.forward(a), false);
  line("attn.v (heads)", v, "a Wv^T, split (no rotation): values");
  Variable scores = matmul(reshape(q, {B * H, T, hd}), reshape(k, {B * H, T, hd}), false, true) *
                    (1.0 / std::sqrt(static_cast<double>(hd)));
  scores = causal_mask(scores, -std::numeric_limits<double>::infinity());
  line("attn.scores", scores, "q k^T / sqrt(hd) per (seq, head), future -inf", 4);
  const Variable probs = probed("attn.probs", softmax(scores));
  line("attn.probs", probs, "softmax over keys: each row sums to 1", 8);
  std::printf("  probs of sequence 0, head 0 (row = query t, column = key s):\n");
  const std::vector<double> p = probs.data().to(DType::Float64).to_vector<double>();
  for (std::int64_t t = 0; t < T; ++t) {
    std::printf("   ");
    for (std::int64_t s = 0; s < T; ++s) std::printf(" %s", num(p[static_cast<std::size_t>(t * T + s)]).c_str());
    std::printf("\n");
  }
  Variable y = matmul(probs, reshape(v, {B * H, T, hd}));  // [B*H, T, hd]
  line("attn.mix", y, "probs @ v: a weighted mean of the values");
  y = permute(reshape(y, {B, H, T, hd}), {0, 2, 1, 3});
  const Variable out = wo.forward(reshape(y, {B, T, d}));
  line("attn.out", out, "heads joined back to d, times Wo^T");
  return out;
}

// MoELayer::forward_with_aux (nn/moe/moe_layer.cpp), one call at a time. n: [B, T, d]
Variable trace_moe(MoELayer& moe, const Variable& n, AuxLosses& aux) {
  const std::int64_t d = moe.config().d, E = moe.config().experts;
  auto& router = dynamic_cast<TopKRouter&>(moe.router());
  const Variable xf = reshape(n, {-1, d});
  const std::int64_t T = xf.size(0);
  line("moe.x", xf, "the tokens flattened: B*T rows of d");

  RoutingPlan plan = router.route(xf);
  const std::int64_t k = plan.experts.size(1);
  {
    // The router's own logits and probabilities stay inside top_k_route; recomputed here with the
    // ops it uses, for display, and checked against the plan it returned.
    NoGradGuard no_grad;
    const Variable logits = matmul(xf, router.weight(), false, true);
    const Variable probs = softmax(logits);
    line("router.logits", logits, "x W_r^T: a score per (token, expert)", 4);
    line("router.probs", probs, "softmax over the E experts", 4);
    const Tensor chosen = kernels::topk(logits.data(), static_cast<int>(k)).indices;
    const Variable g = gather_last(probs, chosen);
    check_same("TopKRouter::route's chosen experts", chosen, plan.experts);
    check_same("TopKRouter::route's gates", (g / sum(g, 1, true)).data(), plan.gates.data());
    pieces.x = xf.data(), pieces.probs = probs.data(), pieces.experts = plan.experts;
    pieces.gates = plan.gates.data(), pieces.tokens_per_expert = plan.tokens_per_expert;
  }
  line("plan.experts", plan.experts, "int32: each token's k experts, best first");
  const Variable gates = probed("plan.gates", plan.gates);
  line("plan.gates", gates, "their probs renormalised to sum to 1", 8);
  for (const auto& [name, loss] : plan.aux_losses) {
    line("plan.aux." + name, loss, "0.01 * E sum_e f_e P_e (the sum is 1 if balanced)");
    aux.add(name, loss);
  }

  const kernels::ExpertGroups groups = plan.groups ? *plan.groups : kernels::group_by_expert(plan.experts, E);
  line("tokens_per_expert", plan.tokens_per_expert, "int32: assignments each expert received");
  line("groups.offsets", groups.offsets, "int32: expert e owns sorted rows [o_e, o_e+1)");
  line("groups.order", groups.order, "int32: assignments a = t*k + j, by expert");
  line("groups.rows", groups.rows, "int32: the token of each sorted row, a / k");

  // No capacity is set, so the layer processes all M = T*k rows (its narrow to max_kept does nothing).
  const Variable xs = index_select(xf, groups.rows);
  line("moe.xs", xs, "x gathered in that order, grouped by expert");
  const ExpertBank& bank = moe.experts();
  const Variable h = relu(grouped_matmul(xs, bank.w_in(), groups.offsets));
  line("experts.h", h, "relu(xs_row @ w_in[e]): each group's own W_in");
  pieces.offsets = groups.offsets, pieces.xs = xs.data(), pieces.h = h.data();
  const Variable ys = probed("experts.y", grouped_matmul(h, bank.w_out(), groups.offsets));
  line("experts.y", ys, "h_row @ w_out[e]: back to d");
  check_same("ExpertBank::forward", ys.data(), bank.forward(xs, groups.offsets).data());
  const Variable g = index_select(reshape(gates, {T * k}), groups.order);
  line("moe.g", g, "the gate of each sorted row", 8);
  const Variable y = probed("moe.y", scatter_add_rows_scaled(ys, g, groups.rows, T));
  line("moe.y", y, "sum_j g_tj y_tj added back to token t", 6);
  return reshape(y, n.shape());
}

}  // namespace

int main(int argc, char** argv) {
  moelab::wait_passively_unless_set(argv);  // OpenMP threads sleep between regions (core/openmp_wait.h)
  CLI::App app{"One training step of a tiny MoE decoder, every tensor printed (see docs/TOUR.md)."};
  std::uint64_t seed = 0;
  std::int64_t heads = 2;
  app.add_option("--seed", seed, "seed of the weights and the tokens");
  app.add_option("--heads", heads, "attention heads (d = 8: 1, 2 or 4, so that each head's width is even for RoPE)")
      ->check(CLI::IsMember({1, 2, 4}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    set_num_threads(1);
    const std::int64_t B = 2, T = 4, V = 16, E = 4, k = 2;
    Generator gen(seed);
    DecoderConfig config{.vocab = V, .d = 8, .layers = 1, .heads = heads, .ffn = 16, .max_seq = T};
    const double load_balance = 0.01;  // a in the Switch loss a E sum_e f_e P_e
    MoEConfig moe_config{.experts = E, .k = k, .router_options = {{"load_balance", std::to_string(load_balance)}}};
    Decoder model(config, gen, moe_feed_forward(moe_config));

    section("parameters (name, shape, what it is, first values)");
    for (const auto& [name, p] : model.named_parameters()) line(name, p, role_of(name), 4);
    std::printf("total %lld parameters\n", static_cast<long long>(model.num_parameters()));

    // A next-token batch: B sequences of T + 1 random tokens; inputs are the first T, targets the last T.
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(B * (T + 1))), in, out;
    for (auto& t : tokens) t = static_cast<std::int32_t>(gen.next_below(static_cast<std::uint32_t>(V)));
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < T; ++t) {
        in.push_back(tokens[static_cast<std::size_t>(b * (T + 1) + t)]);
        out.push_back(tokens[static_cast<std::size_t>(b * (T + 1) + t + 1)]);
      }
    const Tensor ids = from_vector(in, {B, T}), targets = from_vector(out, {B, T});

    section("forward, stepped through the pieces the layers call");
    line("ids", ids, "int32: input tokens, one row per sequence");
    line("targets", targets, "int32: the next token at each position");
    const Variable x = probed("embed", child<Embedding>(model, "embed").forward(ids));
    line("embed", x, "embed.weight[ids]: one row of d per token");
    DecoderBlock& block = model.layer(0);
    const Variable a = block.attn_norm().forward(x);
    line("attn_norm", a, "x / rms(x) * weight: each token normalised");
    const Variable att = probed("attn.out", trace_attention(block.attn(), a));
    check_same("Attention::forward", att.data(), block.attn().forward(a).data());
    const Variable hres = x + att;
    line("residual 1", hres, "x + attention: the residual stream");
    const Variable n = probed("ffn_norm", block.ffn_norm().forward(hres));
    line("ffn_norm", n, "normalised again, the MoE layer's input");
    AuxLosses aux;
    auto& moe = dynamic_cast<MoELayer&>(block.ffn());
    const Variable f = trace_moe(moe, n, aux);
    AuxLosses own_aux;
    check_same("MoELayer::forward_with_aux", f.data(), moe.forward_with_aux(n, own_aux).data());
    const Variable hout = hres + f;
    line("residual 2", hout, "h + MoE(norm(h)): the block's output");
    const Variable hn = child<RMSNorm>(model, "norm").forward(hout);
    line("norm", hn, "the final RMSNorm");
    Variable logits = probed("logits", child<Linear>(model, "head").forward(hn));
    line("logits", logits, "hn head.weight^T: a score per vocabulary entry");
    const Variable ce = nn::cross_entropy(logits, targets);
    line("loss.ce", ce, "mean of -log p(target); uniform: ln 16 = 2.773");
    const Variable loss = ce + aux.total();
    line("loss", loss, "cross-entropy + aux: where backward starts");

    AuxLosses model_aux;
    const Variable model_logits = model.forward(ids, model_aux);
    check_same("Decoder::forward", logits.data(), model_logits.data());
    const Variable model_loss = nn::cross_entropy(model_logits, targets) + model_aux.total();
    check_same("the training loss", loss.data(), model_loss.data());

    section("backward: the parameters' gradients (each the parameter's shape)");
    // The model's own loss first, then the stepped one, whose probes give the activations'
    // gradients; both must give every parameter the same gradient.
    model_loss.backward();
    std::vector<Tensor> own_grads;
    for (const auto& [name, p] : model.named_parameters()) {
      MOELAB_CHECK(p.grad().defined() && p.grad().shape() == p.shape(), "trace_step", "the gradient of ", name,
                   " is missing or not the parameter's shape");
      own_grads.push_back(p.grad().clone());
      line(name, p.grad(), grad_note(name, p.grad()), 4);
    }
    model.zero_grad();
    // Looking inside with the autograd's own tools (autograd/graph_print.h, Variable::retain_grad):
    // the recorded graph of the stepped loss, and the logits' gradient kept on the op output itself.
    const std::string graph = graph_text(loss);
    const std::int64_t graph_lines = static_cast<std::int64_t>(std::count(graph.begin(), graph.end(), '\n'));
    std::printf("graph_text(loss): %lld entries (leaves and ops); the last four, down to the loss:\n",
                static_cast<long long>(graph_lines));
    std::size_t from = graph.size() - 1;
    for (int lines = 0; lines < 4 && from != std::string::npos && from > 0; ++lines) from = graph.rfind('\n', from - 1);
    std::printf("%s", graph.substr(from == std::string::npos ? 0 : from + 1).c_str());
    logits.retain_grad();
    loss.backward();
    std::size_t i = 0;
    bool same_grads = true;
    for (const auto& [name, p] : model.named_parameters())
      same_grads = same_grads && same_values(p.grad(), own_grads[i++]);
    std::printf("matches the stepped loss's parameter gradients: %s\n", same_grads ? "yes" : "no");
    all_matched = all_matched && same_grads;

    section("backward: activations' gradients dloss/dA (read through zero probes, A + 0)");
    for (const auto& [name, z] : probes) line(name + ".grad", z.grad(), probe_role(name), 6);
    for (const auto& [name, z] : probes)
      if (name == "logits") check_same("logits.retain_grad() against its probe", logits.grad(), z.grad());

    section("backward by hand: the router's gradient along its two paths, and one expert's (values x 1000)");
    {
      // Autograd's router gradient from each part of the loss alone (fresh forwards of the model),
      // then the whole loss's again, so that AdamW below steps from the same gradients as before.
      const Variable w_r = model.parameter("layers.0.ffn.router.weight");
      auto router_gradient_of = [&](bool ce_part, bool aux_part) {
        model.zero_grad();
        AuxLosses part_aux;
        const Variable part_logits = model.forward(ids, part_aux);
        Variable part = nn::cross_entropy(part_logits, targets);
        if (!ce_part) part = part_aux.total();
        else if (aux_part) part = part + part_aux.total();
        part.backward();
        return w_r.grad().clone();
      };
      const Tensor ce_only = router_gradient_of(true, false), aux_only = router_gradient_of(false, true);
      const Tensor whole = router_gradient_of(true, true);
      Tensor dgates, dys;
      for (const auto& [name, z] : probes) {
        if (name == "plan.gates") dgates = z.grad();
        if (name == "experts.y") dys = z.grad();
      }
      trace_router_gradient(pieces, dgates, load_balance, ce_only, aux_only, whole);
      trace_expert_gradient(pieces, moe.experts(), dys, model.parameter("layers.0.ffn.experts.w_in").grad(),
                            model.parameter("layers.0.ffn.experts.w_out").grad());
    }

    section("AdamW step (lr 0.01, wd 0.01): p *= 1 - lr wd; p -= lr m_hat / (sqrt(v_hat) + eps)");
    AdamW opt(model.parameters(), AdamOptions{.lr = 0.01});
    const Variable w = model.parameter("layers.0.ffn.router.weight");
    const Tensor before = w.data().clone();
    opt.step();
    line("router.weight before", before, "the values AdamW starts from", 6);
    line("router.weight after", w, "first step: each moves by about lr * sign(g)", 6);
    line("router.weight grad", w.grad(), "g: its sign sets the first step's direction", 6);
    opt.zero_grad();
    {
      NoGradGuard no_grad;
      AuxLosses after_aux;
      const Variable after_logits = model.forward(ids, after_aux);  // before after_aux.total(): it fills it
      const Variable after = nn::cross_entropy(after_logits, targets) + after_aux.total();
      line("loss after the step", after, "the same batch again");
    }

    std::printf("%s\n", all_matched ? "every stepped piece matches the layers' own forward" : "MISMATCH");
    return all_matched ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_step: %s\n", e.what());
    return 1;
  }
}
