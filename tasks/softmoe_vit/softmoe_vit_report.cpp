// tasks/softmoe_vit/softmoe_vit_report.cpp — Algorithm 1 against random subsets in every Soft MoE
// block, the Soft MoE layers' timings and summary.md, from saved networks; see the header.
#include "tasks/softmoe_vit/softmoe_vit_report.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "autograd/no_grad.h"
#include "core/factories.h"
#include "nn/io/checkpoint.h"
#include "nn/progress.h"
#include "runner/plot.h"
#include "runner/report.h"
#include "tasks/softmoe_mnist/mnist_model.h"
#include "tasks/softmoe_vit/paper_numbers.h"

namespace moelab::softmoe_vit {

namespace {

std::string pct(double share) { return format_number(100 * share, "%.2f"); }
std::string z_text(double z) { return std::isfinite(z) ? format_number(z, "%.2f") : "-"; }

struct SubsetRow {
  std::int64_t experts = 0, moe_layers = 0, seed = 0, k = 0;
  double all = 0, algorithm1 = 0;
  MeanStd random;
  double z() const { return random.std > 0 ? (algorithm1 - random.mean) / random.std : NAN; }
};

struct TimingRow {
  std::int64_t layers = 0, experts = 0, hidden = 0, k = 0, batch = 0, tokens = 0, trials = 0;
  MeanStd ms;
};

// Random k-subsets in every block, one draw per image and block; the accuracies of `draws` draws,
// population std (np.std, as the paper's code).
MeanStd random_subsets(Vit& model, const ImageDataset& test, std::int64_t k, std::int64_t draws, std::uint64_t seed) {
  std::vector<double> acc;
  for (std::int64_t r = 0; r < draws; ++r) {
    Generator gen(softmoe_mnist::mix_seed(seed, static_cast<std::uint64_t>(model.config().experts),
                                          static_cast<std::uint64_t>(k), 1000 + static_cast<std::uint64_t>(r)));
    const ExpertSubset random = ExpertSubset::random(k, gen);
    acc.push_back(accuracy(model, test, &random));
  }
  return mean_std(acc, StdKind::Population);
}

// Table 3: `layers` untrained Soft MoE layers run one after another, Algorithm 1 keeping k.
std::vector<TimingRow> time_layers(const Settings& s, const VitConfig& shape, std::int64_t layers, Device device,
                                   std::uint64_t seed) {
  std::vector<TimingRow> rows;
  const std::int64_t n = s.integer("timing_experts"), trials = s.integer("timing_trials");
  if (n <= 0) return rows;
  Generator gen(softmoe_mnist::mix_seed(seed, 0, static_cast<std::uint64_t>(n), 99));
  SoftMoEConfig c = shape.soft_moe();
  c.experts = n, c.hidden = s.integer("timing_hidden");
  std::vector<std::unique_ptr<SoftMoE>> stack;
  for (std::int64_t l = 0; l < layers; ++l) {
    stack.push_back(std::make_unique<SoftMoE>(c, gen));
    stack.back()->to(device);
  }
  NoGradGuard no_grad;
  for (std::int64_t batch : s.ints("timing_batches")) {
    const Variable x(normal({batch, shape.tokens(), shape.dim}, 0, 1, gen).to(device));
    for (std::int64_t k : {n, 3 * n / 4, n / 2, n / 4}) {
      const ExpertSubset subset = ExpertSubset::top_k(k);
      auto pass = [&] {
        Variable h = x;
        for (auto& layer : stack) h = layer->forward(h, subset);
        (void)h.data().to(Device::cpu());  // the result is ready (a no-op on the CPU)
      };
      for (int w = 0; w < 5; ++w) pass();
      std::vector<double> ms;
      for (std::int64_t t = 0; t < trials; ++t) {
        const auto start = std::chrono::steady_clock::now();
        pass();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
      TimingRow row;
      row.layers = layers, row.experts = n, row.hidden = c.hidden, row.k = k, row.batch = batch;
      row.tokens = shape.tokens(), row.trials = trials, row.ms = mean_std(ms);
      rows.push_back(row);
    }
  }
  return rows;
}

std::unique_ptr<Vit> load_vit(const Settings& s, const ImageDataset& data, const TrainedVit& m) {
  Generator unused(0);
  auto model = std::make_unique<Vit>(vit_config(s, data, m.experts, m.moe_layers), unused);
  load_checkpoint(m.checkpoint, *model, nullptr, nullptr);
  return model;
}

}  // namespace

VitConfig vit_config(const Settings& s, const ImageDataset& data, std::int64_t experts, std::int64_t moe_layers) {
  VitConfig c;
  c.channels = data.channels, c.height = data.rows, c.width = data.cols, c.classes = data.classes;
  c.patch = s.integer("patch"), c.dim = s.integer("dim"), c.depth = s.integer("depth"), c.heads = s.integer("heads");
  c.mlp_hidden = s.integer("mlp_hidden"), c.pool = parse_vit_pooling(s.text("pool"));
  c.mlp_activation = c.expert_activation = parse_activation(s.text("activation"));
  for (std::int64_t l = c.depth - moe_layers; l < c.depth; ++l) c.moe_blocks.push_back(l);
  c.experts = experts, c.slots_per_expert = s.integer("slots_per_expert");
  c.moe_residual = s.flag("moe_residual");
  return c;
}

std::vector<std::int64_t> subset_sizes(std::int64_t n) {
  std::vector<std::int64_t> ks;
  for (std::int64_t k : {std::int64_t{1}, std::int64_t{2}, n / 4, n / 2})
    if (k >= 1 && k < n && std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
  std::sort(ks.begin(), ks.end());
  return ks;
}

void evaluate_and_report(const RunContext& ctx, const ImageSplit& data, const std::vector<TrainedVit>& models) {
  const Settings& s = ctx.settings;
  const ImageDataset& test = data.test;
  const std::int64_t draws = s.integer("random_seeds");
  std::vector<SubsetRow> rows;
  for (const TrainedVit& m : models) {
    std::unique_ptr<Vit> model = load_vit(s, data.train, m);
    model->to(ctx.device);
    const double all = accuracy(*model, test);
    std::printf("n = %lld, L = %lld, seed %lld: test accuracy %s%% with all experts\n",
                static_cast<long long>(m.experts), static_cast<long long>(m.moe_layers), static_cast<long long>(m.seed),
                pct(all).c_str());
    for (std::int64_t k : subset_sizes(m.experts)) {
      SubsetRow r;
      r.experts = m.experts, r.moe_layers = m.moe_layers, r.seed = m.seed, r.k = k, r.all = all;
      const ExpertSubset top = ExpertSubset::top_k(k);
      r.algorithm1 = accuracy(*model, test, &top);
      r.random = random_subsets(*model, test, k, draws, static_cast<std::uint64_t>(m.seed));
      std::printf("  k = %lld: Algorithm 1 %s%%, random %s +- %s%% (z = %s)\n", static_cast<long long>(k),
                  pct(r.algorithm1).c_str(), pct(r.random.mean).c_str(), pct(r.random.std).c_str(),
                  z_text(r.z()).c_str());
      rows.push_back(r);
    }
  }
  std::int64_t timed_layers = 0;
  for (const TrainedVit& m : models) timed_layers = std::max(timed_layers, m.moe_layers);
  const VitConfig shape = vit_config(s, data.train, std::max<std::int64_t>(s.integer("timing_experts"), 1), timed_layers);
  const std::vector<TimingRow> timing = time_layers(s, shape, timed_layers, ctx.device, ctx.seed);

  // ---- CSV files (rewritten whole: derived from the checkpoints)
  std::ostringstream csv;
  csv << "experts,moe_layers,seed,k,all_experts_accuracy,algorithm1_accuracy,random_mean,random_std,random_draws,"
         "stds_above_random\n";
  for (const SubsetRow& r : rows)
    csv << r.experts << "," << r.moe_layers << "," << r.seed << "," << r.k << "," << cell(r.all) << ","
        << cell(r.algorithm1) << "," << cell(r.random.mean) << "," << cell(r.random.std) << "," << draws << ","
        << cell(r.z()) << "\n";
  ctx.dir.write_text("subsets.csv", csv.str());
  csv.str("");
  csv << "layers,experts,hidden,tokens,k,batch,mean_ms,std_ms,trials\n";
  for (const TimingRow& r : timing)
    csv << r.layers << "," << r.experts << "," << r.hidden << "," << r.tokens << "," << r.k << "," << r.batch << ","
        << cell(r.ms.mean) << "," << cell(r.ms.std) << "," << r.trials << "\n";
  ctx.dir.write_text("timing.csv", csv.str());

  // ---- cells over training seeds: (L, n, k) -> rows
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::vector<const SubsetRow*>> cells;
  for (const SubsetRow& r : rows) cells[{r.moe_layers, r.experts, r.k}].push_back(&r);
  auto over = [](const std::vector<const SubsetRow*>& rs, auto value) {
    std::vector<double> v;
    for (const SubsetRow* r : rs) v.push_back(value(*r));
    return mean_std(v);
  };

  // ---- Figures 2-3: accuracy against n per L, for k = 1, 2, n/4, n/2 (means over seeds, bars: std)
  std::vector<std::string> plots;
  std::vector<std::int64_t> layer_counts;
  for (const auto& [key, rs] : cells)
    if (std::find(layer_counts.begin(), layer_counts.end(), std::get<0>(key)) == layer_counts.end())
      layer_counts.push_back(std::get<0>(key));
  for (std::int64_t L : layer_counts) {
    LinePlot plot;
    plot.title = "Soft MoE ViT on " + s.text("dataset") + ", " + std::to_string(L) + " Soft MoE blocks: k of n experts";
    plot.xlabel = "n (experts per block)", plot.ylabel = "test accuracy (%), bars: +- std over training seeds";
    plot.log_x = true;
    struct Rule {
      std::string name;
      std::int64_t (*k)(std::int64_t);
    };
    const std::vector<Rule> rules = {{"k = 1", [](std::int64_t) -> std::int64_t { return 1; }},
                                     {"k = 2", [](std::int64_t) -> std::int64_t { return 2; }},
                                     {"k = n/4", [](std::int64_t n) { return n / 4; }},
                                     {"k = n/2", [](std::int64_t n) { return n / 2; }}};
    auto add = [&](const std::string& title, std::int64_t (*k_of)(std::int64_t), auto value) {
      Series series{title, {}, {}, {}, {}};
      bool bars = false;
      for (const auto& [key, rs] : cells) {
        const auto [l, n, k] = key;
        if (l != L || (k_of && k != k_of(n))) continue;
        if (!k_of && k != subset_sizes(n).front()) continue;  // "all experts": one point per n
        const MeanStd m = over(rs, value);
        series.x.push_back(static_cast<double>(n)), series.y.push_back(100 * m.mean);
        series.y_low.push_back(rs.size() > 1 ? 100 * (m.mean - m.std) : NAN);
        series.y_high.push_back(rs.size() > 1 ? 100 * (m.mean + m.std) : NAN);
        bars = bars || rs.size() > 1;
      }
      if (!bars) series.y_low.clear(), series.y_high.clear();
      if (!series.x.empty()) plot.series.push_back(series);
    };
    add("all experts", nullptr, [](const SubsetRow& r) { return r.all; });
    for (const Rule& rule : rules) {
      add("Algorithm 1, " + rule.name, rule.k, [](const SubsetRow& r) { return r.algorithm1; });
      add("random, " + rule.name, rule.k, [](const SubsetRow& r) { return r.random.mean; });
    }
    const PlotResult fig = plot_lines(plot, ctx.dir.path(), "fig2_" + s.text("dataset") + "_L" + std::to_string(L));
    plots.push_back(fig.drawn ? fig.png.filename().string() : "not drawn (" + fig.message + ")");
  }

  // ---- summary.md
  std::ostringstream md;
  md << "# softmoe-vit (" << ctx.preset << ")\n\n";
  md << "Data: " << data.source << ".\n\n";
  const VitConfig c = vit_config(s, data.train, models.front().experts, models.front().moe_layers);
  md << "Model: a ViT of " << c.depth << " pre-norm blocks, d = " << c.dim << ", " << c.heads << " heads, "
     << c.patches() << " patches of " << c.patch << "x" << c.patch << (c.pool == VitPooling::Cls ? " and a class token" : "")
     << ", " << (c.pool == VitPooling::Cls ? "class-token" : "mean") << " pooling; its last L blocks carry a Soft MoE "
     << "layer of n experts, " << c.slots_per_expert << " slot(s) each, hidden width floor(" << c.mlp_hidden
     << " / n), "
     << (c.expert_activation == Activation::Relu ? "" : activation_name(c.expert_activation) + " MLPs and experts, ")
     << (c.moe_residual ? "with" : "without (the paper's Astroformer variant)")
     << " the residual around it. Training: " << s.integer("steps") << " Adam steps of " << s.integer("batch")
     << " images, lr " << cell(s.real("lr")) << ". Evaluation on the " << test.size() << " test images: Algorithm 1 "
     << "keeps in every Soft MoE block the k experts with the largest column sums of its C for each image; random "
     << "subsets draw k per image and block; " << draws << " draws, population std (as the paper's np.std); z = "
     << "(Algorithm 1 - random mean) / random std.\n\n";
  md << "## Networks\n\nEvery n trains for the same steps. The paper picks, per n, a model of the same test accuracy; "
        "here the spread of the test accuracies over n (below) says how well the budget matched them.\n\n"
        "| n | L | seed | expert hidden | expert params | total params | test accuracy | train time |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<double>> acc_by;  // (L, seed) -> accuracies over n
  for (const TrainedVit& m : models) {
    md << "| " << m.experts << " | " << m.moe_layers << " | " << m.seed << " | " << m.expert_hidden << " | "
       << m.expert_parameters << " | " << m.total_parameters << " | " << pct(m.test_accuracy) << "% | "
       << clock_text(m.seconds) << " |\n";
    acc_by[{m.moe_layers, m.seed}].push_back(m.test_accuracy);
  }
  md << "\nMatching: ";
  bool first = true;
  for (const auto& [key, accs] : acc_by) {
    const auto [lo, hi] = std::minmax_element(accs.begin(), accs.end());
    md << (first ? "" : "; ") << "L = " << key.first << ", seed " << key.second << ": test accuracy " << pct(*lo)
       << " to " << pct(*hi) << "% over n (" << format_number(100 * (*hi - *lo), "%.2f") << " points apart)";
    first = false;
  }
  md << ".\n\n## Figures 2-3, Tables 2 and 11-13: Algorithm 1 against random k-subsets\n\n"
        "Each row: mean ± sample std over the training seeds (one network each). \"beyond\": Algorithm 1's mean minus "
        "its std above the random mean plus its std. The paper's column is Table 11 (CIFAR-10, Astroformer-1) at the "
        "same n and k, for reference only.\n\n"
        "| L | n | k | seeds | all experts | Algorithm 1 | random | z | beyond | paper z (Table 11) |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n";
  std::int64_t above = 0, beyond = 0;
  for (const auto& [key, rs] : cells) {
    const auto [L, n, k] = key;
    const MeanStd all = over(rs, [](const SubsetRow& r) { return r.all; });
    const MeanStd alg = over(rs, [](const SubsetRow& r) { return r.algorithm1; });
    const MeanStd rnd = over(rs, [](const SubsetRow& r) { return r.random.mean; });
    const MeanStd z = over(rs, [](const SubsetRow& r) { return r.z(); });
    const bool clear = rs.size() > 1 && alg.mean - alg.std > rnd.mean + rnd.std;
    above += alg.mean > rnd.mean, beyond += clear;
    const auto paper = paper_table11().find({n, k});
    auto pm = [&](const MeanStd& m) { return pct(m.mean) + (rs.size() > 1 ? " ± " + pct(m.std) : std::string()); };
    md << "| " << L << " | " << n << " | " << k << " | " << rs.size() << " | " << pm(all) << " | " << pm(alg) << " | "
       << pm(rnd) << " | " << z_text(z.mean) << (rs.size() > 1 ? " ± " + z_text(z.std) : std::string()) << " | "
       << (rs.size() > 1 ? (clear ? "yes" : "no") : "one seed") << " | "
       << (paper == paper_table11().end() ? std::string("-") : format_number(paper->second, "%.2f")) << " |\n";
  }
  md << "\nAlgorithm 1's mean is above the random mean in " << above << " of " << cells.size()
     << " (L, n, k) cells, beyond the seeds' spread in " << beyond << ". Plots: ";
  for (std::size_t i = 0; i < plots.size(); ++i) md << (i ? ", " : "") << plots[i];
  md << ".\n\n## Table 3: forward time of the Soft MoE layers when Algorithm 1 keeps k of n experts\n\n"
     << "Untrained layers run one after another on random tokens, as the paper times them; mean ± std over "
     << s.integer("timing_trials") << " passes after 5 warm-up passes, " << ctx.threads << " thread(s), "
     << (ctx.device.is_cuda() ? "on the GPU" : "on the CPU") << ".\n\n| layers | n | hidden | tokens | k | batch | ms |\n"
     << "|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const TimingRow& r : timing)
    md << "| " << r.layers << " | " << r.experts << " | " << r.hidden << " | " << r.tokens << " | " << r.k << " | "
       << r.batch << " | " << format_number(r.ms.mean, "%.3f") << " ± " << format_number(r.ms.std, "%.3f") << " |\n";
  if (timing.empty()) md << "\nNot timed (timing_experts = 0).\n";
  ctx.dir.write_text("summary.md", md.str());
  std::printf("wrote %s\n", ctx.dir.file("summary.md").string().c_str());
}

}  // namespace moelab::softmoe_vit
