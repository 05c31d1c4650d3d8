// tests/test_router_contract.cpp — every built-in routing scheme against tests/router_contract.h
// (plan invariants, the MoE layer against a per-token loop, gradcheck, determinism, checkpoint
// round trip), in the configurations people use; plus the toolkit's helpers
// (nn/moe/router_toolkit.h) on hand-made inputs, and a contract that must fail on a broken router.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/factories.h"
#include "core/parallel.h"
#include "nn/moe/router_toolkit.h"
#include "nn/random_stream.h"
#include "tests/router_contract.h"

using namespace moelab;
using moelab::testing::RouterContract;
using moelab::testing::router_contract_failures;

namespace {

RouterContract contract(const std::string& router, std::int64_t k, std::map<std::string, std::string> options = {},
                        std::int64_t experts = 4) {
  RouterContract c;
  c.layer.d = 6, c.layer.experts = experts, c.layer.k = k, c.layer.ffn = 5, c.layer.bias = true;
  c.layer.router = router;
  c.layer.router_options = std::move(options);
  return c;
}

void check_contract(const RouterContract& c) {
  const std::string failures = router_contract_failures(c);
  CHECK_MESSAGE(failures.empty(), c.layer.router, ": ", failures);
}

// A router that breaks the contract on purpose: a gate in a dropped slot, and a wrong count.
class BrokenRouter : public Router {
 public:
  explicit BrokenRouter(const RouterConfig& c) : Router(c.d, c.experts, 1, "BrokenRouter") {}
  RoutingPlan route(const Variable& x) override {
    const std::int64_t T = x.size(0);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(T), 0);
    ids[0] = kDroppedSlot;
    RoutingPlan plan;
    plan.experts = from_vector(ids, {T, 1});
    plan.gates = Variable(ones({T, 1}, x.dtype()));
    plan.tokens_per_expert = zeros({experts()}, DType::Int32);
    return plan;
  }
};

// Softmax scores of a learned [E, d] weight, and a plan made from host-side choices: the base of
// the deliberately broken routers below, each of which breaks exactly one clause.
class HostChoiceRouter : public Router {
 public:
  HostChoiceRouter(const RouterConfig& c, Generator& gen, const char* name = "HostChoiceRouter") : Router(c.d, c.experts, c.k, name) {
    weight_ = register_parameter("weight", uniform({c.experts, c.d}, -0.5, 0.5, gen, c.dtype));
  }
  RoutingPlan route(const Variable& x) override {
    const Variable probs = softmax(matmul(x, weight_, false, true));  // [T, E]
    const std::int64_t T = x.size(0), E = experts();
    const std::vector<double> p = probs.data().to_vector<double>();
    std::vector<std::int32_t> ids;
    for (std::int64_t t = 0; t < T; ++t) {
      const std::vector<std::int32_t> row = choose(std::vector<double>(p.begin() + t * E, p.begin() + (t + 1) * E), t);
      ids.insert(ids.end(), row.begin(), row.end());
    }
    PlanParts parts;
    parts.chosen = from_vector(ids, {T, k()});
    parts.gates = shape_gates(gather_last(probs, parts.chosen));
    return make_routing_plan(parts, E);
  }
  GateSum gate_sum() const override { return GateSum::AtMostOne; }

 protected:
  // The k experts of one token, by decreasing probability (ties: the lower id), unless overridden.
  virtual std::vector<std::int32_t> choose(const std::vector<double>& p, std::int64_t /*t*/) {
    std::vector<std::int32_t> order(p.size());
    for (std::size_t e = 0; e < p.size(); ++e) order[e] = static_cast<std::int32_t>(e);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return p[a] > p[b]; });
    order.resize(static_cast<std::size_t>(k()));
    return order;
  }
  virtual Variable shape_gates(const Variable& g) { return g; }

 private:
  Variable weight_;
};

// Declares its gates sum to at most 1, then doubles them.
class OverOneRouter : public HostChoiceRouter {
 public:
  OverOneRouter(const RouterConfig& c, Generator& g) : HostChoiceRouter(c, g, "OverOneRouter") {}
  Variable shape_gates(const Variable& g) override { return g * 2.0; }
};

