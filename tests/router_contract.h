// tests/router_contract.h — the contract every routing scheme keeps, checked in a few lines.
//
//   RouterContract c;
//   c.layer = MoEConfig{.d = 6, .experts = 4, .k = 2, .ffn = 5, .router = "my-scheme",
//                       .router_options = {{"alpha", "0.5"}}};
//   const std::string failures = router_contract_failures(c);   // "" when every clause holds
//   CHECK_MESSAGE(failures.empty(), failures);                    // (doctest) or print and exit 1
//
// The clauses, each on a float64 MoE layer built by name through the registry (nn/moe/router.h):
//   1. plan      experts int32 [T, k'] holding expert ids, kDroppedSlot or kUnusedSlot; no expert
//                twice in a token's row; gates [T, k'] finite and 0 in every sentinel slot;
//                tokens_per_expert int32 [E] = the kept ids counted; kept <= max_kept when set;
//                slots (when set) = k' minus the row's unused slots; groups (when set) = those of
//                kernels::group_by_expert; aux losses 0-d and finite; metrics finite, and
//                dropped_fraction (when reported) = dropped / used slots.
//   2. layer     the MoE layer's output equals a plain per-token loop over the plan,
//                y_t = sum_j g_tj * expert_{e_tj}(x_t) (+ shared(x_t), MoEConfig::shared_experts),
//                to 1e-12.
//   3. gradcheck the layer's output and aux losses by central differences, with respect to x and
//                every parameter (the router's only when `router_learns`).
//   4. determinism two layers built from one seed have bitwise-equal parameters and plans; routing
//                the same x twice gives the same plan.
//   5. checkpoint after a few AdamW steps (each running the routers' step hooks), a
//                checkpoint loaded into a layer built from another seed restores every parameter and
//                buffer bitwise, and one more step on both gives bitwise-equal outputs and state.
//   6. learns    when `router_learns`: the gradient of (output . r + aux losses) with respect to the
//                router's parameters, r and x random, is not identically zero. Gradcheck (3) cannot
//                see a router that never learns: a zero analytic gradient equals a zero numeric one
//                (top-k with k = 1 and renormalised gates, every gate p/p = 1, passed it).
//   7. gate sum  the promise the router declares (Router::gate_sum(), nn/moe/router.h): One: every
//                token with no dropped slot has gates summing to 1, and none sums past 1;
//                AtMostOne: none sums past 1 (to 1e-12); Free: nothing.
//   8. threads   the plan for a batch large enough to be split between threads (2048 tokens) is
//                bitwise the same at 1 and at 2 threads.
//   9. ties      with every router parameter set to 0 (all experts score the same for a token) and
//                with a batch of identical tokens: the plan keeps clause 1 (no token on one expert
//                twice), and routing twice, or in a twin layer, gives bitwise the same plan.
//  10. replay   a router that can replay (Router::can_replay) gives back, replaying its own plan's
//                `selected` experts in a twin layer, bitwise the same plan; one that cannot refuses
//                replay() with an Error (nn/moe/routing_tape.h replays whole runs through it).
// Clauses 2 and 3 run in training mode when routing there is deterministic (the same plan twice),
// else in evaluation mode (a router with noise). A router that routes on token ids (token_ids =
// true) has ids set on every layer for its rows first (give_ids: a fixed pattern with repeats).
// The header uses no test framework, so an example
// program outside tests/ can run it too (examples/custom_router.cpp --check-contract).
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/parallel.h"
#include "nn/io/checkpoint.h"
#include "nn/moe/moe_layer.h"
#include "nn/moe/router_toolkit.h"
#include "nn/optim/adam.h"
#include "tests/parameter_gradcheck.h"
#include "tests/temp_dir.h"

