// tasks/routers/routers_experiment.h — `moelab routers`: one MoE decoder, one routing scheme at
// a time, at equal active parameters, on the phone-book task (Mixture of Parrots, Section 4.2).
//
// Question: the routers of nn/moe/ decide differently which experts a token uses. On a task whose
// answer is stored in the experts (a phone-book: random names and numbers, nothing to generalise),
// at a book size where top-2 is at the edge of what the model memorizes, what does each scheme
// change: how much is recalled, how evenly the experts are used over training, and how fast a
// step runs?
//
// The sweep. For every scheme of `schemes` (tasks/routers/router_schemes.h: top-2 without and with
// a load-balancing loss, with a capacity, aux-loss-free balancing, balanced assignment, top-p,
// a shared expert + top-1), every book size of `book_sizes` (the two "tasks": a book top-2 just
// memorizes and a larger one it cannot) and every seed of `seeds`:
//   1. draw the book and the test names (tasks/phonebook/phonebook_data.h; as `moelab phonebook`
//      draws them for the same seed and size, and the same for every scheme),
//   2. build the decoder (width d, `layers`, `heads`, E = `experts` experts of width d) with the
//      scheme's router, from the same initial-weights seed for every scheme,
//   3. train it as the phone-book experiment does (tasks/common/train.h: AdamW, warmup + linear
//      decay, clipping; batches from a fresh shuffle of the book every epoch), for `steps` steps
//      (or `epochs` passes), never stopping early, so that every scheme sees the same tokens,
//   4. every `log_every` steps, right after the step, read what the routers did in that step's
//      forward (tasks/routers/load_probe.h): each expert's load relative to the mean per layer,
//      and, averaged over the layers, max/mean load, the coefficient of variation (CV) of the
//      loads, the dropped fraction, the router entropy and (top-p) the mean slots per token. These
//      reads run outside the timed steps, so the tokens per second are those of plain steps,
//   5. after the last step, ask `test_names` names of the book (greedy decoding) and count exact
//      matches of all 8 digits.
//
// Jobs (tasks/common/job_grid.h; docs/jobs.md): every (scheme, book size, seed) is a point,
// "<scheme>-N<size>-seed<t>", writing points/<name>.json (its numbers) and points/<name>.csv
// (its curves: loss, throughput and every logged load). mode=all runs the missing points in
// grid order and reports; list / point / report spread them over processes.
//
// Outputs in the run folder, derived from the points by the report (tasks/routers/routers_report.h):
// results.csv, metrics.csv, load_curves.csv, summary.md (the tables and the verdict in numbers),
// heat_N<size>_<scheme>.png (layer 0's per-expert load over the steps, first seed) and
// load_cv_N<size>.png (the load CV over training, one line per scheme).
#pragma once

#include "tasks/common/experiment.h"

namespace moelab {

Experiment routers_experiment();

}  // namespace moelab