// Routes differently at 2 threads than at 1 (a reduction order that followed the thread count).
class ThreadDependentRouter : public HostChoiceRouter {
 public:
  ThreadDependentRouter(const RouterConfig& c, Generator& g) : HostChoiceRouter(c, g, "ThreadDependentRouter") {}
  std::vector<std::int32_t> choose(const std::vector<double>& p, std::int64_t t) override {
    std::vector<std::int32_t> row = HostChoiceRouter::choose(p, t);
    if (num_threads() > 1 && t % 7 == 3) row[0] = static_cast<std::int32_t>((row[0] + 1) % experts());  // k = 1
    return row;
  }
};

// A hand-written tie rule gone wrong: when the two best scores are equal, both slots take the
// lower id (the token then sits on one expert twice). With distinct scores it is plain top-2.
class TieDuplicateRouter : public HostChoiceRouter {
 public:
  TieDuplicateRouter(const RouterConfig& c, Generator& g) : HostChoiceRouter(c, g, "TieDuplicateRouter") {}
  std::vector<std::int32_t> choose(const std::vector<double>& p, std::int64_t t) override {
    std::vector<std::int32_t> row = HostChoiceRouter::choose(p, t);
    if (p[static_cast<std::size_t>(row[0])] == p[static_cast<std::size_t>(row[1])]) row[1] = row[0];
    return row;
  }
};

// Breaks ties by a counter that advances with every call: random scores never tie, so clause 4
// passes; tied ones route differently each time.
class TieCounterRouter : public HostChoiceRouter {
 public:
  TieCounterRouter(const RouterConfig& c, Generator& g) : HostChoiceRouter(c, g, "TieCounterRouter") {}
  std::vector<std::int32_t> choose(const std::vector<double>& p, std::int64_t t) override {
    std::vector<std::int32_t> row = HostChoiceRouter::choose(p, t);
    static std::int32_t calls = 0;
    if (t == 0) ++calls;
    if (p[0] == p[1]) row[0] = calls % 2;  // k = 1
    return row;
  }
};

// A stochastic router: in training mode it samples its k experts (Gumbel top-k: the k largest
// log p_e + G_e, G_e Gumbel noise) from a RandomStream in a host buffer (nn/random_stream.h), so a
// checkpoint saves where the noise is and a resumed step draws what the uninterrupted one would
// have. In evaluation mode it is plain top-k. HiddenStreamRouter draws the same noise from a
// Generator member instead, which checkpoints cannot see (topk's jitter did, once): the contract's
// resume clause must catch it.
class GumbelRouter : public HostChoiceRouter {
 public:
  GumbelRouter(const RouterConfig& c, Generator& g, const char* name = "GumbelRouter", bool hidden = false)
      : HostChoiceRouter(c, g, name), hidden_(hidden) {
    const std::uint64_t key = g.next_u32();
    if (hidden_) hidden_gen_ = Generator(key);
    else stream_ = RandomStream(register_buffer("noise_state", RandomStream::initial_state(key), BufferPlace::Host));
  }
  RoutingPlan route(const Variable& x) override {
    if (is_training()) gen_ = hidden_ ? hidden_gen_ : stream_.generator();
    RoutingPlan plan = HostChoiceRouter::route(x);
    if (is_training()) {
      if (hidden_) hidden_gen_ = gen_;
      else stream_.store(gen_);
    }
    return plan;
  }
  std::vector<std::int32_t> choose(const std::vector<double>& p, std::int64_t t) override {
    if (!is_training()) return HostChoiceRouter::choose(p, t);
    std::vector<double> score(p.size());
    for (std::size_t e = 0; e < p.size(); ++e) {
      const double u = gen_.next_uniform() + 0.5 / 16777216.0;  // in (0, 1): 24-bit uniform, centred
      score[e] = std::log(p[e]) - std::log(-std::log(u));
    }
    std::vector<std::int32_t> order(p.size());
    for (std::size_t e = 0; e < p.size(); ++e) order[e] = static_cast<std::int32_t>(e);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return score[a] > score[b]; });
    order.resize(static_cast<std::size_t>(k()));
    return order;
  }

 private:
  bool hidden_;
  RandomStream stream_;
  Generator hidden_gen_, gen_;
};
class HiddenStreamRouter : public GumbelRouter {
 public:
  HiddenStreamRouter(const RouterConfig& c, Generator& g) : GumbelRouter(c, g, "HiddenStreamRouter", true) {}
};

