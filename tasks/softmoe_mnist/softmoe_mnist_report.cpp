// tasks/softmoe_mnist/softmoe_mnist_report.cpp — Table 1, Algorithm 1 against random subsets
// (Figure 2, Table 10), inference timings and summary.md, all from saved networks.
#include "tasks/softmoe_mnist/softmoe_mnist_report.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "autograd/no_grad.h"
#include "core/factories.h"
#include "nn/io/checkpoint.h"
#include "runner/plot.h"
#include "nn/progress.h"
#include "runner/report.h"
#include "tasks/softmoe_mnist/paper_numbers.h"
#include "tasks/softmoe_mnist/subset_eval.h"

namespace moelab::softmoe_mnist {

namespace {

std::string pct(double share) { return format_number(100 * share, "%.2f"); }

// One (network, k) row of Algorithm 1 against random subsets.
struct SubsetRow {
  std::int64_t experts = 0, seed = 0, k = 0, divisor = 0;
  double all = 0, algorithm1 = 0;
  MeanStd random;
  double stds_above() const { return random.std > 0 ? (algorithm1 - random.mean) / random.std : NAN; }
};

// A z-score for the tables: "-" where it is undefined (every random subset scored the same).
std::string stds_text(double z) { return std::isfinite(z) ? format_number(z, "%.2f") : "-"; }

struct Table1Row {
  std::int64_t experts = 0, seed = 0, k = 0, distinct = 0;
  double all = 0, best = 0, algorithm1 = 0;
  MeanStd random;
};

struct TimingRow {
  std::string layer;  // "trained" or "untrained-wide"
  std::int64_t experts = 0, hidden = 0, k = 0, batch = 0, computed_slots = 0, trials = 0;
  MeanStd ms;
};

// Random k-subsets, one draw per image; accuracies of `draws` independent draws.
MeanStd random_subsets(SoftMoEClassifier& model, const ImageDataset& test, std::int64_t k, std::int64_t draws,
                       std::uint64_t seed) {
  std::vector<double> acc;
  for (std::int64_t r = 0; r < draws; ++r) {
    Generator gen(mix_seed(seed, static_cast<std::uint64_t>(model.experts()), static_cast<std::uint64_t>(k),
                           1000 + static_cast<std::uint64_t>(r)));
    const ExpertSubset random = ExpertSubset::random(k, gen);
    acc.push_back(accuracy(model, test, &random));
  }
  // The population std (/ draws), as the implicit-bias paper's code computes it (np.std, ddof 0):
  // Table 1's "±" and Table 10's statistic (Algorithm 1's distance above the random mean, in
  // these stds) then mean what the paper's tables mean. With 10 draws the sample std (/ 9) would
  // be 1.054x larger and the statistic 1.054x smaller.
  return mean_std(acc, StdKind::Population);
}

// Mean and std of the forward time of the Soft MoE layer with Algorithm 1 keeping k experts.
TimingRow time_layer(SoftMoE& layer, const Tensor& x, std::int64_t k, std::int64_t trials) {
  NoGradGuard no_grad;
  const Variable input(x.to(layer.device()));
  const ExpertSubset subset = ExpertSubset::top_k(k);
  for (int w = 0; w < 5; ++w) layer.forward(input, subset);
  std::vector<double> ms;
  for (std::int64_t t = 0; t < trials; ++t) {
    const auto start = std::chrono::steady_clock::now();
    const Variable y = layer.forward(input, subset);
    (void)y.data().to(Device::cpu());  // the result is ready (a no-op on the CPU)
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  TimingRow row;
  row.experts = layer.config().experts, row.hidden = layer.config().hidden_width(), row.k = k;
  row.batch = x.shape()[0], row.computed_slots = layer.last_computed_slots(), row.trials = trials;
  row.ms = mean_std(ms);
  return row;
}

// The first `batch` test images (cycled when there are fewer) as [batch, 4, 196].
Tensor timing_input(const ImageDataset& test, std::int64_t batch) {
  std::vector<std::int64_t> idx;
  for (std::int64_t i = 0; i < batch; ++i) idx.push_back(i % test.size());
  return patch_images(test, idx);
}

std::vector<std::int64_t> timing_ks(std::int64_t n) { return {n, 3 * n / 4, n / 2, n / 4}; }

}  // namespace

std::unique_ptr<SoftMoEClassifier> load_model(const TrainedModel& m, SlotInputs slot_inputs) {
  Generator unused(0);
  auto model = std::make_unique<SoftMoEClassifier>(m.experts, unused, slot_inputs);
  load_checkpoint(m.checkpoint, *model, nullptr, nullptr);
  model->eval();
  return model;
}

void evaluate_and_report(const RunContext& ctx, const MnistSplit& data, const std::vector<TrainedModel>& models) {
  const Settings& s = ctx.settings;
  const ImageDataset& test = data.test;
  const std::int64_t draws = s.integer("random_seeds"), trials = s.integer("timing_trials");
  const std::vector<std::int64_t> table1_n = s.ints("table1_experts"), timing_n = s.ints("timing_experts");
  auto contains = [](const std::vector<std::int64_t>& v, std::int64_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };

  std::vector<SubsetRow> subset_rows;
  std::vector<Table1Row> table1_rows;
  std::vector<TimingRow> timing_rows;
  for (const TrainedModel& m : models) {
    std::unique_ptr<SoftMoEClassifier> model = load_model(m, parse_slot_inputs(s.text("slot_inputs")));
    model->to(ctx.device);
    const double all = accuracy(*model, test);
    std::printf("n = %lld, seed %lld: test accuracy %s%% with all experts\n", static_cast<long long>(m.experts),
                static_cast<long long>(m.seed), pct(all).c_str());
    for (std::int64_t divisor : s.ints("k_divisors")) {
      if (m.experts % divisor != 0) continue;
      SubsetRow row;
      row.experts = m.experts, row.seed = m.seed, row.divisor = divisor, row.k = m.experts / divisor, row.all = all;
      const ExpertSubset top = ExpertSubset::top_k(row.k);
      row.algorithm1 = accuracy(*model, test, &top);
      row.random = random_subsets(*model, test, row.k, draws, static_cast<std::uint64_t>(m.seed));
      std::printf("  k = n/%lld = %lld: Algorithm 1 %s%%, random %s +- %s%% (%s std above)\n",
                  static_cast<long long>(divisor), static_cast<long long>(row.k), pct(row.algorithm1).c_str(),
                  pct(row.random.mean).c_str(), pct(row.random.std).c_str(),
                  stds_text(row.stds_above()).c_str());
      subset_rows.push_back(row);
    }
    if (contains(table1_n, m.experts)) {
      Table1Row row;
      row.experts = m.experts, row.seed = m.seed, row.k = m.experts / 4, row.all = all;
      const BestSubsetResult best = best_subset_accuracy(expert_logits(*model, test), row.k);
      row.best = best.accuracy, row.distinct = best.distinct_subsets;
      const ExpertSubset top = ExpertSubset::top_k(row.k);
      row.algorithm1 = accuracy(*model, test, &top);
      row.random = random_subsets(*model, test, row.k, draws, static_cast<std::uint64_t>(m.seed));
      std::printf("  Table 1, k = %lld: best subset %s%% (%lld distinct subsets), random %s +- %s%%\n",
                  static_cast<long long>(row.k), pct(row.best).c_str(), static_cast<long long>(row.distinct),
                  pct(row.random.mean).c_str(), pct(row.random.std).c_str());
      table1_rows.push_back(row);
    }
    if (m.seed == models.front().seed && contains(timing_n, m.experts))
      for (std::int64_t batch : s.ints("timing_batches")) {
        const Tensor x = timing_input(test, batch);
        for (std::int64_t k : timing_ks(m.experts)) {
          TimingRow row = time_layer(model->moe(), x, k, trials);
          row.layer = "trained";
          timing_rows.push_back(row);
        }
      }
  }
  if (const std::int64_t wide = s.integer("timing_wide_hidden"); wide > 0) {
    Generator gen(mix_seed(ctx.seed, 0, 8, 99));
    SoftMoEConfig c;
    c.d = kTokenWidth, c.experts = 8, c.hidden = wide, c.slot_inputs = parse_slot_inputs(s.text("slot_inputs"));
    SoftMoE layer(c, gen);
    layer.to(ctx.device);
    for (std::int64_t batch : s.ints("timing_batches")) {
      const Tensor x = normal({batch, kTokens, kTokenWidth}, 0, 1, gen);
      for (std::int64_t k : timing_ks(8)) {
        TimingRow row = time_layer(layer, x, k, trials);
        row.layer = "untrained-wide";
        timing_rows.push_back(row);
      }
    }
  }

  // ---- CSV files (rewritten whole: they are derived from the checkpoints)
  std::ostringstream csv;
  csv << "experts,seed,k,divisor,all_experts_accuracy,algorithm1_accuracy,random_mean,random_std,random_draws,"
         "stds_above_random\n";
  for (const SubsetRow& r : subset_rows)
    csv << r.experts << "," << r.seed << "," << r.k << "," << r.divisor << "," << cell(r.all) << ","
        << cell(r.algorithm1) << "," << cell(r.random.mean) << "," << cell(r.random.std) << "," << draws << ","
        << cell(r.stds_above()) << "\n";
  ctx.dir.write_text("subsets.csv", csv.str());
  csv.str("");
  csv << "experts,seed,k,all_experts_accuracy,best_subset_accuracy,distinct_best_subsets,algorithm1_accuracy,"
         "random_mean,random_std,random_draws\n";
  for (const Table1Row& r : table1_rows)
    csv << r.experts << "," << r.seed << "," << r.k << "," << cell(r.all) << "," << cell(r.best) << "," << r.distinct
        << "," << cell(r.algorithm1) << "," << cell(r.random.mean) << "," << cell(r.random.std) << "," << draws << "\n";
  ctx.dir.write_text("table1.csv", csv.str());
  csv.str("");
  csv << "layer,experts,hidden,k,batch,mean_ms,std_ms,trials,computed_slots,slots_of_all_experts\n";
  for (const TimingRow& r : timing_rows)
    csv << r.layer << "," << r.experts << "," << r.hidden << "," << r.k << "," << r.batch << "," << cell(r.ms.mean)
        << "," << cell(r.ms.std) << "," << r.trials << "," << r.computed_slots << "," << r.batch * r.experts << "\n";
  ctx.dir.write_text("timing.csv", csv.str());

  // ---- Figure 2 (MNIST panel): accuracy against n, mean over training seeds, bars +- sample std
  LinePlot plot;
  plot.title = "Soft MoE on " + s.text("dataset") + ": k of n experts (mean over training seeds)";
  plot.xlabel = "n (experts)", plot.ylabel = "test accuracy (%), bars: +- std over training seeds", plot.log_x = true;
  auto add_series = [&](const std::string& title, std::int64_t divisor, auto value) {
    std::map<std::int64_t, std::map<std::int64_t, double>> by_n;  // n -> seed -> value (one per network)
    for (const SubsetRow& r : subset_rows)
      if (divisor == 0 || r.divisor == divisor) by_n[r.experts][r.seed] = value(r);
    Series series{title, {}, {}, {}, {}};
    for (const auto& [n, by_seed] : by_n) {
      std::vector<double> values;
      for (const auto& [seed, v] : by_seed) values.push_back(v);
      const MeanStd m = mean_std(values);
      series.x.push_back(static_cast<double>(n)), series.y.push_back(100 * m.mean);
      series.y_low.push_back(values.size() > 1 ? 100 * (m.mean - m.std) : NAN);
      series.y_high.push_back(values.size() > 1 ? 100 * (m.mean + m.std) : NAN);
    }
    if (std::none_of(series.y_low.begin(), series.y_low.end(), [](double v) { return std::isfinite(v); }))
      series.y_low.clear(), series.y_high.clear();
    if (!series.x.empty()) plot.series.push_back(series);
  };
  add_series("all experts", 0, [](const SubsetRow& r) { return r.all; });
  for (std::int64_t divisor : s.ints("k_divisors")) {
    const std::string k = "k = n/" + std::to_string(divisor);
    add_series("Algorithm 1, " + k, divisor, [](const SubsetRow& r) { return r.algorithm1; });
    add_series("random, " + k, divisor, [](const SubsetRow& r) { return r.random.mean; });
  }
  const PlotResult fig2 = plot_lines(plot, ctx.dir.path(), "fig2_" + s.text("dataset"));
  if (!fig2.drawn) std::printf("%s\n", fig2.message.c_str());

  // ---- summary.md
  std::ostringstream md;
  md << "# softmoe-mnist (" << ctx.preset << ")\n\n";
  md << "Data: " << data.source << ".\n\n";
  md << "Training: " << s.integer("steps") << " Adam steps of " << s.integer("batch") << " images, lr "
     << cell(s.real("lr")) << " (" << format_number(static_cast<double>(s.integer("steps") * s.integer("batch")) /
                                                         static_cast<double>(data.train.size()), "%.1f")
     << " epochs of these " << data.train.size() << " training images; the paper: 15 epochs of 60,000 = 3525 steps; "
     << (s.text("sampling") == "epochs" ? "a fresh shuffle per epoch" : "images drawn with replacement")
     << "). Soft MoE slots mix the "
     << (s.text("slot_inputs") == "normalized" ? "normalised tokens (the implicit-bias paper's code)"
                                               : "raw tokens (the original Soft MoE's layer, not the paper's)")
     << ". "
     << "Accuracies are on the " << test.size() << " test images; random subsets are drawn per image, "
     << draws << " draws, population std (/ draws, as the paper's code's np.std).\n\n";
  md << "## Networks\n\n| n | seed | expert hidden | expert params | total params | steps | test accuracy | train time |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const TrainedModel& m : models)
    md << "| " << m.experts << " | " << m.seed << " | " << m.hidden << " | " << m.expert_parameters << " | "
       << m.total_parameters << " | " << m.steps << " | " << pct(m.test_accuracy) << "% | " << clock_text(m.seconds)
       << " |\n";
  md << "\n## Table 1: k = n/4 experts per image\n\n"
        "| n | seed | k | all experts | best k-subset (label used) | distinct best subsets | Algorithm 1 | random k-subset | "
        "paper best | paper random |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Table1Row& r : table1_rows) {
    std::string paper_best = "-", paper_random = "-";
    for (const PaperTable1& p : kPaperTable1)
      if (p.n == r.experts)
        paper_best = format_number(p.best, "%.2f"),
        paper_random = format_number(p.random_mean, "%.2f") + " ± " + format_number(p.random_std, "%.2f");
    md << "| " << r.experts << " | " << r.seed << " | " << r.k << " | " << pct(r.all) << " | " << pct(r.best) << " | "
       << r.distinct << " | " << pct(r.algorithm1) << " | " << pct(r.random.mean) << " ± " << pct(r.random.std) << " | "
       << paper_best << " | " << paper_random << " |\n";
  }
  md << "\n## Figure 2 / Table 10: Algorithm 1 against random k-subsets\n\n"
        "| n | seed | k | all experts | Algorithm 1 | random | std above random | paper (Table 10) |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  std::int64_t wins = 0;
  for (const SubsetRow& r : subset_rows) {
    wins += r.algorithm1 > r.random.mean;
    std::string paper = "-";
    if (paper_table10().count({r.experts, r.divisor}))
      paper = format_number(paper_table10().at({r.experts, r.divisor}), "%.2f");
    md << "| " << r.experts << " | " << r.seed << " | n/" << r.divisor << " = " << r.k << " | " << pct(r.all) << " | "
       << pct(r.algorithm1) << " | " << pct(r.random.mean) << " ± " << pct(r.random.std) << " | "
       << stds_text(r.stds_above()) << " | " << paper << " |\n";
  }
  md << "\nAlgorithm 1 beats the mean random subset in " << wins << " of " << subset_rows.size() << " (n, k, seed) "
     << "cells. Plot: " << (fig2.drawn ? fig2.png.filename().string() : "not drawn (" + fig2.message + ")") << ".\n";

