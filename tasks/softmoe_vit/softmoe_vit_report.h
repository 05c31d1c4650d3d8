// tasks/softmoe_vit/softmoe_vit_report.h — the evaluation half of `moelab softmoe-vit`: from the
// saved networks, Algorithm 1 against random k-subsets in every Soft MoE block (Figures 2-3,
// Tables 2 and 11-13 of the implicit-bias paper), the Soft MoE layers' forward time with k of n
// experts (Table 3), and summary.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/vit/vit.h"
#include "runner/experiment.h"
#include "tasks/softmoe_vit/vit_classifier.h"

namespace moelab::softmoe_vit {

// One trained network as models.csv records it.
struct TrainedVit {
  std::int64_t experts = 0, moe_layers = 0, seed = 0, expert_hidden = 0, expert_parameters = 0,
               total_parameters = 0, steps = 0;
  double epochs = 0, test_accuracy = 0, seconds = 0;
  std::string checkpoint;  // path
};

// The ViT of the run's settings with n experts in its last L blocks (the data fixes channels,
// image size and classes).
VitConfig vit_config(const Settings& s, const ImageDataset& data, std::int64_t experts, std::int64_t moe_layers);

// k in {1, 2, n/4, n/2} with 1 <= k < n, ascending, without repeats.
std::vector<std::int64_t> subset_sizes(std::int64_t experts);

// Every evaluation above, written into ctx.dir; `models` in grid order.
void evaluate_and_report(const RunContext& ctx, const ImageSplit& data, const std::vector<TrainedVit>& models);

}  // namespace moelab::softmoe_vit
