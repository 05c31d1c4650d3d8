// tasks/shortest_path/shortest_path_experiment.cpp — settings, presets, the sweep and the report
// of `moelab shortest-path` (see the header).
#include "tasks/shortest_path/shortest_path_experiment.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "tasks/common/models.h"
#include "tasks/common/report.h"
#include "tasks/common/train.h"
#include "tasks/shortest_path/graph.h"
#include "tasks/shortest_path/graph_data.h"

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
  s.add_int("k", 2, "experts per token (top-k, Mixtral gates, no dropping)", 1, 4096);
  s.add_int("steps", 2000, "optimizer steps per training run (fresh graphs every step)", 1, 1e9);
  s.add_int("batch", 64, "graphs per optimizer step", 1, 1 << 20);
  s.add_real("lr", 3e-3, "peak learning rate", 1e-9, 10);
  s.add_real("weight_decay", 0.1, "AdamW weight decay on matrices", 0, 10);
  s.add_real("warmup_fraction", 0.2, "share of the steps with a linear warmup (then linear decay to 0)", 0, 1);
  s.add_real("clip", 1.0, "gradient clipping: max global norm (0: none)", 0, 1e9);
  s.add_int("eval_every", 500, "evaluate on the test graphs every N steps", 1, 1e9);
  s.add_int("test_examples", 1000, "held-out test graphs", 1, 1e7);
  s.add_int_list("seeds", {0, 1}, "training seeds per model (weights and data; the test set is fixed)", 0, 1e9);
  // A job's weights and data depend on its own seed only: more seeds add jobs, they change none.
  s.may_change_on_resume({"seeds"});
  return s;
}

std::vector<Preset> shortest_path_presets() {
  return {
      {"cpu",
       "docs/EXPERIMENTS.md's CPU setting (within an hour on 2 cores): 8-vertex graphs (p at the peak mean length, "
       "3.5 is unreachable), dense d 32/64/96, MoE d 32 with 4/8/16 experts, 2000 steps of 64, seeds 0 and 1",
       {}},
      {"paper",
       "the paper's Figure 4b (a GPU and days): 50-vertex graphs at mean length 3.5, 12 layers, dense d "
       "256/512/1024, MoE d 256/512 with 8/16/32/64 experts, about 1e6 training examples",
       {{"n", "50"}, {"layers", "12"}, {"heads", "8"}, {"dense_widths", "256,512,1024"}, {"moe_widths", "256,512"},
        {"experts", "8,16,32,64"}, {"steps", "31250"}, {"batch", "32"}, {"lr", "5e-4"}, {"eval_every", "5000"},
        {"seeds", "0"}}},
  };
}

std::string job_key(const std::string& model, std::int64_t seed) { return model + "|" + std::to_string(seed); }

// The job's name in metrics.csv and on the progress line.
std::string job_label(const ModelSpec& spec, std::int64_t seed) { return spec.name() + " seed " + std::to_string(seed); }

std::vector<ModelSpec> shortest_path_models(const Settings& s) {
  return model_grid(s.ints("dense_widths"), s.ints("moe_widths"), s.ints("experts"), s.integer("k"),
                    s.integer("layers"), s.integer("heads"));
}

void validate_shortest_path(const Settings& s) { check_model_grid(shortest_path_models(s)); }

int write_report(const RunContext& ctx, const std::vector<ModelSpec>& models, const Calibration& cal,
                 double baseline);

