// tasks/phonebook/phonebook_experiment.h — `moelab phonebook`: the Mixture of Parrots paper's
// memorization experiment (Section 4.2, Figure 4a).
//
// Question: at a fixed number of active parameters, do more experts let a model memorize a larger
// phone-book? The paper finds yes: the largest book memorized tracks TOTAL parameters.
//
// The sweep. For every model of the grid (dense decoders of several widths d; MoE decoders of
// width d with E experts, top-k, Mixtral gates, FFN width d; `router` and `router_options` choose
// another registered scheme, tasks/common/router_settings.h) and every book size N:
//   1. draw the book (tasks/phonebook/phonebook_data.h; the same book for every model),
//   2. train the model from scratch by next-token prediction on its entries, for a fixed budget
//      (`steps`, or `epochs` passes over the book when set), the batches taken in order from a
//      fresh shuffle of the book each epoch (`sampling`, tasks/common/epoch_sampler.h: every entry
//      once per epoch, the last batch of an epoch short; `replacement` draws entries with
//      replacement, the recipe before epochs were the default), AdamW with weight decay 0.1, warmup
//      over 20% of the steps then linear decay (tasks/common/train.h), once per learning rate of
//      `lrs` (the best counts, as the paper sweeps learning rates),
//   3. ask 1,000 names of the book (`BOS name SEP`, greedy decoding) and count exact matches of
//      all 8 digits.
// A model has memorized a book when at least `threshold` (90%) of the answers are exact; its
// capacity is the largest such book. Larger books are not tried once a model has failed
// `stop_after_failures` sizes in a row (capacity only falls with size; this saves most of the time).
// Every (model, size) is trained once per seed of `seeds` (each seed draws its own book, test
// names, initial weights and batches; replicate 0 is the run's --seed): the capacity is found per
// seed, and the report gives the median over seeds with the per-seed values.
//
// Jobs (runner/job_grid.h; docs/jobs.md): every (model, size, seed) is a point,
// "<model>-N<size>-seed<t>", with its own files points/<name>.json (every run's numbers) and
// points/<name>.csv (its curves). mode=all (default) runs the missing points in grid order,
// skipping those the stop rule rules out, then reports; mode=list prints a command per missing
// point (leaving out those the finished ones already rule out); mode=point runs one; mode=report
// gathers. A jobs run may finish points past the stop rule (they ran before the failure that
// rules them out was known): the report walks each (model, seed) in ascending size exactly as
// mode=all does and leaves them out (tasks/phonebook/phonebook_report.h), so its answer and its
// files are the ones mode=all gives.
//
// Outputs in the run folder (runner/run_dir.h), all derived from the points by the report:
// results.csv (one row per run: model, parameters, book size, seed, learning rate, exact match,
// ...), metrics.csv (the evaluations during training), capacity.csv (largest book per model and
// seed, their median, total and active parameters), fig4a_total.png and fig4a_active.png (median
// largest book against non-embedding and against active parameters, one line for the dense models
// and one per MoE width), summary.md (the tables and the verdict in numbers, with the seeds'
// spread), beyond_stop.csv (only when jobs ran points past the stop rule: not counted).
#pragma once

#include "runner/experiment.h"

namespace moelab {

Experiment phonebook_experiment();

}  // namespace moelab
