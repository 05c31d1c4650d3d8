// tests/test_statistics.cpp — runner/statistics.h against values computed independently
// (Python, from the formulas in the header): Wilson intervals at the edges and inside, the exact
// sign-flip p-value, the floor a few seeds put on it, and bad input refused.
#include <doctest/doctest.h>

#include <vector>

#include "core/error.h"
#include "runner/statistics.h"

using namespace moelab;

TEST_CASE("wilson_interval: inside [0, 1], not empty at 0 of n or n of n, as the formula gives") {
  const Interval a = wilson_interval(2, 9);
  CHECK(a.low == doctest::Approx(0.06322510711784673).epsilon(1e-12));
  CHECK(a.high == doctest::Approx(0.5474110308930111).epsilon(1e-12));
  const Interval none = wilson_interval(0, 3);
  CHECK(none.low == 0.0);
  CHECK(none.high == doctest::Approx(0.5614970317550455).epsilon(1e-12));
  const Interval all = wilson_interval(3, 3);
  CHECK(all.low == doctest::Approx(0.43850296824495455).epsilon(1e-12));
  CHECK(all.high == 1.0);
  const Interval half = wilson_interval(5, 10);
  CHECK(half.low == doctest::Approx(0.236593090512564).epsilon(1e-12));
  CHECK(half.high == doctest::Approx(0.7634069094874361).epsilon(1e-12));
  CHECK_THROWS_AS(wilson_interval(4, 3), Error);
  CHECK_THROWS_AS(wilson_interval(0, 0), Error);
  CHECK_THROWS_AS(wilson_interval(1, 2, 0.0), Error);
}

TEST_CASE("paired_sign_flip_p: the exact share of sign patterns at least as extreme") {
  CHECK(paired_sign_flip_p({0.9, 0.8, 0.7}, {0.5, 0.5, 0.5}) == 0.25);  // all 3 up: 2 of 8 patterns
  CHECK(paired_sign_flip_p({1, 2, 3, 4, 5, 6}, {0, 0, 0, 0, 0, 7}) == doctest::Approx(0.09375));
  CHECK(paired_sign_flip_p({0.3, 0.1, 0.2, 0.4, 0.5, 0.1, 0.2, 0.3, 0.9, 0.2}, std::vector<double>(10, 0.2)) ==
        doctest::Approx(0.1875));
  CHECK(paired_sign_flip_p({1, 1}, {1, 1}) == 1.0);  // no difference at all
  CHECK(smallest_sign_flip_p(3) == 0.25);
  CHECK(smallest_sign_flip_p(10) == doctest::Approx(0.001953125));
  CHECK(smallest_sign_flip_p(1) == 1.0);
  CHECK_THROWS_AS(paired_sign_flip_p({1, 2}, {1}), Error);
  CHECK_THROWS_AS(paired_sign_flip_p({}, {}), Error);
}
