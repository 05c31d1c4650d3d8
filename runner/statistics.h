// runner/statistics.h — the two tests the reports state beside mean +- std over seeds:
// an interval for a rate (how many seeds out of n did something) and a paired comparison of two
// models trained on the same seeds.
//
// Wilson's score interval (E. B. Wilson, "Probable inference, the law of succession, and
// statistical inference", JASA 22, 1927) for k successes in n trials: the p whose normal test
// does not reject k/n, at the given z (1.96: 95%). Unlike k/n +- z sqrt(p(1-p)/n) it stays inside
// [0, 1] and is not empty at k = 0 or k = n, which is where a few seeds land:
//   wilson_interval(2, 9)  ->  [0.063, 0.547]      wilson_interval(0, 3)  ->  [0, 0.561]
//
// The range of n values as an interval for their median: for n independent draws of a continuous
// quantity, [min, max] holds the true median with probability 1 - 2 / 2^n (0.75 at 3 seeds, 0.998
// at 10). For a capacity that takes a few discrete values it is at least that.
//   median_range_confidence(3)  ->  0.75
//
// The paired sign-flip test (Fisher's randomisation test on paired differences): with d_i = a_i -
// b_i over the seeds both models ran, and no difference between the models, every sign pattern of
// the d_i is as likely; the two-sided p is the share of the 2^n patterns whose |mean| is at least
// the observed one. Exact, no normality assumed, and honest about few seeds: with n seeds the
// smallest p it can give is 2 / 2^n (0.25 at n = 3, 0.002 at n = 10), so a 3-seed comparison can
// never be "significant at 0.05", which the summaries then say.
//   paired_sign_flip_p({0.9, 0.8, 0.7}, {0.5, 0.5, 0.5})  ->  0.25
#pragma once

#include <cstdint>
#include <vector>

namespace moelab {

struct Interval {
  double low = 0, high = 0;
};
// 0 <= successes <= trials, trials >= 1, z > 0 (moelab::Error otherwise).
Interval wilson_interval(std::int64_t successes, std::int64_t trials, double z = 1.959963984540054);

// a, b: one value per seed, the same seeds in the same order; 1 <= n <= 24 (moelab::Error
// otherwise). Differences within 1e-12 of 0 count as 0 (their sign does not matter).
double paired_sign_flip_p(const std::vector<double>& a, const std::vector<double>& b);
// See above: 1 - 2 / 2^n for n >= 1 (0 for n = 1: one value says nothing about the spread).
double median_range_confidence(std::int64_t n);

// The smallest p the test can give with n pairs: 2 / 2^n (1 for n = 1).
double smallest_sign_flip_p(std::int64_t n);

}  // namespace moelab
