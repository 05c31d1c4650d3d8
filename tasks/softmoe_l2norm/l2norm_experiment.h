// tasks/softmoe_l2norm/l2norm_experiment.h — `moelab softmoe-l2norm`: Appendix C (Figure 4) of the
// implicit-bias paper (Chung et al., "Beyond Parameter Count: Implicit Bias in Soft Mixture of
// Experts", 2024): a Soft MoE layer with a fixed
// summation head learns t(x) = ||x||_2, x ~ N(0, 5 I_10), for n in {1, 2, 5, 10} experts with the
// same 20 d^2 expert parameters, and tokenisations 5 x 2 and 2 x 5 (the model and data:
// tasks/softmoe_l2norm/l2norm.h). The claim: n = 1 cannot lower the loss (Theorem 1) — it stays
// at about the best constant's loss Var||x|| = 2.435 — and more experts do better and better.
//
// Jobs: one per (tokenisation, n, seed), each a training run on fresh batches. Files:
//   metrics.csv  tokenisation, experts, seed, step, loss: the mean training loss of the steps since
//                the previous row (every `log_every` steps), flushed row by row
//   results.csv  one row per finished job: sizes, first / final loss (final: the mean of the last
//                `final_fraction` of the steps), the constant predictor's loss, the ratio, seconds
//   summary.md   per tokenisation and n: final loss mean +- std over seeds, ratio to the
//                constant's loss, and the verdict in numbers
//   loss_<m>x<d>.png  loss curves (mean over seeds), one line per n, log y, with the constant's loss
// Every job is a point of the shared grid (runner/job_grid.h; docs/jobs.md), named
// "<m>x<d>-n<n>-seed<s>", with its own points/<name>.json (its results row, written last) and
// points/<name>.csv (its curve); results.csv and metrics.csv are gathered from them in grid order
// by the report. mode=all (default) runs the missing jobs, then reports; mode=list prints a command
// per missing job; mode=point runs one; mode=report gathers. Running again with the same folder
// skips the finished jobs; a folder holding a run with other settings is refused by the command
// line (a UsageError, runner/run_start.h) rather than mixed. token_dims, experts and seeds
// may change: they add jobs.
//
// Presets: paper (500 steps of batch 10,000, the paper's "500 epochs" read as 500 fresh batches;
// about 2 minutes per job, 8 jobs per seed, seeds 0-2, on one core), cpu (default: 1000 steps of
// batch 1000, seeds 0-2; about 10 CPU-minutes on one core), toy (seconds, one seed).
#pragma once

#include "runner/experiment.h"

namespace moelab {

Experiment softmoe_l2norm_experiment();

}  // namespace moelab