// Gates cut from the graph (a Tensor made a Variable again): they vary, yet the router never learns.
class DetachedRouter : public HostChoiceRouter {
 public:
  DetachedRouter(const RouterConfig& c, Generator& g) : HostChoiceRouter(c, g, "DetachedRouter") {}
  Variable shape_gates(const Variable& g) override { return Variable(g.data()); }
};

template <class R>
void register_once(const std::string& name) {
  static bool registered = false;
  if (registered) return;
  register_router(name, [](const RouterConfig& c, Generator& g) { return std::make_shared<R>(c, g); });
  registered = true;
}

}  // namespace

TEST_CASE("router contract: each new clause rejects a router broken for it, and passes an honest one") {
  register_once<HostChoiceRouter>("honest-host-choice");
  register_once<OverOneRouter>("broken-gate-sum");
  register_once<ThreadDependentRouter>("broken-threads");
  register_once<TieDuplicateRouter>("broken-tie-duplicate");
  register_once<TieCounterRouter>("broken-tie-counter");
  // The honest base passes every clause (gates p_t,e of a softmax: at most 1, and they learn).
  check_contract(contract("honest-host-choice", 2));
  check_contract(contract("honest-host-choice", 1));
  struct Case {
    const char* router;
    std::int64_t k;
    const char* clause;
  };
  for (const Case& c : {Case{"broken-gate-sum", 2, "gate sum:"}, Case{"broken-threads", 1, "threads:"},
                        Case{"broken-tie-duplicate", 2, "ties:"}, Case{"broken-tie-counter", 1, "ties:"}}) {
    INFO(c.router);
    const std::string failures = router_contract_failures(contract(c.router, c.k));
    CHECK(failures.find(c.clause) != std::string::npos);
    // Each breaks its own clause; the clauses that were there before pass it.
    CHECK(failures.find("gradcheck") == std::string::npos);
    CHECK(failures.find("checkpoint:") == std::string::npos);
  }
}

TEST_CASE("router contract: a router that never learns is caught (the k = 1 trap)") {
  // top-1 with renormalised gates: every gate is p/p = 1, so the router's gradient is exactly 0.
  // Gradcheck agrees with itself (0 = 0); the learning clause does not.
  RouterContract trap = contract("topk", 1, {{"gates", "softmax-topk-renorm"}, {"allow_constant_gates", "true"}});
  const std::string failures = router_contract_failures(trap);
  CHECK(failures.find("learns:") != std::string::npos);
  CHECK(failures.find("every kept gate is exactly 1 (k = 1 with renormalised gates") != std::string::npos);
  CHECK(failures.find("gradcheck") == std::string::npos);
  // Another cause gets its own diagnosis, not the k = 1 one.
  register_once<DetachedRouter>("detached-gates");
  const std::string detached = router_contract_failures(contract("detached-gates", 2));
  CHECK(detached.find("learns:") != std::string::npos);
  CHECK(detached.find("not connected to its parameters") != std::string::npos);
  CHECK(detached.find("k = 1") == std::string::npos);
  // Declared as not learning, it passes: that is what the option is for.
  trap.router_learns = false;
  check_contract(trap);
  // aux-free at k = 1 (no renormalisation, as Megatron-LM) and the shared-top1 scheme's router
  // (DeepSeekMoE: one shared expert, top-1 with the softmax probability as its gate) both learn.
  check_contract(contract("aux-free", 1));
  RouterContract shared_top1 = contract("topk", 1, {{"gates", "softmax-topk"}}, 4);
  shared_top1.layer.shared_experts = 1;
  check_contract(shared_top1);
}

