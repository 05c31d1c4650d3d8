// tasks/common/memory_check.cpp — see memory_check.h.
#include "tasks/common/memory_check.h"

#include <unistd.h>

#include <cstdio>

#include "runner/settings.h"

namespace moelab {

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

void check_memory_bound(const std::string& what, double bytes, const std::string& how) {
  const double memory = physical_memory_bytes();
  if (memory <= 0.0 || bytes <= memory) return;
  char text[160];
  std::snprintf(text, sizeof text, "needs at least %.3g GB", bytes / 1e9);
  char machine[96];
  std::snprintf(machine, sizeof machine, "more than this machine's %.3g GB", memory / 1e9);
  throw UsageError(what + ": " + text + " (" + how + "), " + machine);
}

double decoder_step_bytes_lower_bound(const ModelSpec& m, double tokens, std::int64_t vocab) {
  const double d = static_cast<double>(m.d), f = static_cast<double>(m.ffn > 0 ? m.ffn : m.d);
  const double experts = m.moe() ? static_cast<double>(m.experts) : 1.0;
  const double active = m.moe() ? static_cast<double>(m.k) : 1.0;
  const double ffn_matrices = is_gated(m.activation) ? 3.0 : 2.0;
  const double parameters =
      static_cast<double>(m.layers) * (4.0 * d * d + experts * ffn_matrices * d * f + (m.moe() ? experts * d : 0.0)) +
      2.0 * static_cast<double>(vocab) * d;
  const double per_position = static_cast<double>(m.layers) * (4.0 * d + active * f) + 2.0 * static_cast<double>(vocab);
  return 16.0 * parameters + 4.0 * tokens * per_position;
}

}  // namespace moelab
