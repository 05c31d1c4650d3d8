// tasks/pretrain/pretrain_claims.h — Mixture of Parrots' pre-training claims (Section 5, Figures
// 1, 5 and 6), judged from a finished pretrain folder's results.csv (one row per model and seed)
// on runner/claims.h's scale. Each claim is judged on the measurement that tests what the
// paper argues, with the other reading beside it as a "second row" (judged too, never dropped):
//   Fig. 1  knowledge follows total parameters more than active ones: per seed, Spearman's rho of
//           knowledge_train (stored facts: the trained people's questions, as world-knowledge
//           benchmarks ask facts seen in pre-training) with total parameters minus rho with
//           active ones; the cell is its mean over seeds against its std. Second row: the same on
//           knowledge_test (extraction: held-out people's questions, whose bios were trained on).
//   Fig. 1  math follows active parameters more than total ones, on math_unseen (fresh problems
//           whose every equation was held out of training: computing, not recall; corpus.h says
//           why). Second row: math_test (fresh problems of seen equations).
//   Fig. 5  at similar total parameters an MoE has a larger math train-test gap (math_unseen_gap =
//           math_train - math_unseen): each MoE against the dense model nearest in total
//           parameters (log scale), means against stds added (and, here and in Fig. 6's knowledge
//           rows, the paired sign-flip test over the seeds). Second row: math_gap (train - test).
//   Fig. 6  at a matched validation perplexity an MoE knows more: each MoE against the dense model
//           nearest in mean best_perplexity (the lowest validation perplexity of the run; the
//           paper trains one pass, where perplexity only falls, so its value is what the best point
//           of ours approaches, while the last value of a run that repeats its data also counts
//           how much the model overfitted), knowledge_train means against stds added; second row
//           knowledge_test.
//   Fig. 6  ... and ties on math (math_unseen; second row math_test): a cell is in the paper's
//           direction (and "beyond", i.e. a clear tie) when the math difference is within the
//           two stds added, against it otherwise.
// A record made before a measurement existed (no math_unseen or best_perplexity column) gets
// "not judged" for what needs it, naming the missing column; Fig. 6 then matches on the final
// perplexity and says so.
#pragma once

#include <vector>

#include "runner/claims.h"

namespace moelab {

std::vector<Claim> pretrain_claims(const ClaimsInput& input);

}  // namespace moelab