TEST_CASE("router contract: top-k in its gate modes, with capacity and aux losses") {
  check_contract(contract("topk", 2));
  check_contract(contract("topk", 1, {{"gates", "softmax-topk"}, {"capacity_factor", "1"}, {"bias", "true"}}));
  check_contract(contract("topk", 2, {{"gates", "topk-softmax"}, {"load_balance", "0.1"}, {"z_loss", "0.01"}}));
  RouterContract equal = contract("topk", 2, {{"gates", "equal"}});
  equal.router_learns = false;  // constant gates: the router gets no gradient
  check_contract(equal);
}

TEST_CASE("router contract: routers that draw random numbers resume bitwise (topk's jitter, a sampling router)") {
  check_contract(contract("topk", 2, {{"jitter", "0.1"}}));
  check_contract(contract("topk", 1, {{"gates", "softmax-topk"}, {"jitter", "0.2"}, {"jitter_seed", "5"}}));
  register_once<GumbelRouter>("gumbel-sampling");
  register_once<HiddenStreamRouter>("broken-hidden-stream");
  check_contract(contract("gumbel-sampling", 2));
  // The same router with its noise in a Generator member: the checkpoint cannot restore it.
  const std::string failures = router_contract_failures(contract("broken-hidden-stream", 2));
  CHECK(failures.find("checkpoint: a resumed step is not bitwise the uninterrupted one") != std::string::npos);
  CHECK(failures.find("gradcheck") == std::string::npos);
}

TEST_CASE("router contract: expert choice") {
  check_contract(contract("expert-choice", 2));
  check_contract(contract("expert-choice", 1, {{"capacity_factor", "2"}}));
}

TEST_CASE("router contract: a broken router fails it, naming the broken clauses") {
  static bool registered = false;
  if (!registered) {
    register_router("broken-for-contract",
                    [](const RouterConfig& c, Generator&) { return std::make_shared<BrokenRouter>(c); });
    registered = true;
  }
  RouterContract c = contract("broken-for-contract", 1);
  c.router_learns = false;
  const std::string failures = router_contract_failures(c);
  CHECK(failures.find("in a sentinel slot") != std::string::npos);
  CHECK(failures.find("tokens_per_expert") != std::string::npos);
}

TEST_CASE("router contract: every built-in router has a case (a new one without a case fails here)") {
  // One plain case per built-in, by name; the cases above cover their options. A router added to
  // builtin_routers() (nn/moe/router.cpp) with no line here fails this test.
  const std::map<std::string, RouterContract> plain = {
      {"topk", contract("topk", 2)},
      {"expert-choice", contract("expert-choice", 2)},
      {"top-p", contract("top-p", 2, {{"threshold", "0.5"}})},
      {"aux-free", contract("aux-free", 2)},
      {"balanced", contract("balanced", 2)},
      {"relu", contract("relu", 2, {{"l1_init", "0.01"}})},
      {"token-hash", [] {  // routes by token id: the contract gives every layer ids; nothing learns
         RouterContract c = contract("token-hash", 2, {{"buckets", "50"}});
         c.router_learns = false, c.token_ids = true;
         return c;
       }()},
  };
  const std::vector<std::string> builtins = builtin_router_names();
  CHECK(builtins.size() >= 7);
  for (const std::string& name : builtins) {
    INFO(name);
    const auto it = plain.find(name);
    CHECK_MESSAGE(it != plain.end(), "built-in router '", name, "' has no contract case in this test");
    if (it != plain.end()) check_contract(it->second);
  }
}

