// tasks/phonebook/phonebook_claims.h — Mixture of Parrots' memorization claims (Section 4.2,
// Figure 4a), judged from a finished phonebook folder's capacity.csv on runner/claims.h's
// scale:
//   Fig. 4a  an MoE model memorizes a larger book than the dense model with (about) the same
//            active parameters, or, without one, the dense model of its width (fewer active);
//            beyond the seeds' spread when its smallest per-seed capacity exceeds the dense
//            model's largest (the report's rule), with the paired sign-flip test over the seeds;
//   Fig. 4a  capacity follows total parameters rather than active ones: per seed, Spearman's rho
//            of capacity with total parameters minus rho with active ones; the cell is that
//            difference's mean over seeds against its standard deviation.
// Each model's capacity is given as its median over seeds with the seeds' range, an interval for
// the median at confidence 1 - 2 / 2^seeds (runner/statistics.h: 75% at 3 seeds).
#pragma once

#include <vector>

#include "runner/claims.h"

namespace moelab {

std::vector<Claim> phonebook_claims(const ClaimsInput& input);

}  // namespace moelab
