// tasks/softmoe_l2norm/l2norm_claims.h — the implicit-bias paper's claims about learning ||x||_2
// (Theorem 1 and Appendix C, Figure 4), judged from a finished softmoe-l2norm folder's results.csv
// on runner/claims.h's scale, per tokenisation (5x2, 2x5):
//   Thm. 1   one expert does not lower the loss: n = 1's final loss / the best constant's, mean
//            over seeds, minus kClearlyBelow, against its std (a job "lowers the loss" below
//            kClearlyBelow x the constant's, the report's rule);
//   App. C   more experts lower it: the largest n's mean final loss below n = 1's beyond their
//            stds added, and ("at every step") the mean falls from each n to the next.
#pragma once

#include <vector>

#include "runner/claims.h"

namespace moelab::l2norm {

// A job's final loss "lowers the loss" below this fraction of the best constant predictor's.
constexpr double kClearlyBelow = 0.9;

std::vector<Claim> l2norm_claims(const ClaimsInput& input);

}  // namespace moelab::l2norm
