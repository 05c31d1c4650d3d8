// tasks/routers/routers_report.h — the routing experiment's grid points and its report, from the
// points' result files (tasks/common/job_grid.h).
//
// The grid: book sizes (outer) x schemes x seeds (inner), one point per (size, scheme, seed),
// named "<scheme>-N<size>-seed<t>" (e.g. aux-free-N1500-seed0).
//
// The report, per book size (a missing point is said to be, and left out):
//   results.csv      one row per point: scheme, router, book size, seed, parameters (total, active,
//                    and active at the mean slots per token), exact match, digit accuracy, the
//                    load figures averaged over the logged steps (max/mean, CV, dropped fraction,
//                    entropy, mean slots) and at the last one, tokens per second, seconds
//   metrics.csv      every point's curves (train loss, lr, tokens/s and the logged loads)
//   load_curves.csv  the averaged load figures at every logged step of every point (no per-expert
//                    columns: those are in metrics.csv)
//   summary.md       the table (median exact match over seeds and the per-seed values, load
//                    figures averaged over steps and seeds), the speed table, the verdict in
//                    numbers, the schemes' caveats
//   heat_N<size>_<scheme>.png   layer 0's relative load per expert (rows) over the logged steps
//                    (columns), first seed, one colour scale for every map of the run
//   load_cv_N<size>.png         the load CV over training (mean over seeds), one line per scheme
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tasks/common/experiment.h"
#include "tasks/routers/router_schemes.h"

namespace moelab {

struct RoutersPoint {
  std::size_t scheme = 0;  // index into the schemes
  std::int64_t book_size = 0;
  std::int64_t seed = 0;
  std::string name;  // "aux-free-N1500-seed0"
};

// Book sizes (outer) x schemes x seeds (inner).
std::vector<RoutersPoint> routers_grid(const std::vector<RouterScheme>& schemes,
                                       const std::vector<std::int64_t>& book_sizes,
                                       const std::vector<std::int64_t>& seeds);

// Writes the report into ctx.dir and prints the tables; returns 0.
int write_routers_report(const RunContext& ctx, const std::vector<RouterScheme>& schemes,
                         const std::vector<RoutersPoint>& points);

}  // namespace moelab
