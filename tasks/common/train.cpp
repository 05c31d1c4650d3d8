// tasks/common/train.cpp — see train.h.
#include "tasks/common/train.h"

#include <chrono>
#include <cmath>
#include <deque>
#include <stdexcept>

#include "autograd/ops.h"
#include "nn/loss.h"
#include "nn/moe/moe_decoder.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip.h"
#include "nn/optim/schedule.h"
#include "tasks/common/progress.h"

namespace moelab {

TrainReport train_decoder(Decoder& model, const TrainConfig& config, const BatchSource& next_batch,
                          Generator& data_gen, const Evaluation& evaluate, const std::string& label,
                          CsvFile* metrics,
                          const std::function<bool(const std::map<std::string, double>&)>& stop_when) {
  if (config.steps < 1) throw std::invalid_argument("train_decoder: steps must be >= 1");
  // Decay the matrices (rank >= 2), not the norm gains or biases.
  ParamGroup decay{.params = {}, .lr = config.lr, .base_lr = config.lr, .weight_decay = config.weight_decay};
  ParamGroup no_decay{.params = {}, .lr = config.lr, .base_lr = config.lr, .weight_decay = 0.0};
  for (const Variable& p : model.parameters()) (p.rank() >= 2 ? decay : no_decay).params.push_back(p);
  const std::vector<Variable> params = model.parameters();
  AdamW opt({decay, no_decay});
  const auto schedule = make_schedule(config.schedule, config.steps,
                                      config.schedule == "constant" ? 0
                                                                    : warmup_steps_for(config.steps, config.warmup_fraction));
  const Device device = model.device();  // batches are made on the host and copied there

  TrainReport report;
  std::deque<double> recent;  // losses of the last 10% of steps
  const std::size_t window = static_cast<std::size_t>(std::max<std::int64_t>(1, config.steps / 10));
  double train_seconds = 0, interval_loss = 0;
  std::int64_t positions = 0, interval_steps = 0;
  std::unique_ptr<Progress> progress;
  model.train();

  auto run_evaluation = [&](std::int64_t step) {
    report.metrics = evaluate ? evaluate(model) : std::map<std::string, double>{};
    model.train();
    if (metrics) {
      const double tps = train_seconds > 0 ? static_cast<double>(positions) / train_seconds : 0;
      metrics->row({label, cell(static_cast<double>(step)), "train_loss", cell(interval_loss / std::max<std::int64_t>(1, interval_steps))});
      metrics->row({label, cell(static_cast<double>(step)), "lr", cell(opt.groups()[0].lr)});
      metrics->row({label, cell(static_cast<double>(step)), "tokens_per_second", cell(tps)});
      for (const auto& [name, value] : report.metrics)
        metrics->row({label, cell(static_cast<double>(step)), name, cell(value)});
    }
    interval_loss = 0, interval_steps = 0;
  };

  for (std::int64_t step = 0; step < config.steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    opt.set_lr_factor(schedule->factor(step));
    TokenBatch batch = next_batch(data_gen);
    if (!progress) progress = std::make_unique<Progress>(label, config.steps, batch.inputs.numel());
    AuxLosses aux;  // the routers' load-balancing and z losses of this forward, if any
    Variable loss = nn::cross_entropy(model.forward(batch.inputs.to(device), aux), batch.targets.to(device));
    const double value = loss.data().to(Device::cpu()).to(DType::Float64).item<double>();
    if (!std::isfinite(value))
      throw std::runtime_error(label + ": the training loss became " + std::to_string(value) + " at step " +
                               std::to_string(step + 1) + " (try a smaller learning rate)");
    if (const Variable total = aux.total(); total.defined()) loss = loss + total;
    opt.zero_grad();
    loss.backward();
    if (config.clip > 0) clip_grad_norm_tensor(params, config.clip);  // no read back
    opt.step();
    routers_after_optimizer_step(model);  // schemes with state outside the gradient (nn/moe/router.h)
    train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    positions += batch.inputs.numel();
    interval_loss += value, ++interval_steps;
    recent.push_back(value);
    if (recent.size() > window) recent.pop_front();
    report.steps_done = step + 1;
    progress->update(step + 1, value);

    const bool last = step + 1 == config.steps;
    if (last || (config.eval_every > 0 && (step + 1) % config.eval_every == 0)) {
      run_evaluation(step + 1);
      if (!last && stop_when && stop_when(report.metrics)) {
        report.stopped_early = true;
        break;
      }
    }
  }
  double sum = 0;
  for (double v : recent) sum += v;
  report.final_loss = sum / static_cast<double>(recent.size());
  report.seconds = train_seconds;
  report.tokens_per_second = train_seconds > 0 ? static_cast<double>(positions) / train_seconds : 0;
  std::string summary = "trained " + std::to_string(report.steps_done) + " steps in " + clock_text(train_seconds) +
                        (report.stopped_early ? " (stopped early)" : "") + ", loss " + cell(report.final_loss);
  for (const auto& [name, value] : report.metrics) summary += ", " + name + " " + cell(value);
  if (progress) progress->finish(summary);
  return report;
}

}  // namespace moelab
