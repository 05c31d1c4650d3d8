// tests/test_routing_analysis.cpp — MaxVio, token-id specialisation and routing drift
// (nn/moe/routing_analysis.h) on hand-counted cases, and as a MoE layer's metrics.
//   - max_violation: balanced 0, one expert taking all E - 1, a hand case 0.5
//   - token_specialisation: ids seen once left out, dropped slots count for no expert, weighted by
//     assignments; a hash router (the id decides) gives 1 in a MoE layer, a fresh topk router less
//   - routing_drift: slots compared as sets (a swap is no move), a changed set is one move
#include <doctest/doctest.h>

#include <vector>

#include "core/factories.h"
#include "nn/moe/moe_layer.h"
#include "nn/moe/routing_analysis.h"
#include "nn/moe/token_hash_router.h"

using namespace moelab;

TEST_CASE("max_violation is DeepSeek's MaxVio: max load / mean load - 1") {
  CHECK(max_violation({2, 2, 2, 2}) == 0.0);
  CHECK(max_violation({4, 0, 0, 0}) == 3.0);
  CHECK(max_violation({3, 1, 2, 2}) == doctest::Approx(0.5));
  CHECK(max_violation({0, 0}) == 0.0);
  CHECK(max_violation({}) == 0.0);
}

TEST_CASE("token_specialisation: the share of each id's assignments in its k most used experts (hand counts)") {
  // k = 1, E = 4. id 1: experts 0, 0 (share 1); id 2: 1, 2, 1 (2 of 3); id 3 seen once: left out.
  const std::vector<std::int32_t> ids{1, 1, 2, 2, 2, 3};
  CHECK(token_specialisation(ids, {0, 0, 1, 2, 1, 3}, 1, 4) == doctest::Approx((2.0 + 2.0) / (2.0 + 3.0)));
  // A dropped slot (-1) counts for no expert: id 2 keeps 1, 1 of its three tokens.
  CHECK(token_specialisation(ids, {0, 0, 1, -1, 1, 3}, 1, 4) == doctest::Approx(1.0));
  // k = 2: id 5's two tokens use {0, 1} and {1, 2}: its top two hold 3 of 4 assignments.
  CHECK(token_specialisation({5, 5}, {0, 1, 1, 2}, 2, 4) == doctest::Approx(0.75));
  CHECK(token_specialisation({7}, {0}, 1, 4) == -1.0);  // nothing seen twice
  CHECK_THROWS_WITH(token_specialisation({7, 7}, {0}, 1, 4), doctest::Contains("k = 1 entries per token id"));
}

TEST_CASE("routing_drift: the share of tokens whose expert set changed") {
  CHECK(routing_drift({0, 1, 2, 3}, {1, 0, 2, 3}, 2) == 0.0);  // token 0's experts swapped places
  CHECK(routing_drift({0, 1, 2, 3}, {1, 0, 2, 0}, 2) == 0.5);
  CHECK(routing_drift({0, 1, 2}, {2, 1, 0}, 1) == doctest::Approx(2.0 / 3.0));
  CHECK_THROWS_WITH(routing_drift({0, 1, 2}, {0, 1}, 1), doctest::Contains("same T"));
}

TEST_CASE("a MoE layer reports token_specialisation and max_violation: 1 for a hash router, less for topk") {
  Generator gen(2);
  const Tensor x = normal({2, 16, 8}, 0.0, 1.0, gen);
  std::vector<std::int32_t> id_values;
  for (int i = 0; i < 32; ++i) id_values.push_back(i % 5);  // five ids, each about six times
  const Tensor ids = from_vector(id_values, {2, 16});

  MoEConfig hash{.d = 8, .experts = 4, .k = 1, .router = "token-hash"};
  hash.router_options = {{"buckets", "8"}};
  MoELayer by_id(hash, gen);
  by_id.set_token_ids(ids);
  by_id.forward(Variable(x));
  const auto m = by_id.last_metrics();
  REQUIRE(m.count("token_specialisation"));
  CHECK(m.at("token_specialisation") == 1.0);
  REQUIRE(m.count("max_violation"));
  CHECK(m.at("max_violation") == doctest::Approx(m.at("load_max_over_mean") - 1.0));

  MoELayer topk(MoEConfig{.d = 8, .experts = 4, .k = 1}, gen);
  topk.set_token_ids(ids);
  topk.forward(Variable(x));
  const double s = topk.last_metrics().at("token_specialisation");
  CHECK(s < 1.0);   // random inputs: an id's tokens go to different experts
  CHECK(s >= 0.25);  // its most used expert holds at least 1 / E of them
  // Without token ids there is nothing to report.
  MoELayer anonymous(MoEConfig{.d = 8, .experts = 4, .k = 1}, gen);
  anonymous.forward(Variable(x));
  CHECK(anonymous.last_metrics().count("token_specialisation") == 0);
}
