// tests/test_router_contract.cpp — every built-in routing scheme against tests/router_contract.h
// (plan invariants, the MoE layer against a per-token loop, gradcheck, determinism, checkpoint
// round trip), in the configurations people use; plus the toolkit's helpers
// (nn/moe/router_toolkit.h) on hand-made inputs, and a contract that must fail on a broken router.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/factories.h"
#include "nn/moe/router_toolkit.h"
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

}  // namespace

TEST_CASE("router contract: top-k in its gate modes, with capacity and aux losses") {
  check_contract(contract("topk", 2));
  check_contract(contract("topk", 1, {{"gates", "softmax-topk"}, {"capacity_factor", "1"}, {"bias", "true"}}));
  check_contract(contract("topk", 2, {{"gates", "topk-softmax"}, {"load_balance", "0.1"}, {"z_loss", "0.01"}}));
  RouterContract equal = contract("topk", 2, {{"gates", "equal"}});
  equal.router_learns = false;  // constant gates: the router gets no gradient
  check_contract(equal);
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

TEST_CASE("router contract: top-p, aux-free, balanced, and shared experts beside any router") {
  check_contract(contract("top-p", 4, {{"threshold", "0.5"}, {"entropy_loss", "0.01"}, {"load_balance", "0.1"}}));
  check_contract(contract("top-p", 2, {{"threshold", "0.9"}, {"gates", "renorm"}, {"bias", "true"}}));
  check_contract(contract("aux-free", 2, {{"update_rate", "0.01"}}));
  check_contract(contract("aux-free", 1, {{"score", "softmax"}, {"renorm", "false"}}));
  check_contract(contract("balanced", 1));
  check_contract(contract("balanced", 2, {{"balance_eval", "true"}}));
  RouterContract shared = contract("topk", 2, {}, 8);  // fine-grained: 8 experts of width 5
  shared.layer.shared_experts = 2;
  check_contract(shared);
  shared.layer.router = "top-p";
  shared.layer.shared_ffn = 3;
  check_contract(shared);
}
