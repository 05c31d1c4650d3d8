// tasks/routers/routers_report.cpp — see routers_report.h.
#include "tasks/routers/routers_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>

#include "runner/job_grid.h"
#include "runner/plot.h"
#include "runner/report.h"
#include "tasks/common/load_probe.h"

namespace moelab {

namespace {

// The averaged load figures, in the tables' order.
const std::vector<std::string> kLoadFigures = {"load_max_over_mean", "load_cv", "dropped_fraction", "router_entropy",
                                               "mean_slots", "max_violation", "token_specialisation",
                                               "routing_drift"};

// One logged step of one point: the averaged figures, and layer 0's relative loads.
struct LogRow {
  std::map<std::string, double> figures;  // kLoadFigures present, and train_loss
  std::map<std::int64_t, double> layer0;  // expert -> relative load
};

// One finished point.
struct Done {
  const RoutersPoint* point = nullptr;
  nlohmann::json j;
  std::map<std::int64_t, LogRow> logs;  // step -> its figures
};

// One (task, scheme) cell over its finished seeds.
struct Cell {
  std::vector<const Done*> seeds;
  std::vector<double> exact, tokens_per_second;
  std::map<std::string, std::vector<double>> mean_load;  // figure -> per seed, the mean over its logs
};

std::string fmt(double v, const char* f) { return std::isfinite(v) ? format_number(v, f) : std::string("-"); }

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

std::string list_text(const std::vector<double>& v, const char* f) {
  std::string out;
  for (double x : v) out += (out.empty() ? "" : ", ") + fmt(x, f);
  return out;
}

// A number of every seed's point file, averaged (e.g. top-p's active parameters at its mean slots,
// which differ per seed, beside the slots per token averaged the same way).
double mean_over_seeds(const Cell& c, const char* key) {
  std::vector<double> v;
  for (const Done* d : c.seeds) v.push_back(d->j.at(key).get<double>());
  return mean_of(v);
}

std::map<std::int64_t, LogRow> read_logs(const RunContext& ctx, const std::string& name) {
  std::map<std::int64_t, LogRow> logs;
  for (const CsvRow& r : read_csv(ctx.dir.file(point_curve_file(name)))) {
    const std::int64_t step = r.integer("step");
    const std::string& metric = r.text("metric");
    std::int64_t layer = 0, expert = 0;
    if (parse_load_name(metric, layer, expert)) {
      if (layer == 0) logs[step].layer0[expert] = r.real("value");
    } else if (metric == "train_loss" ||
               std::find(kLoadFigures.begin(), kLoadFigures.end(), metric) != kLoadFigures.end()) {
      logs[step].figures[metric] = r.real("value");
    }
  }
  return logs;
}

// The task's model, training and metric, one paragraph above its table (the numbers of its first
// finished point: its steps, and the shortest-path graphs' facts, the same for every point).
std::string task_line(const Settings& s, const RoutersTask& task,
                      const std::map<std::pair<std::size_t, std::size_t>, Cell>& cells, std::size_t t) {
  const Done* first = nullptr;
  for (const auto& [key, c] : cells)
    if (key.first == t && !first) first = c.seeds.front();
  if (!first) return "";
  const nlohmann::json& j = first->j;
  const bool book = task.kind == TaskKind::PhoneBook;
  std::ostringstream out;
  out << "Model: d " << cell(j.at("d")) << ", " << s.integer("experts") << " experts of width " << cell(j.at("d"))
      << " per layer; " << cell(j.at("steps")) << " steps of " << s.integer(book ? "batch" : "path_batch")
      << (book ? " entries" : " fresh graphs") << ", lr " << cell(s.real(book ? "lr" : "path_lr")) << ". ";
  if (book) {
    out << "Exact match: all 8 digits right, " << s.integer("test_names") << " names of the book asked.\n\n";
    return out.str();
  }
  const nlohmann::json& f = j.at("task_facts");
  out << "Graphs: p = " << fmt(f.at("p").get<double>(), "%.4f") << ", mean shortest-path length "
      << fmt(f.at("mean_path_length").get<double>(), "%.3f") << " ("
      << (f.at("reached_target").get<bool>() ? "the target" : "the largest reachable at this n") << "); "
      << cell(f.at("test_graphs")) << " held-out test graphs, on which answering the single edge s -> d is right "
      << fmt(100 * f.at("one_edge_baseline").get<double>(), "%.1f%%")
      << " of the time (the trivial baseline). Exact match: the answer equals the smallest shortest path, as "
         "`moelab shortest-path` scores it.\n\n";
  return out.str();
}

}  // namespace

int write_routers_report(const RunContext& ctx, const std::vector<RouterScheme>& schemes,
                         const std::vector<RoutersTask>& tasks, const std::vector<RoutersPoint>& points) {
  const Settings& s = ctx.settings;
  std::vector<Done> done;
  std::vector<std::string> missing, done_names;
  for (const RoutersPoint& p : points) {
    std::optional<nlohmann::json> j = read_point(ctx.dir, p.name);
    if (!j) {
      missing.push_back(p.name);
      continue;
    }
    done.push_back({&p, *j, read_logs(ctx, p.name)});
    done_names.push_back(p.name);
  }
  std::map<std::pair<std::size_t, std::size_t>, Cell> cells;  // (task, scheme)
  for (const Done& d : done) {
    Cell& c = cells[{d.point->task, d.point->scheme}];
    c.seeds.push_back(&d);
    c.exact.push_back(d.j.at("exact_match").get<double>());
    c.tokens_per_second.push_back(d.j.at("tokens_per_second").get<double>());
    for (const std::string& f : kLoadFigures)
      c.mean_load[f].push_back(d.j.at("mean_load").contains(f) ? d.j.at("mean_load").at(f).get<double>() : NAN);
  }

  // results.csv and load_curves.csv (derived whole).
  std::ostringstream results, curves;
  results << "scheme,router,task,seed,total_params,active_params,active_params_at_mean_slots,steps,exact_match,"
             "digit_accuracy,valid_shortest,final_loss";
  for (const std::string& f : kLoadFigures) results << ",mean_" << f;
  for (const std::string& f : kLoadFigures) results << ",final_" << f;
  // tokens_per_second last: no header holds ",tokens_per_second,", the pattern of the metric rows
  // that tests/jobs_grid_check.sh drops as timings.
  results << ",seconds,tokens_per_second\n";
  curves << "scheme,task,seed,step,train_loss";
  for (const std::string& f : kLoadFigures) curves << "," << f;
  curves << "\n";
  // A number of the point, or an empty cell when the point has none (a metric of the other task).
  auto figure_cell = [](const nlohmann::json& m, const std::string& f) {
    return m.contains(f) ? cell(m.at(f).get<double>()) : std::string();
  };
  for (const Done& d : done) {
    const nlohmann::json& j = d.j;
    const std::string& label = tasks[d.point->task].label;
    results << j.at("scheme").get<std::string>() << "," << j.at("router").get<std::string>() << "," << label << ","
            << d.point->seed << "," << cell(j.at("total_params")) << "," << cell(j.at("active_params")) << ","
            << cell(j.at("active_params_at_mean_slots")) << "," << cell(j.at("steps")) << ","
            << cell(j.at("exact_match")) << "," << figure_cell(j, "digit_accuracy") << ","
            << figure_cell(j, "valid_shortest") << "," << cell(j.at("final_loss"));
    for (const std::string& f : kLoadFigures) results << "," << figure_cell(j.at("mean_load"), f);
    for (const std::string& f : kLoadFigures) results << "," << figure_cell(j.at("final_load"), f);
    results << "," << cell(j.at("seconds")) << "," << cell(j.at("tokens_per_second")) << "\n";
    for (const auto& [step, row] : d.logs) {
      curves << schemes[d.point->scheme].name << "," << label << "," << d.point->seed << "," << step
             << "," << (row.figures.count("train_loss") ? cell(row.figures.at("train_loss")) : "");
      for (const std::string& f : kLoadFigures) curves << "," << (row.figures.count(f) ? cell(row.figures.at(f)) : "");
      curves << "\n";
    }
  }
  ctx.dir.write_text("results.csv", results.str());
  ctx.dir.write_text("load_curves.csv", curves.str());
  ctx.dir.write_text("metrics.csv", gather_curves(ctx.dir, done_names));

  // Plots: heat maps of layer 0 (first seed of each cell) on one colour scale, and the CV curves.
  double top = 1;
  for (const auto& [key, c] : cells)
    for (const auto& [step, row] : c.seeds.front()->logs)
      for (const auto& [e, v] : row.layer0) top = std::max(top, v);
  std::vector<std::string> plot_notes;
  auto note = [&](const PlotResult& r) {
    plot_notes.push_back(r.drawn ? r.png.filename().string() : r.message);
  };
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const RoutersTask& task = tasks[t];
    LinePlot cv{.title = "Load imbalance over training: " + task.title,
                .xlabel = "step", .ylabel = "coefficient of variation of the expert loads (mean over layers, seeds)",
                .series = {}};
    LinePlot drift{.title = "Routing drift over training: " + task.title, .xlabel = "step",
                   .ylabel = "share of the probe batch's tokens whose experts changed since the last log",
                   .series = {}};
    for (std::size_t r = 0; r < schemes.size(); ++r) {
      auto it = cells.find({t, r});
      if (it == cells.end()) continue;
      const Cell& c = it->second;
      const Done& first = *c.seeds.front();
      HeatMap h{.title = schemes[r].name + ": layer 0 expert load / mean, " + task.label + ", seed " +
                         std::to_string(first.point->seed),
                .xlabel = "step", .ylabel = "expert", .column_labels = {}, .row_labels = {}, .values = {}};
      std::int64_t experts = 0;
      for (const auto& [step, row] : first.logs) experts = std::max<std::int64_t>(experts, row.layer0.size());
      const std::size_t columns = first.logs.size(), every = std::max<std::size_t>(1, (columns + 11) / 12);
      std::size_t col = 0;
      for (const auto& [step, row] : first.logs)
        h.column_labels.push_back(col++ % every == 0 ? std::to_string(step) : std::string());
      for (std::int64_t e = 0; e < experts; ++e) {
        h.row_labels.push_back(std::to_string(e));
        std::vector<double> values;
        for (const auto& [step, row] : first.logs) values.push_back(row.layer0.count(e) ? row.layer0.at(e) : NAN);
        h.values.push_back(values);
      }
      h.show_values = false, h.color_min = 0, h.color_max = top;
      note(plot_heat_map(h, ctx.dir.path(), "heat_" + task.label + "_" + schemes[r].name));
      // A figure at each step: the mean over the seeds that logged it.
      auto series_of = [&](const std::string& figure) {
        Series line{.title = schemes[r].name, .x = {}, .y = {}, .y_low = {}, .y_high = {}};
        std::map<std::int64_t, std::vector<double>> by_step;
        for (const Done* d : c.seeds)
          for (const auto& [step, row] : d->logs)
            if (row.figures.count(figure)) by_step[step].push_back(row.figures.at(figure));
        for (const auto& [step, v] : by_step) line.x.push_back(static_cast<double>(step)), line.y.push_back(mean_of(v));
        return line;
      };
      cv.series.push_back(series_of("load_cv"));
      Series moved = series_of("routing_drift");
      if (!moved.x.empty()) drift.series.push_back(moved);  // records made before the probe have none
    }
    note(plot_lines(cv, ctx.dir.path(), "load_cv_" + task.label));
    if (!drift.series.empty()) note(plot_lines(drift, ctx.dir.path(), "routing_drift_" + task.label));
  }