int run_shortest_path(const RunContext& ctx) {
  const Settings& s = ctx.settings;
  validate_shortest_path(s);
  const std::vector<ModelSpec> models = shortest_path_models(s);
  const int n = static_cast<int>(s.integer("n"));

  // The edge probability: given, or calibrated once (its own generator: the same p for every model).
  Calibration cal;
  if (s.real("p") > 0) {
    Generator g(ctx.seed + 77);
    cal.p = s.real("p");
    cal.mean_length = shortest_path::mean_query_length(n, cal.p, 2000, g);
    cal.reached_target = std::fabs(cal.mean_length - s.real("target_length")) < 0.1;
  } else {
    Generator g(ctx.seed + 77);
    std::printf("calibrating p for n = %d (target mean path length %.2f) ...\n", n, s.real("target_length"));
    cal = shortest_path::calibrate_p(n, s.real("target_length"), g);
  }
  std::printf("n = %d, p = %.4f: mean shortest-path length %.3f (%s)\n", n, cal.p, cal.mean_length,
              cal.reached_target ? "the target" : "the largest reachable; the target is not");
  const TestSet test = shortest_path::make_test_set(n, cal.p, s.integer("test_examples"), 0x5e57 + ctx.seed);
  const double baseline = shortest_path::direct_edge_baseline(test);
  const shortest_path::Vocab vocab{n};
  const std::int64_t max_seq = shortest_path::max_sequence_length(n);

  std::set<std::string> done;
  for (const auto& row : read_csv(ctx.dir.file("results.csv")))
    done.insert(job_key(row.at("model"), row.integer("seed")));
  if (!done.empty())
    std::printf("resuming: %zu finished jobs found in %s\n", done.size(), ctx.dir.file("results.csv").c_str());
  // A job that did not finish runs again from the start: its metrics rows go, so it has one curve.
  std::set<std::string> unfinished;
  for (const ModelSpec& spec : models)
    for (std::int64_t seed : s.ints("seeds"))
      if (!done.count(job_key(spec.name(), seed))) unfinished.insert(job_label(spec, seed));
  drop_unfinished_rows(ctx.dir.file("metrics.csv"),
                       [&](const CsvRow& row) { return unfinished.count(row.text("job")) > 0; });
  CsvFile results = ctx.dir.csv("results.csv", {"model", "family", "d", "experts", "k", "total_params",
                                                "active_params", "seed", "n", "p", "steps", "exact_match",
                                                "valid_shortest", "final_loss", "seconds"});
  CsvFile metrics = ctx.dir.csv("metrics.csv", {"job", "step", "metric", "value"});

  const std::int64_t batch = s.integer("batch");
  for (std::size_t mi = 0; mi < models.size(); ++mi) {
    const ModelSpec& spec = models[mi];
    for (std::int64_t seed : s.ints("seeds")) {
      if (done.count(job_key(spec.name(), seed))) continue;
      Generator init_gen(static_cast<std::uint64_t>(seed) * 7919 + mi), data_gen(static_cast<std::uint64_t>(seed) * 104729 + 1);
      std::unique_ptr<Decoder> model = build_decoder(spec, vocab.size(), max_seq, init_gen);
      model->to(ctx.device);  // before train_decoder builds its optimizer
      const ModelSize size = model_size(*model);
      TrainConfig tc;
      tc.steps = s.integer("steps"), tc.lr = s.real("lr"), tc.weight_decay = s.real("weight_decay");
      tc.warmup_fraction = s.real("warmup_fraction"), tc.clip = s.real("clip"), tc.eval_every = s.integer("eval_every");
      shortest_path::PathResult last{};
      const TrainReport report = train_decoder(
          *model, tc, [&](Generator& g) { return shortest_path::training_batch(n, cal.p, batch, g, &test); }, data_gen,
          [&](Decoder& m) {
            last = shortest_path::evaluate(m, test, 128);
            return std::map<std::string, double>{{"exact_match", last.exact_match},
                                                 {"valid_shortest", last.valid_shortest}};
          },
          job_label(spec, seed), &metrics);
      results.row({spec.name(), spec.family(), cell(spec.d), cell(spec.experts), cell(spec.moe() ? spec.k : 0),
                   cell(size.non_embedding), cell(size.active), cell(seed), cell(n), cell(cal.p),
                   cell(report.steps_done), cell(last.exact_match), cell(last.valid_shortest), cell(report.final_loss),
                   cell(report.seconds)});
    }
  }
  return write_report(ctx, models, cal, baseline);
}

