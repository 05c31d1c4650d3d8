// tasks/shortest_path/shortest_path_experiment.h — `moelab shortest-path`: the Mixture of Parrots
// paper's reasoning experiment (Section 4.3, Figure 4b).
//
// Question: at a fixed number of active parameters, do more experts help a model find shortest
// paths in graphs it has never seen? The paper finds little: accuracy follows the width (active
// parameters), not the total parameters, unlike memorization (`moelab phonebook`).
//
// The sweep. The edge probability p is calibrated once for the graph size n
// (tasks/shortest_path/graph.h: mean query path length = target_length where reachable, else the
// p that maximises it; results say which). A held-out test set of `test_examples` graphs is drawn
// from its own seed. For every model of the grid (dense widths; MoE widths x expert counts, top-k,
// Mixtral gates, FFN width d; or the scheme of the `router` setting, tasks/common/router_settings.h)
// and every training seed of `seeds`:
//   train from scratch on fresh graphs (test graphs excluded) with the loss on the answer tokens
//   only, AdamW, weight decay 0.1, warmup 20% then linear decay (tasks/common/train.h);
//   evaluate greedy answers: exact match with the smallest shortest path, and the share of
//   answers that are some shortest path (valid_shortest).
// Seeds matter here (docs/EXPERIMENTS.md: when a model leaves the one-edge plateau varies), so the
// report gives mean and standard deviation over seeds.
//
// Jobs (runner/job_grid.h; docs/jobs.md): every (model, seed) is a point, "<model>-seed<t>",
// with its own files points/<name>.json and points/<name>.csv (its curve); mode=all (default) runs
// the missing points, then reports; mode=list prints a command per missing point; mode=point runs
// one; mode=report gathers. Every process calibrates p and draws the test set again, from the run
// seed: the same p and test graphs for every point.
//
// Outputs in the run folder, derived from the points by the report: results.csv (one row per
// model and seed), metrics.csv (evaluations during training), accuracy.csv (per model: parameters,
// mean and std of both scores), fig4b_total.png and fig4b_active.png (accuracy against total and
// against active parameters, one line per family), summary.md (calibration, tables, the verdict
// with the seeds' spread: a gain counts as beyond it when larger than the two stds added).
#pragma once

#include "runner/experiment.h"

namespace moelab {

Experiment shortest_path_experiment();

}  // namespace moelab