namespace moelab::testing {

struct RouterContract {
  MoEConfig layer;            // d, experts, k, ffn, router name and options (dtype: float64 is forced)
  std::int64_t tokens = 12;   // T
  std::uint64_t seed = 1;
  bool router_learns = true;  // the gates or aux losses carry gradient to the router's parameters
  bool token_ids = false;     // the router routes on token ids: every layer is given ids for its rows
  std::int64_t thread_tokens = 2048;  // clause 8's batch
};

namespace contract_detail {

inline std::vector<std::int32_t> ints(const Tensor& t) { return t.to(Device::cpu()).to_vector<std::int32_t>(); }
inline std::vector<double> doubles(const Tensor& t) { return host_doubles(t); }

inline bool same_plan(const RoutingPlan& a, const RoutingPlan& b) {
  return ints(a.experts) == ints(b.experts) && doubles(a.gates.data()) == doubles(b.gates.data());
}

// Clause 1: the plan's invariants.
inline void check_plan(const RoutingPlan& plan, std::int64_t T, std::int64_t E, std::ostringstream& out) {
  if (!plan.experts.defined() || plan.experts.dtype() != DType::Int32 || plan.experts.rank() != 2 ||
      plan.experts.size(0) != T) {
    out << "plan: experts must be int32 [" << T << ", k]\n";
    return;
  }
  const std::int64_t k = plan.experts.size(1);
  if (!plan.gates.defined() || plan.gates.shape() != plan.experts.shape()) {
    out << "plan: gates must be [" << T << ", " << k << "]\n";
    return;
  }
  const std::vector<std::int32_t> ids = ints(plan.experts);
  const std::vector<double> g = doubles(plan.gates.data());
  std::vector<std::int32_t> counts(static_cast<std::size_t>(E), 0);
  std::int64_t dropped = 0, unused = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    std::set<std::int32_t> seen;
    std::int64_t row_unused = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      const std::size_t a = static_cast<std::size_t>(t * k + j);
      const std::int32_t e = ids[a];
      if (!std::isfinite(g[a])) out << "plan: gate (" << t << ", " << j << ") is not finite\n";
      if (e == kDroppedSlot || e == kUnusedSlot) {
        if (g[a] != 0.0) out << "plan: gate (" << t << ", " << j << ") = " << g[a] << " in a sentinel slot\n";
        (e == kDroppedSlot ? dropped : unused) += 1;
        row_unused += e == kUnusedSlot;
        continue;
      }
      if (e < 0 || e >= E) {
        out << "plan: expert id " << e << " at (" << t << ", " << j << ") is outside [0, " << E << ") and no sentinel\n";
        continue;
      }
      if (!seen.insert(e).second) out << "plan: token " << t << " has expert " << e << " twice\n";
      ++counts[static_cast<std::size_t>(e)];
    }
    if (plan.slots.defined() && plan.slots.numel() == T && ints(plan.slots)[static_cast<std::size_t>(t)] != k - row_unused)
      out << "plan: slots[" << t << "] = " << ints(plan.slots)[static_cast<std::size_t>(t)] << ", but the row uses "
          << k - row_unused << "\n";
  }
  if (plan.slots.defined() && (plan.slots.dtype() != DType::Int32 || plan.slots.shape() != Shape{T}))
    out << "plan: slots must be int32 [" << T << "], got " << plan.slots.shape() << "\n";
  if (!plan.tokens_per_expert.defined() || ints(plan.tokens_per_expert) != counts)
    out << "plan: tokens_per_expert is not the count of kept ids per expert\n";
  std::int64_t kept = 0;
  for (std::int32_t c : counts) kept += c;
  if (plan.max_kept >= 0 && kept > plan.max_kept)
    out << "plan: " << kept << " kept assignments exceed max_kept = " << plan.max_kept << "\n";
  if (plan.groups) {
    const kernels::ExpertGroups want = kernels::group_by_expert(ids_for_grouping(plan.experts.to(Device::cpu())), E);
    if (ints(plan.groups->order) != ints(want.order) || ints(plan.groups->offsets) != ints(want.offsets) ||
        ints(plan.groups->rows) != ints(want.rows))
      out << "plan: groups differ from kernels::group_by_expert of the plan's experts\n";
  }
  for (const auto& [name, loss] : plan.aux_losses)
    if (loss.data().numel() != 1 || loss.rank() != 0 || !std::isfinite(doubles(loss.data())[0]))
      out << "plan: aux loss '" << name << "' must be a finite 0-d value\n";
  if (plan.metrics) {
    const std::map<std::string, double> m = plan.metrics();
    for (const auto& [name, value] : m)
      if (!std::isfinite(value)) out << "plan: metric '" << name << "' is not finite\n";
    const auto it = m.find("dropped_fraction");
    const double used = static_cast<double>(T * k - unused);
    if (it != m.end() && std::abs(it->second - (used > 0 ? static_cast<double>(dropped) / used : 0.0)) > 1e-12)
      out << "plan: dropped_fraction " << it->second << " but " << dropped << " of " << used << " used slots dropped\n";
  }
}

