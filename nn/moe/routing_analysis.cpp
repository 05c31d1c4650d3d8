// nn/moe/routing_analysis.cpp — MaxVio, token-id specialisation, routing drift (see the header).
#include "nn/moe/routing_analysis.h"

#include <algorithm>
#include <functional>
#include <map>

#include "core/error.h"

namespace moelab {

double max_violation(const std::vector<double>& counts) {
  double total = 0, top = 0;
  for (double c : counts) total += c, top = std::max(top, c);
  if (counts.empty() || total <= 0) return 0.0;
  return top / (total / static_cast<double>(counts.size())) - 1.0;
}

double token_specialisation(const std::vector<std::int32_t>& ids, const std::vector<std::int32_t>& experts,
                            std::int64_t k, std::int64_t num_experts, std::int64_t min_count) {
  MOELAB_CHECK(k >= 1 && num_experts >= 1 && experts.size() == ids.size() * static_cast<std::size_t>(k),
               "token_specialisation", "experts must hold k = ", k, " entries per token id (", ids.size(),
               " ids), got ", experts.size());
  std::map<std::int32_t, std::pair<std::int64_t, std::vector<std::int64_t>>> per_id;  // id -> (tokens, per expert)
  for (std::size_t t = 0; t < ids.size(); ++t) {
    auto& [tokens, counts] = per_id[ids[t]];
    if (counts.empty()) counts.assign(static_cast<std::size_t>(num_experts), 0);
    ++tokens;
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int32_t e = experts[t * static_cast<std::size_t>(k) + static_cast<std::size_t>(j)];
      if (e >= 0 && e < num_experts) ++counts[static_cast<std::size_t>(e)];
    }
  }
  double in_top = 0, kept = 0;
  for (auto& [id, entry] : per_id) {
    auto& [tokens, counts] = entry;
    if (tokens < min_count) continue;
    std::int64_t all = 0;
    for (std::int64_t c : counts) all += c;
    std::sort(counts.begin(), counts.end(), std::greater<>());
    std::int64_t top = 0;
    for (std::int64_t j = 0; j < std::min<std::int64_t>(k, num_experts); ++j) top += counts[static_cast<std::size_t>(j)];
    in_top += static_cast<double>(top);
    kept += static_cast<double>(all);
  }
  return kept > 0 ? in_top / kept : -1.0;
}

double routing_drift(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b, std::int64_t k) {
  MOELAB_CHECK(k >= 1 && a.size() == b.size() && a.size() % static_cast<std::size_t>(k) == 0, "routing_drift",
               "both routings must be [T * ", k, "] of the same T, got ", a.size(), " and ", b.size());
  const std::size_t T = a.size() / static_cast<std::size_t>(k);
  if (T == 0) return 0.0;
  std::size_t moved = 0;
  for (std::size_t t = 0; t < T; ++t) {
    std::vector<std::int32_t> x(a.begin() + t * k, a.begin() + (t + 1) * k), y(b.begin() + t * k, b.begin() + (t + 1) * k);
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    if (x != y) ++moved;
  }
  return static_cast<double>(moved) / static_cast<double>(T);
}

}  // namespace moelab
