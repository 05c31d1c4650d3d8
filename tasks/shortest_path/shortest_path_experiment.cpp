// tasks/shortest_path/shortest_path_experiment.cpp — settings, presets, the sweep and the report
// of `moelab shortest-path` (see the header).
#include "tasks/shortest_path/shortest_path_experiment.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>

#include "runner/job_grid.h"
#include "tasks/common/precision_setting.h"
#include "tasks/common/routing_log.h"
#include "tasks/common/memory_check.h"
#include "tasks/common/models.h"
#include "tasks/common/router_settings.h"
#include "runner/report.h"
#include "runner/statistics.h"
#include "tasks/common/train.h"
#include "tasks/shortest_path/graph.h"
#include "tasks/shortest_path/graph_data.h"
#include "tasks/shortest_path/shortest_path_claims.h"

namespace moelab {

namespace {

using shortest_path::Calibration;
using shortest_path::TestSet;

Settings shortest_path_settings() {
  Settings s;
  s.add_int("n", 8, "vertices per graph", 3, 200);
  s.add_real("target_length", 3.5, "mean shortest-path length p is calibrated to (the peak when unreachable)", 1,
             100);
  s.add_real("p", 0, "edge probability; 0: calibrate it to target_length", 0, 1);
  s.add_int("layers", 2, "decoder blocks", 1, 256);
  s.add_int("heads", 4, "attention heads (d / heads must be even)", 1, 256);
  s.add_int_list("dense_widths", {32, 64, 96}, "widths d of the dense models (FFN width = d)", 2, 1 << 16);
  s.add_int_list("moe_widths", {32}, "widths d of the MoE models", 2, 1 << 16);
  s.add_int_list("experts", {4, 8, 16}, "expert counts E of the MoE models", 1, 4096);
  s.add_int("k", 2, "experts per token (router topk: Mixtral gates, no dropping)", 1, 4096);
  add_router_settings(s, "every MoE model");
  add_activation_setting(s);
  s.add_int("steps", 2000, "optimizer steps per training run (fresh graphs every step)", 1, 1e9);
  s.add_int("batch", 64, "graphs per optimizer step", 1, 1 << 20);
  s.add_real("lr", 3e-3, "peak learning rate", 1e-9, 10);
  s.add_real("weight_decay", 0.1, "AdamW weight decay on matrices", 0, 10);
  s.add_real("warmup_fraction", 0.2, "share of the steps with a linear warmup (then linear decay to 0)", 0, 1);
  s.add_real("clip", 1.0, "gradient clipping: max global norm (0: none)", 0, 1e9);
  s.add_int("eval_every", 500, "evaluate on the test graphs every N steps", 1, 1e9);
  s.add_int("test_examples", 1000, "held-out test graphs", 1, 1e7);
  s.add_int_list("seeds", {0, 1, 2}, "training seeds per model (weights and data; the test set is fixed); the report "
                 "gives mean +- std over them", 0, 1e9);
  add_job_settings(s, "moe-d32-8e-seed0");
  add_precision_setting(s);
  // A job's weights and data depend on its own seed only: more seeds add jobs, they change none.
  s.may_change_on_resume({"seeds"});
  return s;
}

std::vector<Preset> shortest_path_presets() {
  return {
      {"cpu",
       "docs/EXPERIMENTS.md's CPU setting: 8-vertex graphs (p at the peak mean length, 3.5 is unreachable), dense d "
       "32/64/96, MoE d 32 with 4/8/16 experts, 2000 steps of 64, seeds 0, 1, 2 (18 points of about 4 minutes on one "
       "core: about 75 core-minutes, 40 minutes with mode=list | parallel -j2)",
       {}},
      {"cpu-seeds",
       "the cpu grid with 10 seeds per model (0-9) for escape rates with binomial intervals and paired tests that "
       "can reach p < 0.05: 60 points of about 3 minutes on one core (176 core-minutes recorded, "
       "docs/results/shortest-path-cpu-seeds), about 1.5 hours as jobs, two at a time",
       {{"seeds", "0,1,2,3,4,5,6,7,8,9"}}},
      {"paper",
       "the paper's Figure 4b (a GPU and days): 50-vertex graphs at mean length 3.5, 12 layers, dense d "
       "256/512/1024, MoE d 256/512 with 8/16/32/64 experts, about 1e6 training examples",
       {{"n", "50"}, {"layers", "12"}, {"heads", "8"}, {"dense_widths", "256,512,1024"}, {"moe_widths", "256,512"},
        {"experts", "8,16,32,64"}, {"steps", "31250"}, {"batch", "32"}, {"lr", "5e-4"}, {"eval_every", "5000"},
        {"seeds", "0,1,2"}}},
  };
}

// The job's name in metrics.csv and on the progress line.
std::string job_label(const ModelSpec& spec, std::int64_t seed) { return spec.name() + " seed " + std::to_string(seed); }

std::vector<ModelSpec> shortest_path_models(const Settings& s) {
  std::vector<ModelSpec> models = model_grid(s.ints("dense_widths"), s.ints("moe_widths"), s.ints("experts"),
                                             s.integer("k"), s.integer("layers"), s.integer("heads"));
  apply_router_settings(s, models);
  apply_activation_setting(s, models);
  return models;
}

// The grid: models (outer) x seeds, named "<model>-seed<t>".
struct Point {
  std::size_t model = 0;
  std::int64_t seed = 0;
  std::string name;
};

std::vector<Point> grid_of(const Settings& s) {
  std::vector<Point> out;
  const std::vector<ModelSpec> models = shortest_path_models(s);
  for (std::size_t m = 0; m < models.size(); ++m)
    for (std::int64_t seed : s.ints("seeds")) out.push_back({m, seed, models[m].name() + "-seed" + std::to_string(seed)});
  return out;
}

void validate_shortest_path(const Settings& s) {
  check_model_grid(shortest_path_models(s));
  if (s.ints("seeds").empty()) throw UsageError("seeds: give at least one value");
  // The shortest possible sequence (graph_data.h): BOS, one edge, SEP s d /, a path of 2, EOS = 11
  // tokens, 10 input positions; real graphs have many more edges, so this bounds from below.
  const std::int64_t n = s.integer("n"), batch = s.integer("batch");
  for (const ModelSpec& m : shortest_path_models(s))
    check_memory_bound(m.name() + " with batch = " + std::to_string(batch) + " graphs",
                       decoder_step_bytes_lower_bound(m, 10.0 * static_cast<double>(batch), n + 6),
                       "a training step on sequences of the shortest possible length, 11 tokens");
  std::vector<std::string> names;
  for (const Point& p : grid_of(s)) names.push_back(p.name);
  validate_job_settings(s, names);
}

int write_report(const RunContext& ctx, const std::vector<ModelSpec>& models, const Calibration& cal,
                 double baseline);

const std::vector<std::string> kResultsHeader = {"model", "family", "d", "experts", "k", "total_params",
                                                 "active_params", "seed", "n", "p", "steps", "exact_match",
                                                 "valid_shortest", "final_loss", "seconds"};

int run_shortest_path(const RunContext& ctx) {
  const Settings& s = ctx.settings;
  validate_shortest_path(s);
  const std::vector<ModelSpec> models = shortest_path_models(s);
  const std::vector<Point> points = grid_of(s);
  const int n = static_cast<int>(s.integer("n"));

  // The edge probability (given, or calibrated once from the run seed: the same p for every model
  // and every process of a jobs run) and the test set: only when a point runs or the report is
  // written (mode=list prints command lines only).
  std::optional<shortest_path::RunGraphs> graphs;
  auto prepare = [&]() -> const shortest_path::RunGraphs& {
    if (!graphs)
      graphs = shortest_path::run_graphs(n, s.real("p"), s.real("target_length"), s.integer("test_examples"), ctx.seed);
    return *graphs;
  };
  const shortest_path::Vocab vocab{n};
  const std::int64_t max_seq = shortest_path::max_sequence_length(n);
  const std::int64_t batch = s.integer("batch");

  JobGrid g = job_grid_for(shortest_path_experiment());
  for (const Point& p : points) g.points.push_back(p.name);
  g.run_point = [&](std::size_t i) {
    const std::size_t mi = points[i].model;
    const ModelSpec& spec = models[mi];
    const std::int64_t seed = points[i].seed;
    const Calibration& cal = prepare().cal;
    const TestSet& test = prepare().test;
    CsvFile metrics = ctx.dir.csv(point_curve_file(points[i].name), {"job", "step", "metric", "value"});
    Generator init_gen(static_cast<std::uint64_t>(seed) * 7919 + mi), data_gen(static_cast<std::uint64_t>(seed) * 104729 + 1);
    std::unique_ptr<Decoder> model = build_decoder(spec, vocab.size(), max_seq, init_gen);
    model->to(ctx.device);  // before train_decoder builds its optimizer
    const ModelSize size = model_size(*model);
    TrainConfig tc;
    tc.steps = s.integer("steps"), tc.lr = s.real("lr"), tc.weight_decay = s.real("weight_decay");
    tc.warmup_fraction = s.real("warmup_fraction"), tc.clip = s.real("clip"), tc.eval_every = s.integer("eval_every");
    shortest_path::PathResult last{};
    RoutingLog routing(ctx.dir, points[i].name);  // MoE models: MaxVio, specialisation, drift (routing_log.h)
    const std::string job = job_label(spec, seed);
    const TrainReport report = train_decoder(
        *model, tc,
        routing.probing([&](Generator& gen) { return shortest_path::training_batch(n, cal.p, batch, gen, &test); }),
        data_gen,
        routing.around(
            [&](Decoder& m, std::int64_t) {
              last = shortest_path::evaluate(m, test, 128);
              return std::map<std::string, double>{{"exact_match", last.exact_match},
                                                   {"valid_shortest", last.valid_shortest}};
            },
            job),
        job, &metrics);
    // The results.csv row, as cells, in kResultsHeader's order.
    const std::vector<std::string> row = {spec.name(), spec.family(), cell(spec.d), cell(spec.experts),
                                          cell(spec.moe() ? spec.k : 0), cell(size.non_embedding), cell(size.active),
                                          cell(seed), cell(n), cell(cal.p), cell(report.steps_done),
                                          cell(last.exact_match), cell(last.valid_shortest), cell(report.final_loss),
                                          cell(report.seconds)};
    nlohmann::ordered_json j;
    j["point"] = points[i].name;
    for (std::size_t c = 0; c < row.size(); ++c) j["row"][kResultsHeader[c]] = row[c];
    write_point(ctx.dir, points[i].name, j);  // last: its presence marks the point done
  };
  g.report = [&] {
    // results.csv and metrics.csv from the finished points, in grid order.
    ctx.dir.write_text("results.csv", gather_rows(ctx.dir, g.points, kResultsHeader));
    ctx.dir.write_text("metrics.csv", gather_curves(ctx.dir, g.points));
    write_routing_report(ctx.dir, g.points);  // routing.csv and its plots (MoE points)
    write_report(ctx, models, prepare().cal, prepare().baseline);
  };
  return run_job_grid(ctx, g);
}

int write_report(const RunContext& ctx, const std::vector<ModelSpec>& models, const Calibration& cal,
                 double baseline) {
  struct Row {
    ModelSpec spec;
    double total = 0, active = 0;
    std::vector<double> exact, valid;
    std::vector<std::int64_t> seeds;  // the seed of each exact / valid entry
  };
  std::vector<Row> rows;
  for (const ModelSpec& m : models) rows.push_back({m, 0, 0, {}, {}, {}});
  for (const auto& r : read_csv(ctx.dir.file("results.csv")))
    for (Row& row : rows)
      if (row.spec.name() == r.at("model")) {
        row.total = r.real("total_params"), row.active = r.real("active_params");
        row.exact.push_back(r.real("exact_match"));
        row.valid.push_back(r.real("valid_shortest"));
        row.seeds.push_back(r.integer("seed"));
      }
  // A run escaped the plateau when its exact match is at least kEscapeMargin above the trivial
  // baseline (answering with the edge s -> d): the paper's Figure 4b runs either stay near it or
  // leave it by tens of points, and so do ours (docs/EXPERIMENTS.md).
  constexpr double kEscapeMargin = 0.10;
  auto escapes = [&](const Row& r) {
    std::int64_t k = 0;
    for (double e : r.exact) k += e >= baseline + kEscapeMargin;
    return k;
  };
  // The paired comparison of two rows over the seeds both ran: exact match, in seed order.
  auto paired = [](const Row& a, const Row& b) {
    std::vector<double> x, y;
    for (std::size_t i = 0; i < a.seeds.size(); ++i)
      for (std::size_t j = 0; j < b.seeds.size(); ++j)
        if (a.seeds[i] == b.seeds[j]) x.push_back(a.exact[i]), y.push_back(b.exact[j]);
    return std::make_pair(x, y);
  };
  auto paired_note = [&](const Row& a, const Row& b) {
    const auto [x, y] = paired(a, b);
    if (x.empty()) return std::string("no seed in common");
    return "paired over " + std::to_string(x.size()) + " seeds: sign-flip p = " +
           format_number(paired_sign_flip_p(x, y), "%.3g") + ", the smallest possible " +
           format_number(smallest_sign_flip_p(static_cast<std::int64_t>(x.size())), "%.3g");
  };

  std::ostringstream csv, table;
  csv << "model,family,d,experts,total_params,active_params,seeds,exact_match_mean,exact_match_std,"
         "valid_shortest_mean,valid_shortest_std\n";
  table << "| model | total params | active params | seeds | exact match | valid shortest path | escaped the plateau |\n"
        << "|---|---:|---:|---:|---:|---:|---:|\n";
  std::vector<FamilyPoint> by_total, by_active;
  std::vector<double> acc_v, tot_v, act_v;
  for (const Row& r : rows) {
    if (r.exact.empty()) continue;
    const MeanStd e = mean_std(r.exact), v = mean_std(r.valid);
    csv << r.spec.name() << "," << r.spec.family() << "," << r.spec.d << "," << r.spec.experts << "," << cell(r.total)
        << "," << cell(r.active) << "," << r.exact.size() << "," << cell(e.mean) << "," << cell(e.std) << ","
        << cell(v.mean) << "," << cell(v.std) << "\n";
    table << "| " << r.spec.name() << " | " << cell(r.total) << " | " << cell(r.active) << " | " << r.exact.size()
          << " | " << format_number(100 * e.mean, "%.1f") << " ± " << format_number(100 * e.std, "%.1f") << "% | "
          << format_number(100 * v.mean, "%.1f") << " ± " << format_number(100 * v.std, "%.1f") << "% | ";
    const std::int64_t k = escapes(r), n = static_cast<std::int64_t>(r.exact.size());
    const Interval w = wilson_interval(k, n);
    table << k << " of " << n << " (" << format_number(100 * w.low, "%.0f") << "-" << format_number(100 * w.high, "%.0f")
          << "%) |\n";
    const bool bars = r.exact.size() > 1;  // mean +- sample std over seeds
    const double low = bars ? 100 * (e.mean - e.std) : NAN, high = bars ? 100 * (e.mean + e.std) : NAN;
    by_total.push_back({r.spec.family(), r.total, 100 * e.mean, low, high});
    by_active.push_back({r.spec.family(), r.active, 100 * e.mean, low, high});
    acc_v.push_back(e.mean), tot_v.push_back(r.total), act_v.push_back(r.active);
  }
  ctx.dir.write_text("accuracy.csv", csv.str());

  const std::vector<std::string> plot_notes =
      plot_against_parameters(ctx.dir.path(), "fig4b", "Shortest path on unseen graphs: exact-match accuracy",
                              "test accuracy (%), mean over seeds, bars: +- std", by_total, by_active);

  // The verdict: what experts add at a fixed width, against what width adds among dense models
  // (means over seeds). A gain exceeds the seeds' spread when it is larger than the two models'
  // standard deviations added together.
  std::ostringstream verdict;
  double best_expert_gain = -1, best_width_gain = -1, expert_spread = 0, width_spread = 0;
  auto spread = [](const Row& a, const Row& b) { return mean_std(a.exact).std + mean_std(b.exact).std; };
  for (const Row& moe : rows) {
    if (!moe.spec.moe() || moe.exact.empty()) continue;
    for (const Row& dense : rows) {
      if (dense.spec.moe() || dense.exact.empty() || dense.spec.d != moe.spec.d) continue;
      const double gain = mean_std(moe.exact).mean - mean_std(dense.exact).mean;
      if (gain > best_expert_gain) best_expert_gain = gain, expert_spread = spread(moe, dense);
      verdict << "- " << moe.spec.name() << " (" << cell(moe.total) << " total) vs " << dense.spec.name() << " ("
              << cell(dense.total) << "): " << format_number(100 * gain, "%+.1f") << " points ("
              << (std::fabs(gain) > spread(moe, dense) ? "beyond" : "within") << " the seeds' spread, "
              << format_number(100 * spread(moe, dense), "%.1f") << "; " << paired_note(moe, dense) << ").\n";
    }
    for (const Row& wide : rows) {
      if (wide.spec.moe() || wide.exact.empty() || wide.spec.d <= moe.spec.d || wide.total > moe.total) continue;
      // A wider dense model with no more total parameters than the MoE model.
      for (const Row& dense : rows)
        if (!dense.spec.moe() && !dense.exact.empty() && dense.spec.d == moe.spec.d) {
          const double gain = mean_std(wide.exact).mean - mean_std(dense.exact).mean;
          if (gain > best_width_gain) best_width_gain = gain, width_spread = spread(wide, dense);
        }
    }
  }
  const double rho_total = rank_correlation(acc_v, tot_v), rho_active = rank_correlation(acc_v, act_v);
  verdict << "- Rank correlation of accuracy with total parameters " << format_number(rho_total, "%.2f")
          << ", with active parameters " << format_number(rho_active, "%.2f") << " (" << acc_v.size() << " models).\n";
  std::string conclusion;
  if (best_expert_gain < -0.5)
    conclusion = "No MoE model has a dense model of the same width in this sweep: no equal-width comparison.";
  else if (best_width_gain >= 0)
    conclusion = std::string(best_width_gain > best_expert_gain ? "Widening gains more than adding experts: "
                                                                : "Adding experts gains at least as much as widening: ") +
                 "the best gain from experts at a fixed width is " + format_number(100 * best_expert_gain, "%+.1f") +
                 " points (" + (std::fabs(best_expert_gain) > expert_spread ? "beyond" : "within") +
                 " the seeds' spread, " + format_number(100 * expert_spread, "%.1f") +
                 "), the gain from a wider dense model with no more total parameters is " +
                 format_number(100 * best_width_gain, "%+.1f") + " points (" +
                 (std::fabs(best_width_gain) > width_spread ? "beyond" : "within") + " the spread, " +
                 format_number(100 * width_spread, "%.1f") + "); the difference of the two gains, " +
                 format_number(100 * (best_width_gain - best_expert_gain), "%+.1f") + " points, is " +
                 (std::fabs(best_width_gain - best_expert_gain) > expert_spread + width_spread ? "beyond" : "within") +
                 " their spreads added (" + format_number(100 * (expert_spread + width_spread), "%.1f") + ").";
  else
    conclusion = "The best gain from experts at a fixed width is " + format_number(100 * best_expert_gain, "%+.1f") +
                 " points; the sweep has no wider dense model with no more total parameters to compare with.";

  std::ostringstream summary;
  summary << "# Shortest path on unseen graphs (Mixture of Parrots, Figure 4b)\n\n"
          << "Preset `" << ctx.preset << "`, " << ctx.threads << (ctx.threads == 1 ? " thread" : " threads")
          << ". Settings: config.json; every run: results.csv; training curves: metrics.csv.\n\n"
          << "Graphs: n = " << ctx.settings.integer("n") << ", p = " << format_number(cal.p, "%.4f")
          << ", mean shortest-path length of the queries " << format_number(cal.mean_length, "%.3f") << " ("
          << (cal.reached_target ? "calibrated to the target " : "the largest reachable at this n; the target ")
          << format_number(ctx.settings.real("target_length"), "%.2f")
          << (cal.reached_target ? ")" : " is not reachable)") << ". Test set: "
          << ctx.settings.integer("test_examples") << " held-out graphs; answering with the single edge s -> d "
          << "is right on " << format_number(100 * baseline, "%.1f") << "% of them (the trivial baseline).\n\n"
          << "Exact match: the answer equals the lexicographically smallest shortest path. Valid shortest path: the "
             "answer is some shortest path. Mean ± std over training seeds.\n\n"
          << table.str() << "\n## Comparisons\n\n"
          << "The numbers behind the Claims section, pair by pair; the paper's claims are judged there only (`moelab claims --check` recomputes that section from the CSV files).\n\n"
          << "The rule: a gain (a difference of mean exact match over seeds) exceeds the seeds' spread when it is "
             "larger than the two standard deviations (sample, over seeds) added together. Each equal-width "
             "comparison also gives the exact paired sign-flip test over the seeds both models ran "
             "(runner/statistics.h): with n seeds no p below 2 / 2^n is possible (0.25 for 3 seeds), so only "
             "the cpu-seeds preset's 10 seeds can show a difference at 0.05. A run escaped the plateau when its exact "
             "match is at least 10 points above the trivial baseline; the escape column gives the count and its Wilson "
             "95% interval.\n\n"
          << conclusion << "\n\n" << verdict.str() << "\n## Plots\n\n";
  for (const std::string& note : plot_notes) summary << "- " << note << "\n";
  ctx.dir.write_text("summary.md", summary.str());

  std::printf("\n%s\ntrivial baseline (one-edge answers): %.1f%%\n%s\n", table.str().c_str(), 100 * baseline,
              conclusion.c_str());
  for (const std::string& note : plot_notes) std::printf("plot: %s\n", note.c_str());
  std::printf("summary: %s\n", ctx.dir.file("summary.md").c_str());
  return 0;
}

}  // namespace

Experiment shortest_path_experiment() {
  Experiment e;
  e.name = "shortest-path";
  e.summary = "Mixture of Parrots Fig. 4b: shortest paths in unseen graphs, dense vs MoE";
  e.details =
      "Calibrates the edge probability for n-vertex graphs, trains each model of the grid (dense widths; MoE "
      "widths x expert counts, routed by top-k or the `router` setting's scheme) on fresh graphs with the loss on the answer only, and reports exact-match "
      "accuracy on held-out graphs (mean +- std over `seeds`) against total and active parameters. Every (model, "
      "seed) is an independent job: --set mode=list prints one command line per missing point (docs/jobs.md), "
      "mode=point runs one, mode=report gathers them, mode=all (default) runs the missing ones and reports.";
  e.settings = shortest_path_settings;
  e.presets = shortest_path_presets();
  e.default_preset = "cpu";
  e.validate = validate_shortest_path;
  e.run = run_shortest_path;
  e.claims = shortest_path_claims;
  return e;
}

}  // namespace moelab