// Clause 2's reference: y_t = sum over the plan's kept slots of g * expert_e(x_t) (+ the shared
// experts' MLP when the layer has them), on the host.
inline std::vector<double> per_token_loop(const MoELayer& moe, const RoutingPlan& plan, const Tensor& x) {
  const ExpertBank& bank = moe.experts();
  const std::int64_t d = bank.d(), f = bank.ffn(), T = x.size(0), k = plan.experts.size(1);
  const std::vector<std::int32_t> ex = ints(plan.experts);
  const std::vector<double> g = doubles(plan.gates.data()), xv = doubles(x);
  const std::vector<double> w_in = doubles(bank.w_in().data()), w_out = doubles(bank.w_out().data());
  const bool bias = bank.b_in().defined();
  const std::vector<double> b_in = bias ? doubles(bank.b_in().data()) : std::vector<double>();
  const std::vector<double> b_out = bias ? doubles(bank.b_out().data()) : std::vector<double>();
  std::vector<double> y(static_cast<std::size_t>(T * d), 0.0);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t e = ex[static_cast<std::size_t>(t * k + j)];
      if (e < 0) continue;
      std::vector<double> h(static_cast<std::size_t>(f));
      for (std::int64_t c = 0; c < f; ++c) {
        double s = bias ? b_in[static_cast<std::size_t>(e * f + c)] : 0.0;
        for (std::int64_t i = 0; i < d; ++i)
          s += xv[static_cast<std::size_t>(t * d + i)] * w_in[static_cast<std::size_t>((e * d + i) * f + c)];
        h[static_cast<std::size_t>(c)] = std::max(s, 0.0);
      }
      for (std::int64_t o = 0; o < d; ++o) {
        double s = bias ? b_out[static_cast<std::size_t>(e * d + o)] : 0.0;
        for (std::int64_t c = 0; c < f; ++c)
          s += h[static_cast<std::size_t>(c)] * w_out[static_cast<std::size_t>((e * f + c) * d + o)];
        y[static_cast<std::size_t>(t * d + o)] += g[static_cast<std::size_t>(t * k + j)] * s;
      }
    }
  if (plan.direct_output.defined()) {  // + what the router computes itself (top-k's copy experts)
    const std::vector<double> direct = doubles(plan.direct_output.data());
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += direct[i];
  }
  if (const MLP* shared = moe.shared()) {  // + relu(x up^T + b_up) down^T + b_down, every token
    const std::vector<double> up = doubles(shared->up().weight().data()), down = doubles(shared->down().weight().data());
    const bool sb = shared->up().bias().defined();
    const std::vector<double> bu = sb ? doubles(shared->up().bias().data()) : std::vector<double>();
    const std::vector<double> bd = sb ? doubles(shared->down().bias().data()) : std::vector<double>();
    const std::int64_t fs = shared->up().weight().size(0);
    for (std::int64_t t = 0; t < T; ++t) {
      std::vector<double> h(static_cast<std::size_t>(fs));
      for (std::int64_t c = 0; c < fs; ++c) {
        double s = sb ? bu[static_cast<std::size_t>(c)] : 0.0;
        for (std::int64_t i = 0; i < d; ++i)
          s += xv[static_cast<std::size_t>(t * d + i)] * up[static_cast<std::size_t>(c * d + i)];
        h[static_cast<std::size_t>(c)] = std::max(s, 0.0);
      }
      for (std::int64_t o = 0; o < d; ++o) {
        double s = sb ? bd[static_cast<std::size_t>(o)] : 0.0;
        for (std::int64_t c = 0; c < fs; ++c)
          s += h[static_cast<std::size_t>(c)] * down[static_cast<std::size_t>(o * fs + c)];
        y[static_cast<std::size_t>(t * d + o)] += s;
      }
    }
  }
  return y;
}

// The layer's output and aux losses as one flat vector (what the gradchecks differentiate).
inline Variable output_and_aux(MoELayer& moe, const Variable& x) {
  AuxLosses aux;
  std::vector<Variable> parts = {reshape(moe.forward_with_aux(x, aux), {-1})};
  for (const auto& [name, loss] : aux.terms) parts.push_back(reshape(loss, {1}));
  return parts.size() == 1 ? parts[0] : concat(parts, 0);
}

