// tasks/routers/routers_report.h — the routing experiment's report, from the points' result files
// (runner/job_grid.h; the grid and its tasks: tasks/routers/routers_tasks.h).
//
// The report, per task point (a book size, a graph size; a missing point is said to be, and left
// out):
//   results.csv      one row per point: scheme, router, task, seed, parameters (total, active,
//                    and active at the mean slots per token), the task's metrics (exact match, and
//                    digit accuracy for a book, valid shortest path for graphs), the load figures
//                    averaged over the logged steps (max/mean, CV, dropped fraction, entropy, mean
//                    slots) and at the last one, tokens per second, seconds
//   metrics.csv      every point's curves (train loss, lr, tokens/s and the logged loads)
//   load_curves.csv  the averaged load figures at every logged step of every point (no per-expert
//                    columns: those are in metrics.csv)
//   summary.md       per task: the table (median exact match over seeds and the per-seed values,
//                    load figures averaged over steps and seeds), the speed table, the verdict in
//                    numbers (which schemes differ from topk beyond the seeds' spread); the
//                    schemes' caveats
//   heat_<task>_<scheme>.png   layer 0's relative load per expert (rows) over the logged steps
//                    (columns), first seed, one colour scale for every map of the run; <task> is
//                    the task's label (N1500, path-n8)
//   load_cv_<task>.png         the load CV over training (mean over seeds), one line per scheme
#pragma once

#include <vector>

#include "runner/experiment.h"
#include "tasks/routers/router_schemes.h"
#include "tasks/routers/routers_tasks.h"

namespace moelab {

// Writes the report into ctx.dir and prints the tables; returns 0.
int write_routers_report(const RunContext& ctx, const std::vector<RouterScheme>& schemes,
                         const std::vector<RoutersTask>& tasks, const std::vector<RoutersPoint>& points);

}  // namespace moelab
