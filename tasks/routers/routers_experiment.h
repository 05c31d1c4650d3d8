// tasks/routers/routers_experiment.h — `moelab routers`: one MoE decoder, one routing scheme at
// a time, at equal active parameters, on the two tasks of Mixture of Parrots: phone-book
// memorization (Section 4.2) and shortest paths in unseen graphs (Section 4.3).
//
// Question: the routers of nn/moe/ decide differently which experts a token uses. On a task whose
// answer is stored in the experts (a phone-book: random names and numbers, nothing to generalise),
// at a book size where top-2 is at the edge of what the model memorizes, and on a task that asks
// for reasoning (the shortest path of a graph the model has never seen), what does each scheme
// change: how much is answered right, how evenly the experts are used over training, and how fast
// a step runs?
//
// The sweep. For every task point (tasks/routers/routers_tasks.h: each book size of `book_sizes`,
// each graph size of `path_n`, as `tasks` selects), every scheme of `schemes`
// (tasks/routers/router_schemes.h: top-2 without and with a load-balancing loss, with a capacity,
// aux-loss-free balancing, balanced assignment, top-p, a shared expert + top-1) and every seed of
// `seeds`:
//   1. draw the task's data as its own experiment does (the book and test names of `moelab
//      phonebook`; the calibrated p and held-out test graphs of `moelab shortest-path`), the same
//      for every scheme,
//   2. build the decoder (the task's width, `layers`, `heads`, E = `experts` experts of that width)
//      with the scheme's router, from the same initial-weights seed for every scheme,
//   3. train it as the task's experiment does (tasks/common/train.h: AdamW, warmup + linear decay,
//      clipping) for the task's step count, never stopping early, so that every scheme sees the
//      same tokens,
//   4. every `log_every` steps, right after the step, read what the routers did in that step's
//      forward (tasks/common/load_probe.h): each expert's load relative to the mean per layer,
//      and, averaged over the layers, max/mean load, the coefficient of variation (CV) of the
//      loads, the dropped fraction, the router entropy and (top-p) the mean slots per token. These
//      reads run outside the timed steps, so the tokens per second are those of plain steps,
//   5. after the last step, score the task: exact match of all 8 digits on `test_names` names of
//      the book; exact match with the smallest shortest path on the test graphs (greedy decoding).
//
// Before any work, every scheme's decoder is checked at every task's width with its router and
// options (shared-top1: E - 1 routed experts): a refusal exits 2.
//
// Jobs (runner/job_grid.h; docs/jobs.md): every (task, scheme, seed) is a point,
// "<scheme>-<task>-seed<t>" (aux-free-N1500-seed0, topk-path-n8-seed1), writing
// points/<name>.json (its numbers) and points/<name>.csv (its curves: loss, throughput and every
// logged load). mode=all runs the missing points in grid order and reports; list / point / report
// spread them over processes.
//
// Outputs in the run folder, derived from the points by the report (tasks/routers/routers_report.h):
// results.csv, metrics.csv, load_curves.csv, summary.md (per task: the tables and the verdict in
// numbers), heat_<task>_<scheme>.png (layer 0's per-expert load over the steps, first seed) and
// load_cv_<task>.png (the load CV over training, one line per scheme).
#pragma once

#include "runner/experiment.h"

namespace moelab {

Experiment routers_experiment();

}  // namespace moelab
