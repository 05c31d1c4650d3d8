// tasks/shortest_path/shortest_path_claims.h — Mixture of Parrots' reasoning claims (Section 4.3,
// Figure 4b), judged from a finished shortest-path folder's results.csv on runner/claims.h's
// scale:
//   Fig. 4b  widening the dense model helps more than adding experts: each MoE model against every
//            wider dense model with no more total parameters; the cell is the wide model's mean
//            exact match minus the MoE model's, against their two stds over seeds added, with
//            the paired sign-flip test over the seeds both ran;
//   Fig. 4b  accuracy follows active parameters rather than total ones: per seed, Spearman's rho
//            of exact match with active parameters minus rho with total ones; the cell is that
//            difference's mean over seeds against its std.
// Runs at this scale either stay near the trivial one-edge answer (the plateau) or leave it by
// tens of points, so means over 3 seeds hide counts: each model's plateau escapes (exact match at
// least 10 points above the baseline) are given with their Wilson 95% interval. The baseline is
// recomputed from the folder's settings and seed (the same test graphs the report used).
#pragma once

#include <vector>

#include "runner/claims.h"

namespace moelab {

std::vector<Claim> shortest_path_claims(const ClaimsInput& input);

}  // namespace moelab
