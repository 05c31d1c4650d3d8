// nn/moe/token_hash_router.cpp — Hash Layers' random hash routing (see the header).
#include "nn/moe/token_hash_router.h"

#include <numeric>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/random.h"
#include "nn/moe/router_toolkit.h"

namespace moelab {

namespace {
constexpr const char* kScheme = "TokenHashRouter";
constexpr std::int64_t kDefaultBuckets = 65536;
}  // namespace

TokenHashRouter::TokenHashRouter(std::int64_t d, std::int64_t experts, std::int64_t k, std::int64_t buckets,
                                 Generator& gen, DType dtype)
    : Router(d, experts, k, kScheme), dtype_(dtype) {
  MOELAB_CHECK(is_floating(dtype), kScheme, "needs a float dtype for its gates, got ", dtype);
  MOELAB_CHECK(buckets >= 1 && buckets <= (std::int64_t{1} << 24), kScheme, "option buckets must be in [1, 2^24], got ",
               buckets);
  MOELAB_CHECK(experts <= (std::int64_t{1} << 31) - 1, kScheme, "too many experts: ", experts);
  // Row v: the first k entries of a random permutation of the experts (partial Fisher-Yates).
  std::vector<std::int32_t> table(static_cast<std::size_t>(buckets * k));
  std::vector<std::int32_t> perm(static_cast<std::size_t>(experts));
  for (std::int64_t v = 0; v < buckets; ++v) {
    std::iota(perm.begin(), perm.end(), 0);
    for (std::int64_t j = 0; j < k; ++j) {
      const auto pick = j + static_cast<std::int64_t>(gen.next_below(static_cast<std::uint32_t>(experts - j)));
      std::swap(perm[static_cast<std::size_t>(j)], perm[static_cast<std::size_t>(pick)]);
      table[static_cast<std::size_t>(v * k + j)] = perm[static_cast<std::size_t>(j)];
    }
  }
  table_ = register_buffer("table", from_vector(table, {buckets, k}));
}

RoutingPlan TokenHashRouter::route(const Variable& x) {
  check_input(x, kScheme);
  const std::int64_t T = x.size(0);
  const Tensor& ids = token_ids();
  MOELAB_CHECK(ids.defined(), kScheme,
               "routes on token ids, and none were given: a Decoder passes its input ids to every MoE layer; a "
               "layer used on its own needs MoELayer::set_token_ids(ids) (int32, one per row of x) first");
  MOELAB_CHECK(ids.numel() == T && ids.dtype() == DType::Int32 && ids.device() == x.device(), kScheme,
               "the token ids (", ids.dtype(), " ", ids.shape(), " on ", ids.device(),
               ") must be int32, one per row of x (", T, ") and on x's device (", x.device(), ")");
  PlanParts parts;
  parts.chosen = kernels::index_select(table_, ids.reshape({T}));  // [T, k]; an id past the table is an index error
  parts.gates = Variable(full({T, k()}, 1.0 / static_cast<double>(k()), x.dtype(), x.device()));
  return make_routing_plan(parts, experts());
}

std::shared_ptr<Router> make_token_hash_router(const RouterConfig& config, Generator& gen) {
  check_router_options(config, {"buckets"}, kScheme);
  return std::make_shared<TokenHashRouter>(config.d, config.experts, config.k,
                                           router_option_int(config, "buckets", kDefaultBuckets, kScheme), gen,
                                           config.dtype);
}

}  // namespace moelab