  // ---- over training seeds: mean +- sample std of each (n, k) cell's numbers across the networks
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<const SubsetRow*>> by_cell;  // (n, divisor)
  for (const SubsetRow& r : subset_rows) by_cell[{r.experts, r.divisor}].push_back(&r);
  std::int64_t seeds = 0;
  for (const auto& [key, rows] : by_cell) seeds = std::max<std::int64_t>(seeds, static_cast<std::int64_t>(rows.size()));
  if (seeds > 1) {
    auto ms = [](const std::vector<const SubsetRow*>& rows, auto value) {
      std::vector<double> v;
      for (const SubsetRow* r : rows) v.push_back(value(*r));
      return mean_std(v);
    };
    auto pm = [](const MeanStd& m) { return pct(m.mean) + " ± " + pct(m.std); };
    md << "\n### Over training seeds\n\nEach cell: mean ± sample std over the networks of the training seeds (the "
          "random column: of each network's random-subset mean). The rule: Algorithm 1 beats random beyond the seeds' "
          "spread when its mean minus its std is above the random mean plus its std.\n\n"
          "| n | k | seeds | all experts | Algorithm 1 | random | std above random | beyond the spread | paper "
          "(Table 10) |\n|---:|---:|---:|---:|---:|---:|---:|---|---:|\n";
    std::int64_t cells = 0, above = 0, beyond = 0;
    for (const auto& [key, rows] : by_cell) {
      const MeanStd all = ms(rows, [](const SubsetRow& r) { return r.all; });
      const MeanStd alg = ms(rows, [](const SubsetRow& r) { return r.algorithm1; });
      const MeanStd rnd = ms(rows, [](const SubsetRow& r) { return r.random.mean; });
      const MeanStd stds = ms(rows, [](const SubsetRow& r) { return r.stds_above(); });
      const bool clear = alg.mean - alg.std > rnd.mean + rnd.std;
      ++cells, above += alg.mean > rnd.mean, beyond += clear;
      md << "| " << key.first << " | n/" << key.second << " = " << key.first / key.second << " | " << rows.size()
         << " | " << pm(all) << " | " << pm(alg) << " | " << pm(rnd) << " | " << format_number(stds.mean, "%.2f")
         << " ± " << format_number(stds.std, "%.2f") << " | " << (clear ? "yes" : "no") << " | "
         << (paper_table10().count(key) ? format_number(paper_table10().at(key), "%.2f") : std::string("-")) << " |\n";
    }
    md << "\nOver training seeds, Algorithm 1's mean is above the random mean in " << above << " of " << cells
       << " (n, k) cells, beyond the seeds' spread in " << beyond << " of them.\n";

    // Table 10 as a map: rows k = n/divisor, columns n; each cell the stds above random, mean ± std
    // over the training seeds (the paper's table has one network per n, so no spread).
    std::vector<std::int64_t> ns, divisors;
    for (const auto& [key, rows] : by_cell) {
      if (std::find(ns.begin(), ns.end(), key.first) == ns.end()) ns.push_back(key.first);
      if (std::find(divisors.begin(), divisors.end(), key.second) == divisors.end()) divisors.push_back(key.second);
    }
    std::sort(ns.begin(), ns.end()), std::sort(divisors.begin(), divisors.end());
    HeatMap z{.title = "Table 10 (" + s.text("dataset") + "): Algorithm 1's stds above random, mean ± std over seeds",
              .xlabel = "n (experts)", .ylabel = "k", .column_labels = {}, .row_labels = {}, .values = {}};
    for (std::int64_t n : ns) z.column_labels.push_back(std::to_string(n));
    for (std::int64_t d : divisors) {
      z.row_labels.push_back("n/" + std::to_string(d));
      std::vector<double> row, spread;
      for (std::int64_t n : ns) {
        const auto it = by_cell.find({n, d});
        const MeanStd m = it == by_cell.end() ? MeanStd{NAN, NAN}
                                              : ms(it->second, [](const SubsetRow& r) { return r.stds_above(); });
        row.push_back(m.mean), spread.push_back(m.std);
      }
      z.values.push_back(row), z.spread.push_back(spread);
    }
    if (ns.size() >= 2 && divisors.size() >= 2) {
      const PlotResult table10 = plot_heat_map(z, ctx.dir.path(), "table10_" + s.text("dataset"));
      md << "\nTable 10 as a map: " << (table10.drawn ? table10.png.filename().string() : "not drawn (" + table10.message + ")")
         << ".\n";
    }
    std::map<std::int64_t, std::vector<const Table1Row*>> t1;
    for (const Table1Row& r : table1_rows) t1[r.experts].push_back(&r);
    md << "\nTable 1 over training seeds (mean ± sample std):\n\n| n | k | seeds | best k-subset | random k-subset | "
          "paper best | paper random |\n|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& [n, rows] : t1) {
      std::vector<double> best, rnd;
      for (const Table1Row* r : rows) best.push_back(r->best), rnd.push_back(r->random.mean);
      std::string paper_best = "-", paper_random = "-";
      for (const PaperTable1& p : kPaperTable1)
        if (p.n == n)
          paper_best = format_number(p.best, "%.2f"),
          paper_random = format_number(p.random_mean, "%.2f") + " ± " + format_number(p.random_std, "%.2f");
      md << "| " << n << " | " << n / 4 << " | " << rows.size() << " | " << pm(mean_std(best)) << " | "
         << pm(mean_std(rnd)) << " | " << paper_best << " | " << paper_random << " |\n";
    }
  }
  md << "\n## Inference: the Soft MoE layer's forward time when Algorithm 1 keeps k of n experts\n\n"
        "Mean ± std over " << trials << " passes (after 5 warm-up passes), " << ctx.threads << " thread(s). "
        "\"slots computed\" counts the slot rows the experts ran on (of batch x n): dropped experts are not computed.\n\n"
        "| layer | n | hidden | k | batch | ms | slots computed |\n|---|---:|---:|---:|---:|---:|---:|\n";
  for (const TimingRow& r : timing_rows)
    md << "| " << r.layer << " | " << r.experts << " | " << r.hidden << " | " << r.k << " | " << r.batch << " | "
       << format_number(r.ms.mean, "%.3f") << " ± " << format_number(r.ms.std, "%.3f") << " | " << r.computed_slots
       << " / " << r.batch * r.experts << " |\n";
  ctx.dir.write_text("summary.md", md.str());
  std::printf("wrote %s\n", ctx.dir.file("summary.md").string().c_str());
}

}  // namespace moelab::softmoe_mnist
