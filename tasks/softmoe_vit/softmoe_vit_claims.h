// tasks/softmoe_vit/softmoe_vit_claims.h — the implicit-bias paper's Section 4.4 claims for the
// Soft MoE ViT, judged from a finished softmoe-vit folder (subsets.csv, timing.csv) on
// runner/claims.h's scale:
//   Fig. 2-3      Algorithm 1 beats random k-subsets at every n and k (per (L, n, k) cell over the
//                 training seeds, with the paired sign-flip test: both on the same network);
//   Tables 2, 11-13  by many random-draw standard deviations (z > 0 beyond the seeds' spread);
//   Fig. 2 (n)    with more experts Algorithm 1 loses less to all experts at a fixed k/n;
//   Table 3       keeping fewer experts cuts the Soft MoE layers' forward time.
// The paper's transformers are Astroformer-1 (CIFAR) and ViT-B/16 (ImageNet): its numbers are
// printed for reference; the directions are judged, not the sizes.
#pragma once

#include <vector>

#include "runner/claims.h"

namespace moelab::softmoe_vit {

std::vector<Claim> softmoe_vit_claims(const ClaimsInput& input);

}  // namespace moelab::softmoe_vit
