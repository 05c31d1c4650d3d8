// tasks/common/routing_log.cpp — see routing_log.h.
#include "tasks/common/routing_log.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "core/factories.h"
#include "runner/checked_file.h"
#include "runner/job_grid.h"
#include "runner/plot.h"

namespace moelab {

namespace {

const std::vector<std::string> kHeader = {"job", "step", "metric", "value"};
// The load figures logged, in this order, when every MoE layer reports them.
const std::vector<std::string> kFigures = {"max_violation", "token_specialisation", "load_cv"};

}  // namespace

struct RoutingLog::State {
  RunDir dir;
  std::string point;
  std::optional<CsvFile> csv;  // created at the first MoE log point
  RoutingProbe probe;
};

std::string point_routing_file(const std::string& point) { return "points/" + point + ".routing.csv"; }

RoutingLog::RoutingLog(const RunDir& dir, const std::string& point)
    : state_(std::make_shared<State>(State{dir, point, std::nullopt, {}})) {
  std::error_code ec;
  std::filesystem::remove(dir.file(point_routing_file(point)), ec);  // an interrupted try's rows
}

BatchSource RoutingLog::probing(BatchSource inner) {
  state_->probe = RoutingProbe{};  // a new job: its own probe batch and drift history
  return [state = state_, inner = std::move(inner)](Generator& g) {
    TokenBatch b = inner(g);
    if (!state->probe.ids.defined()) state->probe.ids = b.inputs;
    return b;
  };
}

Evaluation RoutingLog::around(Evaluation inner, const std::string& job) {
  return [state = state_, inner = std::move(inner), job](Decoder& model, std::int64_t step) {
    if (parameters_per_expert(model) > 0) {
      // The step's own training forward first: the probe's and the evaluation's forwards replace it.
      const LoadSnapshot load = read_load(model);
      const double drift = state->probe.ids.defined() ? state->probe.drift(model) : -1.0;
      if (!state->csv) state->csv.emplace(state->dir.csv(point_routing_file(state->point), kHeader));
      for (const std::string& f : kFigures)
        if (const auto it = load.mean.find(f); it != load.mean.end())
          state->csv->row({job, std::to_string(step), f, cell(it->second)});
      if (drift >= 0) state->csv->row({job, std::to_string(step), "routing_drift", cell(drift)});
    }
    return inner ? inner(model, step) : std::map<std::string, double>{};
  };
}

nlohmann::json RoutingLog::state() const {
  const std::filesystem::path path = state_->dir.file(point_routing_file(state_->point));
  nlohmann::json j = {{"rows", state_->csv ? read_regular_file(path) : std::string()}, {"last", state_->probe.last}};
  if (state_->probe.ids.defined()) {
    const Tensor ids = state_->probe.ids.to(Device::cpu());
    const std::int32_t* p = ids.data<std::int32_t>();
    j["ids_shape"] = ids.shape().sizes();
    j["ids"] = std::vector<std::int32_t>(p, p + ids.numel());
  }
  return j;
}

void RoutingLog::restore(const nlohmann::json& j) {
  try {
    const std::string rows = j.at("rows").get<std::string>();
    const std::filesystem::path path = state_->dir.file(point_routing_file(state_->point));
    state_->csv.reset();
    std::error_code ec;
    std::filesystem::remove(path, ec);  // rows of a try after the save (the constructor's removal)
    if (!rows.empty()) {
      state_->csv.emplace(state_->dir.csv(point_routing_file(state_->point), kHeader));
      state_->csv->restore(rows);  // the rows as saved (CsvFile::restore checks the header)
    }
    state_->probe.last = j.at("last").get<std::vector<std::vector<std::int32_t>>>();
    if (j.contains("ids"))
      state_->probe.ids = from_vector(j.at("ids").get<std::vector<std::int32_t>>(),
                                      Shape(j.at("ids_shape").get<std::vector<std::int64_t>>()));
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("RoutingLog: a saved state that is not one: ") + e.what());
  }
}

std::size_t write_routing_report(const RunDir& dir, const std::vector<std::string>& points) {
  std::string out = "job,step,metric,value\n";
  std::size_t gathered = 0;
  // job -> metric -> (steps, values), jobs in the order they appear
  std::vector<std::string> jobs;
  std::map<std::string, std::map<std::string, Series>> series;
  for (const std::string& name : points) {
    const std::filesystem::path path = dir.file(point_routing_file(name));
    if (!point_done(dir, name) || !std::filesystem::is_regular_file(std::filesystem::symlink_status(path))) continue;
    ++gathered;
    for (const CsvRow& r : read_csv(path)) {
      out += csv_line({r.text("job"), r.text("step"), r.text("metric"), r.text("value")}) + "\n";
      if (!series.count(r.text("job"))) jobs.push_back(r.text("job"));
      Series& s = series[r.text("job")][r.text("metric")];
      s.title = r.text("job");
      s.x.push_back(r.real("step"));
      s.y.push_back(r.real("value"));
    }
  }
  if (gathered == 0) {
    std::error_code ec;
    std::filesystem::remove(dir.file("routing.csv"), ec);
    return 0;
  }
  dir.write_text("routing.csv", out);
  const std::vector<std::pair<std::string, std::string>> plots = {
      {"routing_drift", "share of the probe batch's tokens whose experts changed since the last log point"},
      {"routing_max_violation", "MaxVio: max expert load / mean - 1 (training step)"}};
  for (const auto& [stem, ylabel] : plots) {
    LinePlot plot;
    plot.title = stem == "routing_drift" ? "Routing drift between log points" : "Load violation over training";
    plot.xlabel = "step";
    plot.ylabel = ylabel;
    const std::string metric = stem == "routing_drift" ? "routing_drift" : "max_violation";
    for (const std::string& job : jobs)
      if (series[job].count(metric)) plot.series.push_back(series[job][metric]);
    if (!plot.series.empty()) plot_lines(plot, dir.path(), stem);
  }
  return gathered;
}

}  // namespace moelab
