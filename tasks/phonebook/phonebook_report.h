// tasks/phonebook/phonebook_report.h — the phone-book sweep's grid points, its stop rule, and its
// report, from the points' result files (runner/job_grid.h).
//
// The grid: models x seeds x book sizes (ascending), one point per (model, seed, size), named
// "<model>-N<size>-seed<t>" (e.g. moe-d64-16e-N2000-seed1).
//
// The stop rule. A model of one seed is not tried on larger books once it has failed
// `stop_after_failures` sizes in a row (capacity only falls with size; it saves most of the time).
// walk_books applies it to the finished points of one (model, seed), in ascending size: a point is
// Counted (reached by the walk and done), Skipped (after the failures), Missing (reached and not
// done: the walk waits there) or Unknown (beyond a missing point). mode=all runs the points in grid
// order and skips the Skipped ones; jobs (mode=list) run every point, and the report walks the
// finished points the same way, so the capacity is the same either way: the points beyond the
// stop that jobs ran are left out of every table (they are listed in beyond_stop.csv and on
// stdout), and the summary is byte for byte the one mode=all writes.
//
// The report: results.csv (one row per learning rate and budget of every counted point),
// metrics.csv (their curves), capacity.csv (per model: its total (non-embedding) and active
// parameters, the largest book recalled at >= threshold exact match for each seed, and the
// median over seeds), fig4a_total.png / fig4a_active.png (the median capacity against each
// parameter count, one line for the dense models and one per MoE width: the paper's Figure 4a),
// summary.md (the accuracy table (median over seeds), the capacities per seed, and the verdict in
// numbers: whether MoE models beat the dense model with the same active parameters, by the median
// and beyond the seeds' spread, and whether capacity follows total rather than active parameters).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/experiment.h"
#include "tasks/common/models.h"

namespace moelab {

struct PhonebookPoint {
  std::size_t model = 0;  // index into the models
  std::int64_t seed = 0;  // replicate
  std::int64_t book_size = 0;
  std::string name;  // "moe-d64-16e-N2000-seed1"
};

// Models (outer) x seeds x book sizes (inner, ascending).
std::vector<PhonebookPoint> phonebook_grid(const std::vector<ModelSpec>& models, const std::vector<std::int64_t>& seeds,
                                           const std::vector<std::int64_t>& sizes);

enum class BookState { Counted, Skipped, Missing, Unknown };

// The stop rule over one (model, seed): best[i] is the best exact match of the i-th size
// (ascending), nothing when that point is not done.
std::vector<BookState> walk_books(const std::vector<std::optional<double>>& best, double threshold,
                                  std::int64_t stop_after_failures);

// Writes the report into ctx.dir and prints the tables; returns 0.
int write_phonebook_report(const RunContext& ctx, const std::vector<ModelSpec>& models,
                           const std::vector<PhonebookPoint>& points);

}  // namespace moelab