  // The tables, one per task: accuracy and load (byte for byte the same whichever way the
  // points ran), then speed (every line of it says tokens/s: timings differ run to run).
  std::ostringstream tables, speed, verdict;
  const auto topk_index = [&]() -> std::optional<std::size_t> {
    for (std::size_t r = 0; r < schemes.size(); ++r)
      if (schemes[r].name == "topk") return r;
    return std::nullopt;
  }();
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const RoutersTask& task = tasks[t];
    tables << "### " << task.title << "\n\n" << task_line(s, task, cells, t)
           << "| scheme | exact match (median) | per seed | max/mean load | load CV | dropped | router entropy | "
              "slots/token | active params | total params |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n";
    speed << "| scheme | tokens/s, " << task.label << " (mean over seeds) | tokens/s vs topk |\n|---|---:|---:|\n";
    const Cell* base = topk_index && cells.count({t, *topk_index}) ? &cells.at({t, *topk_index}) : nullptr;
    for (std::size_t r = 0; r < schemes.size(); ++r) {
      auto it = cells.find({t, r});
      if (it == cells.end()) continue;
      const Cell& c = it->second;
      const nlohmann::json& j = c.seeds.front()->j;
      const double slots = schemes[r].variable_k ? mean_of(c.mean_load.at("mean_slots"))
                                                 : static_cast<double>(schemes[r].k + schemes[r].shared_experts);
      tables << "| " << schemes[r].name << " | " << fmt(100 * median(c.exact), "%.1f%%") << " | "
             << list_text(c.exact, "%.3f") << " | " << fmt(mean_of(c.mean_load.at("load_max_over_mean")), "%.3f")
             << " | " << fmt(mean_of(c.mean_load.at("load_cv")), "%.3f") << " | "
             << fmt(mean_of(c.mean_load.at("dropped_fraction")), "%.4f") << " | "
             << fmt(mean_of(c.mean_load.at("router_entropy")), "%.3f") << " | " << fmt(slots, "%.2f") << " | "
             << fmt(mean_over_seeds(c, "active_params_at_mean_slots"), "%.6g") << (schemes[r].variable_k ? " (mean)" : "")
             << " | " << cell(j.at("total_params").get<double>()) << " |\n";
      const double tps = mean_of(c.tokens_per_second);
      speed << "| " << schemes[r].name << " | " << fmt(tps, "%.0f") << " tokens/s | "
            << (base ? fmt(tps / mean_of(base->tokens_per_second), "%.2fx") : std::string("-")) << " |\n";
    }
    tables << "\n";
    speed << "\n";

