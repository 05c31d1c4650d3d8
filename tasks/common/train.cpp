// tasks/common/train.cpp — see train.h.
#include "tasks/common/train.h"

#include <deque>

#include "core/error.h"
#include "nn/loss.h"
#include "nn/moe/moe_decoder.h"
#include "nn/optim/adam.h"
#include "nn/optim/schedule.h"
#include "nn/progress.h"
#include "runner/report.h"
#include "nn/train_loop.h"

namespace moelab {

TrainReport train_decoder(Decoder& model, const TrainConfig& config, const BatchSource& next_batch,
                          Generator& data_gen, const Evaluation& evaluate, const std::string& label,
                          CsvFile* metrics,
                          const std::function<bool(const std::map<std::string, double>&)>& stop_when) {
  MOELAB_CHECK(config.steps >= 1, "train_decoder", "steps must be >= 1, got ", config.steps);
  // Decay the matrices (rank >= 2), not the norm gains or biases.
  ParamGroup decay{.params = {}, .lr = config.lr, .base_lr = config.lr, .weight_decay = config.weight_decay};
  ParamGroup no_decay{.params = {}, .lr = config.lr, .base_lr = config.lr, .weight_decay = 0.0};
  for (const Variable& p : model.parameters()) (p.rank() >= 2 ? decay : no_decay).params.push_back(p);
  AdamW opt({decay, no_decay});
  const auto schedule = make_schedule(config.schedule, config.steps,
                                      config.schedule == "constant" ? 0
                                                                    : warmup_steps_for(config.steps, config.warmup_fraction));
  const Device device = model.device();  // batches are made on the host and copied there

  TrainReport report;
  std::deque<double> recent;  // losses of the last 10% of steps
  const std::size_t window = static_cast<std::size_t>(std::max<std::int64_t>(1, config.steps / 10));
  double interval_loss = 0;
  std::int64_t interval_steps = 0;

  LoopHooks hooks;
  hooks.batch_loss = [&](std::int64_t) {
    TokenBatch batch = next_batch(data_gen);
    StepLoss s;  // the routers' load-balancing and z losses of this forward go to s.aux, if any
    s.loss = nn::cross_entropy(model.forward(batch.inputs.to(device), s.aux), batch.targets.to(device));
    s.items = batch.inputs.numel();
    return s;
  };
  hooks.on_step = [&](const LoopState& state, double value) {
    interval_loss += value, ++interval_steps;
    recent.push_back(value);
    if (recent.size() > window) recent.pop_front();
    report.steps_done = state.step;
  };
  hooks.evaluate = [&](const LoopState& state) {
    report.metrics = evaluate ? evaluate(model, state.step) : std::map<std::string, double>{};
    if (metrics) {
      const std::string step = cell(static_cast<double>(state.step));
      const double tps = state.train_seconds > 0 ? static_cast<double>(state.items) / state.train_seconds : 0;
      metrics->row({label, step, "train_loss", cell(interval_loss / std::max<std::int64_t>(1, interval_steps))});
      metrics->row({label, step, "lr", cell(opt.groups()[0].lr)});
      metrics->row({label, step, "tokens_per_second", cell(tps)});
      for (const auto& [name, value] : report.metrics) metrics->row({label, step, name, cell(value)});
    }
    interval_loss = 0, interval_steps = 0;
    return stop_when && stop_when(report.metrics);
  };
  auto mean_recent = [&] {
    double sum = 0;
    for (double v : recent) sum += v;
    return sum / static_cast<double>(recent.size());
  };
  hooks.summary = [&](const LoopState& state) {
    report.final_loss = mean_recent();
    std::string summary = "trained " + std::to_string(state.step) + " steps in " + clock_text(state.train_seconds) +
                          (state.stopped_early ? " (stopped early)" : "") + ", loss " + format_number(report.final_loss, "%.6g");
    for (const auto& [name, value] : report.metrics) summary += ", " + name + " " + format_number(value, "%.6g");
    return summary;
  };
  const LoopState done =
      train_loop(model, opt,
                 LoopOptions{.steps = config.steps, .schedule = schedule.get(), .clip = config.clip,
                             .eval_every = config.eval_every, .label = label, .loss_name = "cross-entropy"},
                 hooks);
  report.final_loss = mean_recent();
  report.stopped_early = done.stopped_early;
  report.seconds = done.train_seconds;
  report.tokens_per_second = done.train_seconds > 0 ? static_cast<double>(done.items) / done.train_seconds : 0;
  return report;
}

}  // namespace moelab
