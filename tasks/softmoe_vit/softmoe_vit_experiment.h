// tasks/softmoe_vit/softmoe_vit_experiment.h — `moelab softmoe-vit`: Algorithm 1 in a Soft MoE
// vision transformer (Chung et al., "Beyond Parameter Count: Implicit Bias in Soft Mixture of
// Experts", 2024, Section 4.4: Figures 2-3, Tables 2, 3 and 11-13) at CPU scale.
//
// What it does, in a run folder (runs/softmoe-vit/<preset> unless --out says otherwise):
//  1. train: one ViT (nn/vit/vit.h) per (n experts, Soft MoE layer count L, training seed), its
//     last L blocks Soft MoE with n experts of hidden width floor(mlp_hidden / n) each (constant
//     total expert parameters, as the paper), saved as checkpoints/<point>.safetensors. Every
//     network is a job of the shared grid (runner/job_grid.h, docs/jobs.md), point
//     "n<n>-L<L>-seed<s>": mode=list prints one command per network to train, mode=point trains
//     one, mode=report evaluates the trained ones, mode=all (default) does both.
//  2. the report (tasks/softmoe_vit/softmoe_vit_report.h), from the checkpoints: for every network
//     and k in {1, 2, n/4, n/2} (those with 1 <= k < n), the test accuracy of Algorithm 1 keeping k
//     experts in every Soft MoE block (each block choosing per image) and of random k-subsets
//     (random_seeds draws; mean and population std, as the paper's np.std), and the z-statistic
//     (Algorithm 1's distance above the random mean in those stds: Tables 2, 11-13); the forward
//     time of L untrained Soft MoE layers with k of n experts (Table 3); subsets.csv, timing.csv,
//     models.csv, train.csv, fig2_<dataset>_L<L>.png and summary.md with the Claims section.
// The data: Fashion-MNIST (Debian's dataset-fashion-mnist), MNIST (scripts/get-mnist.sh), or
// CIFAR-10/100 from a folder the user names (tasks/softmoe_vit/cifar.h; no download exists).
#pragma once

#include "runner/experiment.h"

namespace moelab {

Experiment softmoe_vit_experiment();

}  // namespace moelab