    // The verdict for this task, against topk (the baseline without any balancing).
    if (!base) continue;
    const double base_cv = mean_of(base->mean_load.at("load_cv")), base_exact = median(base->exact);
    verdict << "- **" << task.title << "**: topk (no balancing) " << (task.kind == TaskKind::PhoneBook ? "recalls " : "answers ")
            << fmt(100 * base_exact, "%.1f%%")
            << (task.kind == TaskKind::ShortestPath && base->seeds.front()->j.at("task_facts").contains("one_edge_baseline")
                    ? " (answering the single edge s -> d: " +
                          fmt(100 * base->seeds.front()->j.at("task_facts").at("one_edge_baseline").get<double>(), "%.1f%%") + ")"
                    : std::string())
            << " (median over " << base->exact.size() << " seed(s)) with a mean load CV of " << fmt(base_cv, "%.3f")
            << " (max/mean " << fmt(mean_of(base->mean_load.at("load_max_over_mean")), "%.2f") << ").\n";
    for (std::size_t r = 0; r < schemes.size(); ++r) {
      if (r == *topk_index || !cells.count({t, r})) continue;
      const Cell& c = cells.at({t, r});
      const std::vector<double>& cvs = c.mean_load.at("load_cv");
      int lower = 0, compared = 0;
      for (std::size_t i = 0; i < c.seeds.size(); ++i)
        for (std::size_t b = 0; b < base->seeds.size(); ++b)
          if (base->seeds[b]->point->seed == c.seeds[i]->point->seed)
            ++compared, lower += cvs[i] < base->mean_load.at("load_cv")[b];
      const double gap = 100 * (median(c.exact) - base_exact);
      const bool above = *std::min_element(c.exact.begin(), c.exact.end()) >
                         *std::max_element(base->exact.begin(), base->exact.end());
      const bool below = *std::max_element(c.exact.begin(), c.exact.end()) <
                         *std::min_element(base->exact.begin(), base->exact.end());
      verdict << "  - " << schemes[r].name << ": load CV " << fmt(mean_of(cvs), "%.3f") << " ("
              << fmt(mean_of(cvs) / base_cv, "%.2f") << "x topk's; lower for " << lower << " of " << compared
              << " seed(s)), exact match " << fmt(100 * median(c.exact), "%.1f%%") << " ("
              << (gap >= 0 ? "+" : "") << fmt(gap, "%.1f") << " points"
              << (c.exact.size() > 1 ? (above ? ", above topk for every seed" : below ? ", below topk for every seed"
                                                                                      : ", within the seeds' spread")
                                     : "")
              << ")";
      if (schemes[r].variable_k)
        verdict << "; " << fmt(mean_of(c.mean_load.at("mean_slots")), "%.2f")
                << " experts per token on average (topk: 2): its active parameters vary per token, "
                << fmt(mean_over_seeds(c, "active_params_at_mean_slots"), "%.6g") << " at the mean against "
                << cell(base->seeds.front()->j.at("active_params").get<double>());
      if (mean_of(c.mean_load.at("dropped_fraction")) > 0)
        verdict << "; drops " << fmt(100 * mean_of(c.mean_load.at("dropped_fraction")), "%.2f%%") << " of assignments";
      verdict << ".\n";
    }
  }

  // Balanced assignment: balanced by construction in training, checked at every logged step.
  std::ostringstream balance;
  for (std::size_t r = 0; r < schemes.size(); ++r) {
    if (schemes[r].router != "balanced") continue;
    double worst_ratio = 0, worst_cv = 0;
    std::size_t logs = 0;
    for (const auto& [key, c] : cells)
      if (key.second == r)
        for (const Done* d : c.seeds)
          for (const auto& [step, row] : d->logs) {
            ++logs;
            worst_ratio = std::max(worst_ratio, row.figures.count("load_max_over_mean") ? row.figures.at("load_max_over_mean") : NAN);
            worst_cv = std::max(worst_cv, row.figures.count("load_cv") ? row.figures.at("load_cv") : NAN);
          }
    // Sinkhorn (assignment=sinkhorn) balances the scaled scores, not the top-k taken from them.
    const auto assignment = schemes[r].options.find("assignment");
    const bool exact_balance = assignment == schemes[r].options.end() || assignment->second != "sinkhorn";
    balance << "- " << schemes[r].name << ": at all " << logs << " logged training steps the largest max/mean load is "
            << fmt(worst_ratio, "%.4f") << " and the largest load CV " << fmt(worst_cv, "%.4f")
            << (exact_balance ? " (balanced by construction when E divides the batch's 2T assignments).\n"
                              : " (Sinkhorn balances the scaled scores; the top-k taken from them only approximately).\n");
  }

  std::ostringstream summary;
  summary << "# Routing schemes side by side: phone-book memorization and shortest path\n\n"
          << "Preset `" << ctx.preset << "`, run seed " << ctx.seed << ", seeds " << s.to_json()["seeds"].dump() << ", "
          << ctx.threads << " thread(s). Settings: config.json. One file per point: points/<name>.json; every run: "
             "results.csv; load figures at every logged step: load_curves.csv; curves incl. per-expert loads: "
             "metrics.csv.\n\n"
          << "Model: " << s.integer("layers") << " layers, " << s.integer("experts")
          << " experts per layer, each of the task's width (the table of each task gives it and the training); the "
             "load is read every " << s.integer("log_every")
          << " steps from that step's training forward. Load figures are means over the layers and the logged "
             "steps, then over seeds; CV = std / mean of the experts' kept assignments (0: perfectly even); router "
             "entropy in nats over the softmax of the router's logits (\"-\": aux-free scores experts with "
             "sigmoids, not a distribution). A scheme differs from topk beyond the seeds' spread when its exact match "
             "is above (or below) topk's for every seed, all seeds' values on one side.\n\n"
          << "Schemes:\n\n";
  for (const RouterScheme& r : schemes) summary << "- **" << r.name << "**: " << r.description << "\n";
  summary << "\n## Accuracy and load balance\n\n" << tables.str() << "## Speed\n\n" << speed.str()
          << "## Verdict\n\n" << balance.str() << verdict.str() << "\n## Caveats\n\n"
          << "- Equal active parameters: every scheme runs 2 experts of width d per token (shared-top1: the shared one "
             "and 1 routed, of E - 1 routed, so its expert parameters are topk's too; its router has one row fewer), "
             "except top-p, whose number of "
             "experts is chosen per token: its active parameters vary per token, the table gives them at its mean "
             "slots per token.\n"
          << "- balanced's training assignment depends on every token of the batch, later positions included (it "
             "is not causal); its evaluation routes each token to its top-2 (BASE's test-time rule), so it is "
             "tested with a rule it was not trained with.\n"
          << "- Expert choice is not in the comparison: its experts pick tokens across the batch, future positions "
             "included, so a causal decoder trained with it leaks the future, and greedy decoding routes differently "
             "from training.\n";
  if (!missing.empty()) {
    summary << "- " << missing.size() << " point(s) not done yet, left out:";
    for (const std::string& m : missing) summary << " " << m;
    summary << "\n";
  }
  summary << "\n## Plots\n\n";
  for (const std::string& n : plot_notes) summary << "- " << n << "\n";
  ctx.dir.write_text("summary.md", summary.str());

  std::printf("\n%s%s%s%s", tables.str().c_str(), speed.str().c_str(), balance.str().c_str(), verdict.str().c_str());
  if (!missing.empty()) std::printf("%zu point(s) not done yet (mode=list prints them)\n", missing.size());
  std::printf("summary: %s\n", ctx.dir.file("summary.md").c_str());
  return 0;
}

}  // namespace moelab
