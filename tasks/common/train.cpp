// tasks/common/train.cpp — see train.h.
#include "tasks/common/train.h"

#include <cmath>
#include <deque>
#include <limits>

#include "core/error.h"
#include "nn/io/checkpoint.h"
#include "nn/loss.h"
#include "nn/moe/moe_decoder.h"
#include "nn/optim/adam.h"
#include "nn/optim/schedule.h"
#include "nn/progress.h"
#include "runner/checked_file.h"
#include "runner/report.h"
#include "nn/train_loop.h"

namespace moelab {

namespace {

int stop_after_checkpoints = -1;  // simulate_stop_after_checkpoints; -1: off

// The checkpoint's metadata key of the loop's and the caller's state (JSON text).
constexpr char kResumeKey[] = "train_decoder.resume";

}  // namespace

void simulate_stop_after_checkpoints(int n) { stop_after_checkpoints = n < 0 ? -1 : n; }

nlohmann::json resume_number(double value) {
  if (std::isfinite(value)) return value;
  return std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
}

double resume_number(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string text = j.get<std::string>();  // a json::type_error for anything else
  if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (text == "inf" || text == "-inf")
    return text == "inf" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  throw Error("train_decoder: '" + text + "' in a resume state is not a number");
}

nlohmann::json resume_numbers(const std::map<std::string, double>& values) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : values) j[name] = resume_number(value);
  return j;
}

std::map<std::string, double> resume_numbers_from(const nlohmann::json& j) {
  std::map<std::string, double> values;
  for (const auto& [name, value] : j.items()) values[name] = resume_number(value);
  return values;
}

TrainReport train_decoder(Decoder& model, const TrainConfig& config, const BatchSource& next_batch,
                          Generator& data_gen, const Evaluation& evaluate, const std::string& label,
                          CsvFile* metrics,
                          const std::function<bool(const std::map<std::string, double>&)>& stop_when,
                          const TrainResume* resume) {
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
  // A resumed run: everything back as it stood after the saved step's evaluation (TrainResume).
  LoopState start;
  if (resume && std::filesystem::exists(std::filesystem::symlink_status(resume->path))) {
    std::map<std::string, std::string> meta;
    std::int64_t step = 0;
    try {
      step = load_checkpoint(resume->path.string(), model, &opt, &data_gen, &meta);
    } catch (const Error& e) {  // another model's file, a damaged one, one of another version
      throw Error(std::string(e.what()) + " (the checkpoint a stopped run of this job left to resume from: remove '" +
                  resume->path.string() + "' to start the job from its first step)");
    }
    try {
      const nlohmann::json j = nlohmann::json::parse(meta.at(kResumeKey));
      MOELAB_CHECK(j.at("step").get<std::int64_t>() == step && step >= 1 && step < config.steps, "train_decoder",
                   "the checkpoint '", resume->path.string(), "' is of step ", step, ", not a step of this run's ",
                   config.steps);
      start.step = step;
      start.items = j.at("items").get<std::int64_t>();
      start.train_seconds = resume_number(j.at("train_seconds"));
      for (const nlohmann::json& v : j.at("recent")) recent.push_back(resume_number(v));
      report.metrics = resume_numbers_from(j.at("metrics"));
      report.steps_done = step;
      if (metrics) metrics->restore(j.at("metrics_csv").get<std::string>());
      if (resume->restore) resume->restore(j.at("caller"));
    } catch (const std::out_of_range&) {
      throw Error("train_decoder: '" + resume->path.string() + "' is a checkpoint without the state to resume from");
    } catch (const nlohmann::json::exception& e) {
      throw Error("train_decoder: '" + resume->path.string() + "' holds a damaged resume state: " + e.what());
    }
  }
  auto recent_json = [&] {
    nlohmann::json j = nlohmann::json::array();
    for (double v : recent) j.push_back(resume_number(v));  // losses: non-finite ones in allow_non_finite runs
    return j;
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
    const bool stop = stop_when && stop_when(report.metrics);
    if (resume && !stop && state.step < config.steps) {
      // Reads only: saving changes nothing of what training does next.
      const nlohmann::json j = {{"step", state.step},
                                {"items", state.items},
                                {"train_seconds", resume_number(state.train_seconds)},
                                {"recent", recent_json()},
                                {"metrics", resume_numbers(report.metrics)},
                                {"metrics_csv", metrics ? read_regular_file(metrics->path()) : std::string()},
                                {"caller", resume->save ? resume->save() : nlohmann::json()}};
      save_checkpoint(resume->path.string(), model, &opt, state.step, &data_gen, {{kResumeKey, j.dump()}});
      if (stop_after_checkpoints > 0 && --stop_after_checkpoints == 0) {
        stop_after_checkpoints = -1;
        throw Error("train_decoder: stopped after a checkpoint (simulate_stop_after_checkpoints)");
      }
    }
    return stop;
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
                             .eval_every = config.eval_every, .label = label, .loss_name = "cross-entropy",
                             .start = start},
                 hooks);
  report.final_loss = mean_recent();
  report.stopped_early = done.stopped_early;
  report.seconds = done.train_seconds;
  report.tokens_per_second = done.train_seconds > 0 ? static_cast<double>(done.items) / done.train_seconds : 0;
  return report;
}

}  // namespace moelab