// One AdamW step on a fixed regression target; returns the output before the step.
inline Tensor train_step(MoELayer& moe, AdamW& opt, const Tensor& x, const Tensor& target) {
  AuxLosses aux;
  const Variable y = moe.forward_with_aux(Variable(x), aux);
  const Variable loss = aux.added_to(mse_loss(y, Variable(target)));
  opt.zero_grad();
  loss.backward();
  opt.step();
  return y.data();
}

// Clause 6: sum of |d(output . r + aux) / d theta| over the router's parameters.
inline double router_gradient_size(MoELayer& moe, const Tensor& x, std::uint64_t seed) {
  Generator gen(seed);
  for (Variable& p : moe.router().parameters()) p.zero_grad();
  AuxLosses aux;
  const Variable y = moe.forward_with_aux(Variable(x), aux);
  Variable loss = sum(y * Variable(normal(y.shape(), 0.0, 1.0, gen, y.dtype())));
  for (const auto& term : aux.terms) loss = loss + term.second;
  loss.backward();
  double size = 0.0;
  for (const Variable& p : moe.router().parameters())
    if (p.grad().defined())
      for (double g : doubles(p.grad())) size += std::abs(g);
  return size;
}

// Clause 6's diagnosis when the router gets no gradient: what its gates look like.
inline std::string why_no_router_gradient(MoELayer& moe, const Tensor& x) {
  const RoutingPlan plan = moe.router().route(Variable(x));
  if (!plan.gates.defined()) return "the plan has no gates";
  if (!plan.gates.requires_grad())
    return "its gates are not connected to its parameters (made from a Tensor or .data(), or under no_grad?)";
  const std::vector<std::int32_t> ids = ints(plan.experts);
  const std::vector<double> g = doubles(plan.gates.data());
  std::vector<double> kept;  // the gates of slots that reach an expert
  for (std::size_t i = 0; i < g.size() && i < ids.size(); ++i)
    if (ids[i] >= 0) kept.push_back(g[i]);
  const bool all_one = !kept.empty() && std::all_of(kept.begin(), kept.end(), [](double v) { return v == 1.0; });
  const bool all_same = !kept.empty() && std::all_of(kept.begin(), kept.end(), [&](double v) { return v == kept[0]; });
  if (all_one)
    return std::string("every kept gate is exactly 1") +
           (moe.router().k() == 1 ? " (k = 1 with renormalised gates: p/p = 1; use gates=softmax-topk, or k >= 2)"
                                  : " (renormalised over one real slot per token?)");
  if (all_same) return "every kept gate is the same constant " + std::to_string(kept[0]) + " (equal gates?)";
  return "its gates vary and are in the graph, but nothing flows back to its parameters (a stop-gradient, a "
         "detached score, or parameters the gates do not use?)";
}

// Clause 7: each token's gate sum against the router's declared promise.
inline void check_gate_sum(const RoutingPlan& plan, GateSum promise, std::ostringstream& out) {
  if (promise == GateSum::Free || !plan.gates.defined() || plan.gates.rank() != 2) return;
  const std::int64_t T = plan.gates.size(0), k = plan.gates.size(1);
  const std::vector<std::int32_t> ids = ints(plan.experts);
  const std::vector<double> g = doubles(plan.gates.data());
  for (std::int64_t t = 0; t < T; ++t) {
    double total = 0.0;
    bool dropped = false;
    for (std::int64_t j = 0; j < k; ++j) {
      total += g[static_cast<std::size_t>(t * k + j)];
      dropped |= ids[static_cast<std::size_t>(t * k + j)] == kDroppedSlot;
    }
    if (total > 1.0 + 1e-12 || (promise == GateSum::One && !dropped && std::abs(total - 1.0) > 1e-12)) {
      out << "gate sum: the router promises its gates " << gate_sum_name(promise) << ", but token " << t
          << "'s sum to " << total << "\n";
      return;
    }
  }
}

// Token ids for a layer's next `rows` rows (MoELayer::set_token_ids), when the contract asks for
// them: a fixed pattern with repeats (ids in [0, 50)), so that equal ids meet different tokens.
inline void give_ids(const RouterContract& c, MoELayer& layer, std::int64_t rows) {
  if (!c.token_ids) return;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(rows));
  for (std::int64_t t = 0; t < rows; ++t)
    ids[static_cast<std::size_t>(t)] = static_cast<std::int32_t>((t * 37 + 11) % 50);
  layer.set_token_ids(from_vector(ids, {rows}));
}

