// tasks/pretrain/pretrain_claims.h — Mixture of Parrots' pre-training claims (Section 5, Figures
// 1, 5 and 6), judged from a finished pretrain folder's results.csv (one row per model and seed)
// on tasks/common/claims.h's scale:
//   Fig. 1  knowledge follows total parameters more than active ones: per seed, Spearman's rho of
//           knowledge_test with total parameters minus rho with active ones; the cell is its mean
//           over seeds against its std;
//   Fig. 1  math follows active parameters more than total ones (the same with math_test);
//   Fig. 5  at similar total parameters an MoE has a larger math train-test gap: each MoE against
//           the dense model nearest in total parameters (log scale), means against stds added
//           (and, here and in Fig. 6's knowledge row, the paired sign-flip test over the seeds);
//   Fig. 6  at a matched validation perplexity an MoE knows more: each MoE against the dense model
//           nearest in mean perplexity, knowledge_test means against stds added;
//   Fig. 6  ... and ties on math: a cell is in the paper's direction (and "beyond", i.e. a clear
//           tie) when the math difference is within the two stds added, against it otherwise.
#pragma once

#include <vector>

#include "tasks/common/claims.h"

namespace moelab {

std::vector<Claim> pretrain_claims(const ClaimsInput& input);

}  // namespace moelab
