// nn/moe/token_hash_router.cpp — Hash Layers' random hash routing (see the header).
#include "nn/moe/token_hash_router.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
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

std::vector<std::int32_t> balanced_hash_table(const std::vector<double>& frequency, std::int64_t buckets,
                                              std::int64_t experts, std::int64_t k) {
  MOELAB_CHECK(buckets >= 1 && experts >= 1 && k >= 1 && k <= experts, kScheme, "balanced hash: need buckets >= 1 "
               "and 1 <= k <= experts, got ", buckets, ", ", experts, ", ", k);
  MOELAB_CHECK(static_cast<std::int64_t>(frequency.size()) <= buckets, kScheme, "balanced hash: ", frequency.size(),
               " frequencies for a table of ", buckets, " ids (option buckets)");
  for (std::size_t v = 0; v < frequency.size(); ++v)
    MOELAB_CHECK(std::isfinite(frequency[v]) && frequency[v] >= 0, kScheme, "balanced hash: the frequency of id ",
                 v, " is ", frequency[v], " (finite and >= 0 needed)");
  auto f = [&](std::int64_t v) { return v < static_cast<std::int64_t>(frequency.size()) ? frequency[v] : 0.0; };
  std::vector<std::int64_t> order(static_cast<std::size_t>(buckets));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return f(a) > f(b); });
  std::vector<double> load(static_cast<std::size_t>(experts), 0.0);
  std::vector<std::int64_t> count(static_cast<std::size_t>(experts), 0);
  std::vector<std::int32_t> table(static_cast<std::size_t>(buckets * k));
  std::vector<char> used(static_cast<std::size_t>(experts), 0);
  for (std::int64_t v : order) {
    for (std::int64_t j = 0; j < k; ++j) {
      std::int64_t best = -1;
      // An id with no count adds no load: it goes to the expert with the fewest ids, so that ids
      // never seen in training spread evenly instead of all landing on the least loaded expert.
      const bool unseen = f(v) == 0.0;
      for (std::int64_t e = 0; e < experts; ++e) {
        if (used[e]) continue;
        if (best < 0 || (unseen ? count[e] < count[best]
                                : load[e] < load[best] || (load[e] == load[best] && count[e] < count[best])))
          best = e;
      }
      used[best] = 1;
      load[best] += f(v) / static_cast<double>(k);
      ++count[best];
      table[static_cast<std::size_t>(v * k + j)] = static_cast<std::int32_t>(best);
    }
    for (std::int64_t j = 0; j < k; ++j) used[table[static_cast<std::size_t>(v * k + j)]] = 0;
  }
  return table;
}

std::vector<double> read_token_frequencies(const std::string& path) {
  std::ifstream in(path);
  MOELAB_CHECK(in.good(), kScheme, "cannot read the frequencies file '", path, "'");
  std::vector<double> out;
  for (std::string word; in >> word;) {
    char* end = nullptr;
    const double v = std::strtod(word.c_str(), &end);
    MOELAB_CHECK(end != word.c_str() && *end == '\0' && std::isfinite(v) && v >= 0, kScheme, "the frequencies file '",
                 path, "': entry ", out.size(), " ('", word, "') is not a finite number >= 0");
    out.push_back(v);
  }
  MOELAB_CHECK(in.eof(), kScheme, "the frequencies file '", path, "' could not be read to its end");
  return out;
}

void TokenHashRouter::set_frequencies(const std::vector<double>& frequency) {
  const std::vector<std::int32_t> table = balanced_hash_table(frequency, table_.size(0), experts(), k());
  kernels::copy(table_, from_vector(table, table_.shape(), table_.device()));  // in place: the buffer's storage
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
  check_router_options(config, {"buckets", "frequencies"}, kScheme);
  auto router = std::make_shared<TokenHashRouter>(config.d, config.experts, config.k,
                                                  router_option_int(config, "buckets", kDefaultBuckets, kScheme), gen,
                                                  config.dtype);
  if (config.options.count("frequencies")) router->set_frequencies(read_token_frequencies(config.options.at("frequencies")));
  return router;
}

}  // namespace moelab
