// tasks/pretrain/pretrain_report.h — the report of `moelab pretrain` (the experiment:
// tasks/pretrain/pretrain_experiment.h): from results.csv (one row per model and seed) to
// models.csv, the plots of the paper's Figures 1, 5 and 6, and summary.md with the verdict.
//
// The verdict checks the paper's four claims on the means over seeds, each with the numbers that
// decide it (a difference is "beyond the seeds' spread" when it is larger than the two sample
// standard deviations added together, as in the other experiments):
//   1. knowledge follows total parameters: Spearman's rho of knowledge_test with total parameters
//      above its rho with active ones; and what experts add at a fixed width;
//   2. math follows active parameters: rho with active above rho with total; what experts add at a
//      fixed width against what a wider dense model adds;
//   3. Figure 5: each MoE's math train-test gap against the dense model nearest in total parameters;
//   4. Figure 6: each MoE against the dense model nearest in validation perplexity, on knowledge
//      (the paper: MoE better) and on math (the paper: a tie).
// The "In numbers" section says whether each claim's means point the paper's way, with the lines
// that say how far beyond the spread; the verdict on the fixed scale (holds / holds weaker /
// differs / contradicts) is the Claims section's (pretrain_claims.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tasks/common/experiment.h"
#include "tasks/common/models.h"

namespace moelab {

// One job of the sweep: a model of the grid and a seed, named "<model>-seed<t>".
struct PretrainPoint {
  std::size_t model = 0;
  std::int64_t seed = 0;
  std::string name;
};

// Reads ctx.dir's results.csv; writes models.csv, the PNGs (or their .gp scripts without gnuplot)
// and summary.md, and prints the table and the verdict.
void write_pretrain_report(const RunContext& ctx, const std::vector<ModelSpec>& models);

}  // namespace moelab
