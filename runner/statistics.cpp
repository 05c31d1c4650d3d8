// runner/statistics.cpp — see statistics.h.
#include "runner/statistics.h"

#include <cmath>

#include "core/error.h"

namespace moelab {

Interval wilson_interval(std::int64_t successes, std::int64_t trials, double z) {
  MOELAB_CHECK(trials >= 1 && successes >= 0 && successes <= trials && z > 0, "wilson_interval",
               "need 0 <= successes <= trials, trials >= 1 and z > 0, got ", successes, " of ", trials, ", z ", z);
  const double n = static_cast<double>(trials), p = static_cast<double>(successes) / n, z2 = z * z;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = z / (1 + z2 / n) * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  // At k = 0 and k = n the bound is exactly 0 or 1 (the formula gives it up to rounding).
  return {successes == 0 ? 0.0 : centre - half, successes == trials ? 1.0 : centre + half};
}

double paired_sign_flip_p(const std::vector<double>& a, const std::vector<double>& b) {
  MOELAB_CHECK(a.size() == b.size() && !a.empty() && a.size() <= 24, "paired_sign_flip_p",
               "need one value per seed for both models, 1 to 24 seeds, got ", a.size(), " and ", b.size());
  const std::size_t n = a.size();
  std::vector<double> d(n);
  double observed = 0;
  for (std::size_t i = 0; i < n; ++i) {
    d[i] = std::fabs(a[i] - b[i]) < 1e-12 ? 0.0 : a[i] - b[i];
    observed += d[i];
  }
  observed = std::fabs(observed);
  std::int64_t as_extreme = 0;
  const std::uint32_t patterns = 1u << n;
  for (std::uint32_t signs = 0; signs < patterns; ++signs) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += (signs >> i & 1u) ? -d[i] : d[i];
    if (std::fabs(s) >= observed - 1e-12) ++as_extreme;  // ties with the observed sum count
  }
  return static_cast<double>(as_extreme) / static_cast<double>(patterns);
}

double median_range_confidence(std::int64_t n) {
  MOELAB_CHECK(n >= 1 && n <= 62, "median_range_confidence", "n must be in [1, 62], got ", n);
  return 1.0 - 2.0 / std::ldexp(1.0, static_cast<int>(n));
}

double smallest_sign_flip_p(std::int64_t n) {
  MOELAB_CHECK(n >= 1 && n <= 62, "smallest_sign_flip_p", "n must be in [1, 62], got ", n);
  return n == 1 ? 1.0 : 2.0 / std::ldexp(1.0, static_cast<int>(n));
}

}  // namespace moelab