inline std::vector<std::pair<std::string, std::vector<double>>> state_of(const Module& m) {
  std::vector<std::pair<std::string, std::vector<double>>> out;
  for (const auto& [name, p] : m.named_parameters()) out.emplace_back(name, doubles(p.data()));
  for (const auto& [name, b] : m.named_buffers()) out.emplace_back(name, doubles(b));
  return out;
}

}  // namespace contract_detail

// Every clause above; "" when all hold, else one line per failure.
inline std::string router_contract_failures(const RouterContract& c) {
  using namespace contract_detail;
  std::ostringstream out;
  MoEConfig cfg = c.layer;
  cfg.dtype = DType::Float64;
  const std::int64_t T = c.tokens, d = cfg.d, E = cfg.experts;
  // One thread: the layers are tiny and results do not depend on the thread count, but thousands
  // of finite-difference forwards would otherwise spend their time starting parallel regions.
  const int threads = num_threads();
  set_num_threads(1);
  try {
    Generator gen(c.seed), data(c.seed + 1000);
    MoELayer moe(cfg, gen);
    const Tensor x = normal({T, d}, 0.0, 1.0, data, DType::Float64);

    // 4. determinism (first: the other clauses rely on it)
    Generator gen2(c.seed);
    MoELayer twin(cfg, gen2);
    give_ids(c, moe, T);
    give_ids(c, twin, T);
    if (state_of(moe) != state_of(twin)) out << "determinism: one seed built different parameters or buffers\n";
    const RoutingPlan plan = moe.router().route(Variable(x));
    if (!same_plan(plan, twin.router().route(Variable(x)))) out << "determinism: twin layers routed x differently\n";
    const bool train_deterministic = same_plan(plan, moe.router().route(Variable(x)));
    moe.eval();
    if (!same_plan(moe.router().route(Variable(x)), moe.router().route(Variable(x))))
      out << "determinism: routing x twice in evaluation mode gave different plans\n";
    moe.train(train_deterministic);

    // 1. plan (in both modes)
    check_plan(plan, T, E, out);
    check_plan(moe.router().route(Variable(x)), T, E, out);

    // 2. layer against the per-token loop
    {
      const Variable y = moe.forward(Variable(x));
      const std::vector<double> want = per_token_loop(moe, moe.router().route(Variable(x)), x);
      const std::vector<double> got = doubles(y.data());
      double err = 0;
      for (std::size_t i = 0; i < want.size(); ++i) err = std::max(err, std::abs(got[i] - want[i]));
      if (y.shape() != x.shape() || err > 1e-12) out << "layer: differs from the per-token loop by " << err << "\n";
    }

    // 3. gradcheck: x, then the parameters
    {
      const GradcheckResult r =
          gradcheck([&](const std::vector<Variable>& v) { return output_and_aux(moe, v[0]); }, {x});
      if (!r.ok) out << "gradcheck (x): " << r.report << "\n";
      std::int64_t checked = 0;
      Module& params = c.router_learns ? static_cast<Module&>(moe) : static_cast<Module&>(moe.experts());
      const std::string failures = check_parameters(params, [&] { return output_and_aux(moe, Variable(x)); }, checked);
      if (!failures.empty()) out << "gradcheck (parameters):\n" << failures;
    }
    moe.train();

    // 5. checkpoint round trip and bitwise resume
    {
      Generator ga(c.seed + 7);
      MoELayer a(cfg, ga);
      give_ids(c, a, T);
      AdamW opt_a(a.parameters(), AdamOptions{.lr = 1e-2});
      Generator batch_gen(c.seed + 2000);
      const Tensor target = normal({T, d}, 0.0, 1.0, batch_gen, DType::Float64);
      for (int s = 0; s < 3; ++s) train_step(a, opt_a, x, target);
      TempDir dir;
      const std::string path = dir.file("router.safetensors");
      save_checkpoint(path, a, &opt_a, 3, &batch_gen);
      Generator gb(c.seed + 8);
      MoELayer b(cfg, gb);
      give_ids(c, b, T);
      AdamW opt_b(b.parameters(), AdamOptions{.lr = 1e-2});
      Generator batch_b(0);
      load_checkpoint(path, b, &opt_b, &batch_b);
      if (state_of(a) != state_of(b)) out << "checkpoint: a parameter or buffer did not round-trip bitwise\n";
      const Tensor ya = train_step(a, opt_a, x, target), yb = train_step(b, opt_b, x, target);
      if (doubles(ya) != doubles(yb) || state_of(a) != state_of(b))
        out << "checkpoint: a resumed step is not bitwise the uninterrupted one\n";
    }

    // 6. a router that declares it learns gets a gradient (in the mode clause 3 used)
    if (c.router_learns) {
      Generator g6(c.seed);
      MoELayer fresh(cfg, g6);
      give_ids(c, fresh, T);
      fresh.train(train_deterministic);
      if (fresh.router().parameters().empty())
        out << "learns: the router declares it learns but has no parameters\n";
      else if (!(router_gradient_size(fresh, x, c.seed + 3000) > 0.0))
        out << "learns: the router's parameters get a gradient of exactly 0 from the output and the aux losses: "
            << why_no_router_gradient(fresh, x) << "\n";
    }

    // 7. the declared gate sum, in both modes
    {
      Generator g7(c.seed);
      MoELayer fresh(cfg, g7);
      give_ids(c, fresh, T);
      check_gate_sum(fresh.router().route(Variable(x)), fresh.router().gate_sum(), out);
      fresh.eval();
      check_gate_sum(fresh.router().route(Variable(x)), fresh.router().gate_sum(), out);
    }

    // 8. the same plan at 1 and 2 threads
    {
      Generator g8(c.seed), d8(c.seed + 4000);
      MoELayer fresh(cfg, g8);
      give_ids(c, fresh, c.thread_tokens);
      fresh.train(train_deterministic);
      const Tensor big = normal({c.thread_tokens, d}, 0.0, 1.0, d8, DType::Float64);
      set_num_threads(2);
      const RoutingPlan two = fresh.router().route(Variable(big));
      set_num_threads(1);
      const RoutingPlan one = fresh.router().route(Variable(big));
      if (!same_plan(one, two)) out << "threads: the plan at 2 threads differs from the plan at 1\n";
    }

    // 9. ties: zero router parameters, then identical tokens
    {
      auto tied_layer = [&](std::uint64_t seed) {
        Generator g9(seed);
        auto layer = std::make_unique<MoELayer>(cfg, g9);
        give_ids(c, *layer, T);
        layer->train(train_deterministic);
        for (Variable& p : layer->router().parameters()) {
          Tensor t = p.data();
          kernels::copy(t, zeros(t.shape(), t.dtype()));
        }
        return layer;
      };
      auto a = tied_layer(c.seed), b = tied_layer(c.seed);
      std::vector<double> same_row = doubles(x.slice(0, 1));
      std::vector<double> rows;
      for (std::int64_t t = 0; t < T; ++t) rows.insert(rows.end(), same_row.begin(), same_row.end());
      for (const Tensor& input : {x, from_vector(rows, {T, d})}) {
        const RoutingPlan p1 = a->router().route(Variable(input));
        std::ostringstream plan_faults;
        check_plan(p1, T, E, plan_faults);
        if (!plan_faults.str().empty()) out << "ties: " << plan_faults.str();
        if (!same_plan(p1, a->router().route(Variable(input))) || !same_plan(p1, b->router().route(Variable(input))))
          out << "ties: tied scores were routed differently twice\n";
      }
    }

    // 10. replay (in the mode clause 3 used)
    {
      auto fresh_layer = [&]() {
        Generator g10(c.seed);
        auto layer = std::make_unique<MoELayer>(cfg, g10);
        give_ids(c, *layer, T);
        layer->train(train_deterministic);
        return layer;
      };
      auto a = fresh_layer(), b = fresh_layer();
      const RoutingPlan own = a->router().route(Variable(x));
      if (a->router().can_replay()) {
        if (!own.selected.defined()) {
          out << "replay: can_replay() is true but the plan has no `selected` experts\n";
        } else {
          b->router().replay(own.selected);
          const RoutingPlan again = b->router().route(Variable(x));
          b->router().stop_replay();
          if (!same_plan(own, again)) out << "replay: replaying the plan's own selected experts gave another plan\n";
        }
      } else {
        bool refused = false;
        try {
          b->router().replay(own.experts);
        } catch (const Error&) {
          refused = true;
        }
        if (!refused) out << "replay: can_replay() is false but replay() did not refuse\n";
      }
    }
  } catch (const std::exception& e) {
    out << "threw: " << e.what() << "\n";
  }
  set_num_threads(threads);
  return out.str();
}

}  // namespace moelab::testing
