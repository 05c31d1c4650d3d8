// tasks/pretrain/pretrain_report.h — the report of `moelab pretrain` (the experiment:
// tasks/pretrain/pretrain_experiment.h): from results.csv (one row per model and seed) to
// models.csv, the plots of the paper's Figures 1, 5 and 6, and summary.md.
//
// The summary holds the table of every measurement (mean ± sample std over seeds), then
// "Comparisons": pairs of models in numbers only (experts at a fixed width; Figure 5's MoE against
// the dense model nearest in total parameters; Figure 6's against the dense model nearest in best
// validation perplexity), each difference of means beside the two stds added. It states no
// verdict: the paper's claims are judged once, in the Claims section that `moelab claims` writes
// from results.csv (pretrain_claims.h), and `moelab claims --check` keeps it honest. (An earlier
// "In numbers" list judged the claims a second time, in words the check did not cover.)
// The plots use what the claims are judged on: stored knowledge (knowledge_train) and math on
// unseen equations (math_unseen) against total and active parameters, the train - unseen gap, and
// both against the best validation perplexity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runner/experiment.h"
#include "tasks/common/models.h"

namespace moelab {

// One job of the sweep: a load, a model of the grid and a seed, named "<model>-p<people>-seed<t>".
struct PretrainPoint {
  std::size_t model = 0;
  std::int64_t seed = 0;
  std::string name;
  std::int64_t people = 0;  // the load: the corpus's people
};

// Reads ctx.dir's results.csv; writes models.csv, the PNGs (or their .gp scripts without gnuplot)
// and summary.md, and prints the table.
void write_pretrain_report(const RunContext& ctx, const std::vector<ModelSpec>& models);

}  // namespace moelab
