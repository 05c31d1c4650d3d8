// tasks/softmoe_mnist/softmoe_mnist_experiment.h — `moelab softmoe-mnist`: expert specialisation
// in Soft MoE on MNIST (Chung et al., "Beyond Parameter Count: Implicit Bias in Soft Mixture of
// Experts", 2024, Sections 4.2-4.5: Table 1,
// Figure 2's MNIST panel, Table 10, and Table 3's question at this scale).
//
// What it does, in a run folder (runs/softmoe-mnist/<preset> unless --out says otherwise):
//  1. train: one network per (n, training seed) (tasks/softmoe_mnist/mnist_model.h), saved as
//     checkpoints/n<n>-seed<s>.safetensors. Each is a job of the shared grid (runner/job_grid.h;
//     docs/jobs.md), point "n<n>-seed<s>", with points/<name>.json (its models.csv row, written last)
//     and points/<name>.csv (loss and test accuracy as training goes). A second run skips every
//     network whose point file and checkpoint exist, so the evaluation can be redone without
//     retraining. mode=list prints a command per network to train, mode=point trains one,
//     mode=train trains the missing ones without evaluating.
//  2. evaluate, as the report (mode=report; mode=all after training; one process, since it reads
//     every network) (tasks/softmoe_mnist/softmoe_mnist_report.h), from the checkpoints of the
//     trained networks: models.csv and train.csv (gathered from the points in grid order), and
//     table1.csv    n in table1_experts, k = n/4: best k-subset accuracy per test image (exhaustive
//                   search using the label) and random k-subsets (mean, std over random_seeds)
//     subsets.csv   Algorithm 1 vs random subsets for k = n/2, n/4, n/8 across n, and the number of
//                   standard deviations by which Algorithm 1 beats random (Table 10)
//     fig2_<dataset>.png   the accuracies against n (Figure 2's MNIST panel)
//     timing.csv    Soft MoE layer forward time with Algorithm 1 keeping k of n experts,
//                   k in {n, 3n/4, n/2, n/4}, batches of 1 and 100, and the slot rows computed
//     summary.md    all of it in tables, next to the paper's numbers, with the data source named,
//                   and with several training seeds the (n, k) cells as mean +- std over seeds and
//                   whether Algorithm 1 beats random beyond that spread
// The data: MNIST IDX files (scripts/get-mnist.sh), or Fashion-MNIST with dataset=fashion-mnist.
#pragma once

#include "runner/experiment.h"

namespace moelab {

Experiment softmoe_mnist_experiment();

}  // namespace moelab