TEST_CASE("router toolkit: the Switch balance loss and choice shares, by hand") {
  // Two tokens, two experts: token 0 chose experts 0 and 1, token 1 chose 0 twice (a sentinel, -1,
  // counts for none).
  const Tensor chosen = from_vector(std::vector<std::int32_t>{0, 1, 0, 0}, {2, 2});
  CHECK(choice_shares(chosen, 2, 1, DType::Float64).to_vector<double>() == std::vector<double>{0.75, 0.25});
  CHECK(choice_shares(chosen, 2, 2, DType::Float64).to_vector<double>() == std::vector<double>{0.5, 0.5, 1, 0});
  CHECK(choice_shares(from_vector(std::vector<std::int32_t>{0, -1}, {1, 2}), 2, 1, DType::Float64).to_vector<double>() ==
        std::vector<double>{0.5, 0});
  CHECK_THROWS_AS(choice_shares(chosen, 2, 3, DType::Float64), Error);
  // probs rows (.5, .5) and (1, 0): P = (.75, .25); 0.1 * 2 * (.75 * .75 + .25 * .25) = 0.125.
  const Variable probs(from_vector(std::vector<double>{0.5, 0.5, 1, 0}, {2, 2}), true);
  const Tensor f = choice_shares(chosen, 2, 1, DType::Float64).reshape({2});
  CHECK(switch_balance_loss(probs, f, 0.1).data().item<double>() == doctest::Approx(0.125));
  // Per sequence (each token its own): 0.1 * 2 * mean(.5 * .5 + .5 * .5, 1 * 1 + 0 * 0) = 0.15.
  const Variable per_sequence = switch_balance_loss(probs, choice_shares(chosen, 2, 2, DType::Float64), 0.1);
  CHECK(per_sequence.data().item<double>() == doctest::Approx(0.15));
  // d/dprobs: 0.1 * 2 * f_be / (tokens per sequence) / B = 0.1 * f_be here.
  per_sequence.backward();
  const std::vector<double> grad = probs.grad().to_vector<double>();
  CHECK(grad[0] == doctest::Approx(0.05));
  CHECK(grad[2] == doctest::Approx(0.1));
  CHECK(grad[3] == doctest::Approx(0.0));
  CHECK_THROWS_AS(switch_balance_loss(probs, zeros({3}, DType::Float64), 0.1), Error);
}

TEST_CASE("router toolkit: masks, sentinels, prefix sums, renormalisation, repeated columns") {
  const Tensor ids = from_vector(std::vector<std::int32_t>{2, -1, -2, 0}, {2, 2});
  CHECK(slot_mask(ids, DType::Float64).to_vector<double>() == std::vector<double>{1, 0, 0, 1});
  CHECK(ids_for_grouping(ids).to_vector<std::int32_t>() == std::vector<std::int32_t>{2, -1, -1, 0});
  CHECK(select_ids(ids, from_vector(std::vector<double>{0, 1, 1, 1}, {2, 2}), kUnusedSlot).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{-2, -1, -2, 0});
  CHECK(positive_mask(from_vector(std::vector<double>{-1, 0, 1e-200, 3}, {4})).to_vector<double>() ==
        std::vector<double>{0, 0, 1, 1});
  CHECK(exclusive_prefix_sums(from_vector(std::vector<double>{0.5, 0.25, 0.25, 1, 2, 3}, {2, 3})).to_vector<double>() ==
        std::vector<double>{0, 0.5, 0.75, 0, 1, 3});
  const Variable g(from_vector(std::vector<double>{1, 3, 2, 2}, {2, 2}));
  CHECK(renormalize_rows(g).data().to_vector<double>() == std::vector<double>{0.25, 0.75, 0.5, 0.5});
  CHECK(repeat_column(Variable(from_vector(std::vector<double>{1, 2}, {2, 1})), 3).data().to_vector<double>() ==
        std::vector<double>{1, 1, 1, 2, 2, 2});
}

