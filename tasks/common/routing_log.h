// tasks/common/routing_log.h — routing analysis in a decoder experiment's logs: at every
// evaluation point of a MoE model, how balanced its last training step's routing was, how
// specialised by token id, and how much of it changed since the previous evaluation point.
//
// Per point, points/<point>.routing.csv in long form (job, step, metric, value), one row per
// metric and log point, each averaged over the model's MoE layers (tasks/common/load_probe.h):
//   max_violation         DeepSeek's MaxVio of the step's training forward: max load / mean - 1
//   token_specialisation  how concentrated each token id's routing is (nn/moe/routing_analysis.h)
//   load_cv               the coefficient of variation of the per-expert load
//   routing_drift         the share of a fixed probe batch's tokens (the point's first training
//                         batch) whose experts changed since the previous log point: drift between
//                         two snapshots of the same training run (from the second log point on)
// It is written beside the point's curves, removed when the point (re)starts, and read only through
// the report, which gathers every point's file in grid order into routing.csv and draws
// routing_drift.png and routing_max_violation.png (one line per job). Dense models write nothing.
// The probe's forward runs in evaluation mode without gradients (no router state changes), after
// the step and before the experiment's own evaluation, outside the timed steps, and the probe batch
// is the drawn batch itself (no extra draw), so training is bitwise what it was without the log.
//
//   RoutingLog log(ctx.dir, point_name);
//   train_decoder(model, tc, log.probing(next_batch), data_gen, log.around(evaluate, label), label, &curves);
//   ...
//   write_routing_report(ctx.dir, done_point_names);   // in the report
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/run_dir.h"
#include "tasks/common/load_probe.h"
#include "tasks/common/train.h"

namespace moelab {

class RoutingLog {
 public:
  // Removes a leftover points/<point>.routing.csv (an interrupted try); the file is created at the
  // first log point of a MoE model.
  RoutingLog(const RunDir& dir, const std::string& point);

  // The batch source, keeping its first batch as the drift probe of the job that draws it (call
  // once per job: each job's model gets its own probe).
  BatchSource probing(BatchSource inner);
  // The evaluation, preceded by this log's rows for job `job` when the model has MoE layers.
  Evaluation around(Evaluation inner, const std::string& job);

  // For a checkpoint (tasks/common/train.h, TrainResume): the rows written so far and the probe
  // (its batch and the routes of the last log point). restore() puts the rows file back as it was
  // and takes the probe back, after probing() (which starts a new probe), before training goes on.
  nlohmann::json state() const;
  void restore(const nlohmann::json& state);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// "points/<point>.routing.csv".
std::string point_routing_file(const std::string& point);

// Gathers the points' routing files (those that exist, in the order given) into routing.csv and
// draws routing_drift.png and routing_max_violation.png; removes a stale routing.csv when no point
// has one (a dense-only grid). Returns the number of points gathered.
std::size_t write_routing_report(const RunDir& dir, const std::vector<std::string>& points);

}  // namespace moelab
