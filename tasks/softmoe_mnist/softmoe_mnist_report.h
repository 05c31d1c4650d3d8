// tasks/softmoe_mnist/softmoe_mnist_report.h — the evaluation half of `moelab softmoe-mnist`:
// from the saved networks, Table 1 (best and random k-subsets), Algorithm 1 against random
// subsets across n (Figure 2, Table 10), the inference timings, and summary.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runner/experiment.h"
#include "tasks/softmoe_mnist/idx.h"
#include "tasks/softmoe_mnist/mnist_model.h"

namespace moelab::softmoe_mnist {

// One trained network as models.csv records it.
struct TrainedModel {
  std::int64_t experts = 0, seed = 0, hidden = 0, expert_parameters = 0, total_parameters = 0, steps = 0;
  double epochs = 0, test_accuracy = 0, seconds = 0;
  std::string checkpoint;  // path
};

// Loads a trained network from its checkpoint; slot_inputs must be the one it was trained with
// (the run's setting: the checkpoint holds weights only).
std::unique_ptr<SoftMoEClassifier> load_model(const TrainedModel& m, SlotInputs slot_inputs);

// Every evaluation above, written into ctx.dir; `models` in (seed, n) order.
void evaluate_and_report(const RunContext& ctx, const MnistSplit& data, const std::vector<TrainedModel>& models);

}  // namespace moelab::softmoe_mnist