TEST_CASE("router toolkit: make_routing_plan tells drops from unused slots and counts them apart") {
  // T = 3, k = 2, E = 3. Token 0: experts 0, 1; token 1: expert 0 and an unused slot; token 2:
  // expert 0 (dropped by the capacity 2, since tokens 0 and 1 came first) and expert 2, which the
  // keep mask drops.
  PlanParts parts;
  parts.chosen = from_vector(std::vector<std::int32_t>{0, 1, 0, kUnusedSlot, 0, 2}, {3, 2});
  parts.gates = Variable(from_vector(std::vector<double>{0.6, 0.4, 1.0, 0.3, 0.5, 0.5}, {3, 2}));
  parts.keep = from_vector(std::vector<double>{1, 1, 1, 1, 1, 0}, {3, 2});
  parts.capacity = 2;
  parts.variable_slots = true;
  const RoutingPlan plan = make_routing_plan(parts, 3);
  CHECK(plan.experts.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, 0, -2, -1, -1});
  CHECK(plan.gates.data().to_vector<double>() == std::vector<double>{0.6, 0.4, 1.0, 0, 0, 0});
  CHECK(plan.tokens_per_expert.to_vector<std::int32_t>() == std::vector<std::int32_t>{2, 1, 0});
  CHECK(plan.slots.to_vector<std::int32_t>() == std::vector<std::int32_t>{2, 1, 2});
  CHECK(plan.max_kept == 6);  // min(T*k, E*capacity)
  const auto m = plan.metrics();
  CHECK(m.at("dropped_fraction") == doctest::Approx(2.0 / 5));  // 5 used slots, 2 dropped
  CHECK(m.at("mean_slots") == doctest::Approx(5.0 / 3));
  CHECK(m.at("capacity") == 2.0);
  CHECK(m.at("load_max_over_mean") == doctest::Approx(2.0 / 1.0));
  CHECK_THROWS_AS(make_routing_plan(PlanParts{}, 3), Error);
}

TEST_CASE("router toolkit: the three capacity orders keep different assignments; renormalize_kept") {
  // T = 4, k = 2, E = 2, capacity 2: each expert is chosen 4 times and keeps 2.
  //   token:    0          1          2          3
  //   chosen:   0, 1       0, 1       1, 0       0, 1
  //   gates:    .6, .4     .7, .3     .8, .2     .9, .1
  auto plan_for = [](CapacityOrder order, bool renormalize) {
    PlanParts parts;
    parts.chosen = from_vector(std::vector<std::int32_t>{0, 1, 0, 1, 1, 0, 0, 1}, {4, 2});
    parts.gates = Variable(from_vector(std::vector<double>{0.6, 0.4, 0.7, 0.3, 0.8, 0.2, 0.9, 0.1}, {4, 2}));
    parts.capacity = 2;
    parts.capacity_order = order;
    parts.renormalize_kept = renormalize;
    return make_routing_plan(parts, 2);
  };
  using V = std::vector<std::int32_t>;
  // Tokens: the first two tokens fill both experts; tokens 2 and 3 lose everything.
  CHECK(plan_for(CapacityOrder::Tokens, false).experts.to_vector<std::int32_t>() == V{0, 1, 0, 1, -1, -1, -1, -1});
  // Choices: expert 1's first choices (token 2) come before any second choice: it keeps token 2's
  // first and token 0's second, and drops token 1's second.
  CHECK(plan_for(CapacityOrder::Choices, false).experts.to_vector<std::int32_t>() == V{0, 1, 0, -1, 1, -1, -1, -1});
  // Probability: expert 0 keeps .9 and .7, expert 1 keeps .8 and .4.
  const RoutingPlan by_p = plan_for(CapacityOrder::Probability, false);
  CHECK(by_p.experts.to_vector<std::int32_t>() == V{-1, 1, 0, -1, 1, -1, 0, -1});
  CHECK(by_p.gates.data().to_vector<double>() == std::vector<double>{0, 0.4, 0.7, 0, 0.8, 0, 0.9, 0});
  CHECK(by_p.tokens_per_expert.to_vector<std::int32_t>() == V{2, 2});
  CHECK(by_p.groups->wanted.to_vector<std::int32_t>() == V{4, 4});  // counted before the capacity
  // The sorted rows the layer uses follow the kept ids, grouped by expert in token order.
  CHECK(by_p.groups->order.to_vector<std::int32_t>() == V{2, 6, 1, 4, 0, 3, 5, 7});
  // renormalize_kept: each token's one kept gate becomes 1; a token with nothing kept stays at 0
  // (no 0 / 0), and the gradient flows through the division.
  CHECK(plan_for(CapacityOrder::Probability, true).gates.data().to_vector<double>() ==
        std::vector<double>{0, 1, 1, 0, 1, 0, 1, 0});
  CHECK(plan_for(CapacityOrder::Tokens, true).gates.data().to_vector<double>() ==
        std::vector<double>{0.6, 0.4, 0.7, 0.3, 0, 0, 0, 0});
  CHECK(std::string(capacity_order_name(CapacityOrder::Choices)) == "choices");
}

