// tasks/phonebook/phonebook_report.h — the phone-book sweep's report, from results.csv.
//
// capacity.csv: per model, its total (non-embedding) and active parameters and the largest book
// recalled at >= threshold exact match (0 when none was); fig4a_total.png / fig4a_active.png: the
// capacity against each parameter count, one line for the dense models and one per MoE width
// (the paper's Figure 4a); summary.md: the accuracy table (model x book size), the capacity table,
// and the verdict in numbers: whether MoE models beat the dense model with the same active
// parameters, and whether capacity follows total rather than active parameters (rank
// correlations over the models with a nonzero capacity).
// Everything is computed from results.csv, so a resumed or partly finished sweep reports what
// it has.
#pragma once

#include <vector>

#include "tasks/common/experiment.h"
#include "tasks/common/models.h"

namespace moelab {

// Writes the report into ctx.dir and prints the tables; returns 0.
int write_phonebook_report(const RunContext& ctx, const std::vector<ModelSpec>& models, double threshold);

}  // namespace moelab