int write_report(const RunContext& ctx, const std::vector<ModelSpec>& models, const Calibration& cal,
                 double baseline) {
  struct Row {
    ModelSpec spec;
    double total = 0, active = 0;
    std::vector<double> exact, valid;
  };
  std::vector<Row> rows;
  for (const ModelSpec& m : models) rows.push_back({m, 0, 0, {}, {}});
  for (const auto& r : read_csv(ctx.dir.file("results.csv")))
    for (Row& row : rows)
      if (row.spec.name() == r.at("model")) {
        row.total = r.real("total_params"), row.active = r.real("active_params");
        row.exact.push_back(r.real("exact_match"));
        row.valid.push_back(r.real("valid_shortest"));
      }

  std::ostringstream csv, table;
  csv << "model,family,d,experts,total_params,active_params,seeds,exact_match_mean,exact_match_std,"
         "valid_shortest_mean,valid_shortest_std\n";
  table << "| model | total params | active params | seeds | exact match | valid shortest path |\n"
        << "|---|---:|---:|---:|---:|---:|\n";
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
          << format_number(100 * v.mean, "%.1f") << " ± " << format_number(100 * v.std, "%.1f") << "% |\n";
    by_total.push_back({r.spec.family(), r.total, 100 * e.mean});
    by_active.push_back({r.spec.family(), r.active, 100 * e.mean});
    acc_v.push_back(e.mean), tot_v.push_back(r.total), act_v.push_back(r.active);
  }
  ctx.dir.write_text("accuracy.csv", csv.str());

  const std::vector<std::string> plot_notes =
      plot_against_parameters(ctx.dir.path(), "fig4b", "Shortest path on unseen graphs: exact-match accuracy",
                              "test accuracy (%), mean over seeds", by_total, by_active);

  // The verdict: what experts add at a fixed width, against what width adds among dense models.
  std::ostringstream verdict;
  double best_expert_gain = -1, best_width_gain = -1;
  for (const Row& moe : rows) {
    if (!moe.spec.moe() || moe.exact.empty()) continue;
    for (const Row& dense : rows) {
      if (dense.spec.moe() || dense.exact.empty() || dense.spec.d != moe.spec.d) continue;
      const double gain = mean_std(moe.exact).mean - mean_std(dense.exact).mean;
      best_expert_gain = std::max(best_expert_gain, gain);
      verdict << "- " << moe.spec.name() << " (" << cell(moe.total) << " total) vs " << dense.spec.name() << " ("
              << cell(dense.total) << "): " << format_number(100 * gain, "%+.1f") << " points.\n";
    }
    for (const Row& wide : rows) {
      if (wide.spec.moe() || wide.exact.empty() || wide.spec.d <= moe.spec.d || wide.total > moe.total) continue;
      // A wider dense model with no more total parameters than the MoE model.
      for (const Row& dense : rows)
        if (!dense.spec.moe() && !dense.exact.empty() && dense.spec.d == moe.spec.d)
          best_width_gain = std::max(best_width_gain, mean_std(wide.exact).mean - mean_std(dense.exact).mean);
    }
  }
  const double rho_total = rank_correlation(acc_v, tot_v), rho_active = rank_correlation(acc_v, act_v);
  verdict << "- Rank correlation of accuracy with total parameters " << format_number(rho_total, "%.2f")
          << ", with active parameters " << format_number(rho_active, "%.2f") << " (" << acc_v.size() << " models).\n";
  std::string conclusion;
  if (best_expert_gain < -0.5)
    conclusion = "No MoE model has a dense model of the same width in this sweep: no equal-width comparison.";
  else if (best_width_gain >= 0)
    conclusion = std::string(best_width_gain > best_expert_gain ? "The paper's finding holds at this scale: "
                                                                : "The paper's finding does not show at this scale: ") +
                 "the best gain from experts at a fixed width is " + format_number(100 * best_expert_gain, "%+.1f") +
                 " points, the gain from a wider dense model with no more total parameters is " +
                 format_number(100 * best_width_gain, "%+.1f") + " points.";
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
          << table.str() << "\n## Verdict\n\n" << conclusion << "\n\n" << verdict.str() << "\n## Plots\n\n";
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
      "widths x expert counts) on fresh graphs with the loss on the answer only, and reports exact-match "
      "accuracy on held-out graphs against total and active parameters.";
  e.settings = shortest_path_settings;
  e.presets = shortest_path_presets();
  e.default_preset = "cpu";
  e.validate = validate_shortest_path;
  e.run = run_shortest_path;
  return e;
}

}  // namespace moelab
