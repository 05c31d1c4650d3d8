// tests/test_util.h — helpers shared by the tests: comparisons of values, and the message a call throws.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace moelab::testing {

// Sets the thread count for a scope and restores the one it found, also when a REQUIRE leaves early:
//   { testing::ScopedThreads four(4); REQUIRE(cpu::element_threads(n) > 1); ...the parallel run... }
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : previous_(num_threads()) { set_num_threads(n); }
  ~ScopedThreads() { set_num_threads(previous_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int previous_;
};

// The message of the moelab::Error that f throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Any float tensor's values as doubles (float32 -> float64 is exact).
inline std::vector<double> to_doubles(const Tensor& t) { return t.to(DType::Float64).to_vector<double>(); }

// Largest |got - want| / (1 + |want|): an absolute error near 0, a relative one for large values.
// Equal values (including equal infinities) and NaN-against-NaN count as exact; any other NaN or
// infinity in either makes the error infinite, so a comparison can never pass by ignoring one.
inline double max_error(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
    const double err = std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i]));
    worst = std::isfinite(err) ? std::max(worst, err) : std::numeric_limits<double>::infinity();
  }
  return worst;
}

inline double max_error(const Tensor& got, const std::vector<double>& want) { return max_error(to_doubles(got), want); }

}  // namespace moelab::testing