TEST_CASE("router contract: top-k forced to a balanced routing (the benchmarking mode)") {
  check_contract(contract("topk", 2, {{"forced", "balanced"}}));
  check_contract(contract("topk", 1, {{"forced", "balanced"}, {"gates", "softmax-topk"}, {"load_balance", "0.01"}}));
}

TEST_CASE("router contract: top-k's drop orders and renormalisation over the kept gates") {
  for (const char* order : {"tokens", "choices", "probability"}) {
    INFO(order);
    check_contract(contract("topk", 2, {{"capacity_factor", "0.5"}, {"drop_order", order}}));
    check_contract(contract("topk", 2, {{"capacity_factor", "0.75"}, {"drop_order", order}, {"renormalize_kept", "true"}}));
  }
  // Without a capacity the options would do nothing: refused, naming what they need.
  Generator gen(0);
  RouterConfig rc;
  rc.d = 4, rc.experts = 4, rc.k = 2, rc.options = {{"drop_order", "choices"}};
  CHECK_THROWS_WITH_AS(make_router("topk", rc, gen), doctest::Contains("capacity_factor"), Error);
  rc.options = {{"capacity_factor", "1"}, {"drop_order", "random"}};
  CHECK_THROWS_AS(make_router("topk", rc, gen), Error);
}

TEST_CASE("router contract: top-p, aux-free, balanced, and shared experts beside any router") {
  check_contract(contract("top-p", 4, {{"threshold", "0.5"}, {"entropy_loss", "0.01"}, {"load_balance", "0.1"}}));
  check_contract(contract("top-p", 2, {{"threshold", "0.9"}, {"gates", "renorm"}, {"bias", "true"}}));
  check_contract(contract("aux-free", 2, {{"update_rate", "0.01"}}));
  check_contract(contract("aux-free", 1, {{"score", "softmax"}, {"renorm", "false"}}));
  // topk's Switch loss per sequence (balance_scope; the contract's inputs are one sequence).
  check_contract(contract("topk", 2, {{"load_balance", "0.01"}, {"balance_scope", "sequence"}}));
  // Null (zero-computation) experts beside the real ones.
  check_contract(contract("topk", 2, {{"null_experts", "2"}, {"load_balance", "0.01"}}));
  // Copy (identity) experts beside null ones: their gate times x joins the output.
  check_contract(contract("topk", 2, {{"null_experts", "1"}, {"copy_experts", "2"}, {"load_balance", "0.01"}}));
  check_contract(contract("topk", 2, {{"constant_experts", "2"}, {"copy_experts", "1"}, {"load_balance", "0.01"}}));
  // DeepSeek-V3's router in full: 2 groups of 4, one group per token, scaled gates, seq_aux.
  check_contract(contract("aux-free", 2, {{"groups", "2"}, {"topk_groups", "1"}, {"scale", "2.5"}, {"seq_aux", "0.01"}},
                          8));
  check_contract(contract("aux-free", 2, {{"groups", "2"}, {"topk_groups", "1"}, {"group_score", "k-per-group"}}, 8));
  check_contract(contract("balanced", 1));
  check_contract(contract("balanced", 2, {{"balance_eval", "true"}}));
  check_contract(contract("balanced", 2, {{"assignment", "exact"}}));
  check_contract(contract("balanced", 1, {{"assignment", "sinkhorn"}}));
  // Hash Layers: experts fixed by the token id (the contract gives every layer ids); nothing learns.
  for (std::int64_t k : {1, 2}) {
    RouterContract hashed = contract("token-hash", k, {{"buckets", "50"}});
    hashed.router_learns = false;
    hashed.token_ids = true;
    check_contract(hashed);
  }
  RouterContract shared = contract("topk", 2, {}, 8);  // fine-grained: 8 experts of width 5
  shared.layer.shared_experts = 2;
  check_contract(shared);
  shared.layer.router = "top-p";
  shared.layer.shared_ffn = 3;
  check_contract(shared);
}
