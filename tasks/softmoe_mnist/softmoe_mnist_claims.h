// tasks/softmoe_mnist/softmoe_mnist_claims.h — the implicit-bias paper's MNIST claims, judged from
// a finished softmoe-mnist folder (table1.csv, subsets.csv, timing.csv) on runner/claims.h's
// scale:
//   Table 1    the best k = n/4 subset (label used) is far above random k-subsets (expert
//              specialization exists), and its accuracy grows with n;
//   Fig. 2     Algorithm 1 beats random k-subsets in every (n, k) cell (with the paired sign-flip
//              test over the seeds, Algorithm 1 and random subsets on the same network);
//   Table 10   by as many random-draw standard deviations as the paper's (at least half);
//   Fig. 1     Algorithm 1's accuracy at a fixed k/n grows with n;
//   Table 3    keeping fewer experts cuts the layer's forward time.
// With dataset=fashion-mnist the paper's numbers are still MNIST's (it has no Fashion-MNIST run):
// the directions are judged, the sizes are not.
#pragma once

#include <vector>

#include "runner/claims.h"

namespace moelab::softmoe_mnist {

std::vector<Claim> softmoe_mnist_claims(const ClaimsInput& input);

}  // namespace moelab::softmoe_mnist
