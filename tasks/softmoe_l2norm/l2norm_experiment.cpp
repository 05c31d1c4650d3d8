// tasks/softmoe_l2norm/l2norm_experiment.cpp — settings, presets, the jobs and the report of
// `moelab softmoe-l2norm` (see the header; the model, data and training loop are in l2norm.cpp).
#include "tasks/softmoe_l2norm/l2norm_experiment.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "runner/job_grid.h"
#include "runner/plot.h"
#include "nn/progress.h"
#include "runner/report.h"
#include "tasks/common/memory_check.h"
#include "tasks/common/precision_setting.h"
#include "tasks/softmoe_l2norm/l2norm.h"
#include "tasks/softmoe_l2norm/l2norm_claims.h"

namespace moelab {

namespace {

using l2norm::kClearlyBelow;  // a job "lowers the loss" below this fraction of the constant's

const std::vector<std::string> kMetricsHeader = {"tokenisation", "experts", "seed", "step", "loss"};
const std::vector<std::string> kResultsHeader = {
    "tokenisation", "tokens", "d", "experts", "hidden", "expert_parameters", "router_parameters", "seed",
    "steps", "batch", "lr", "variance", "first_loss", "final_loss", "constant_loss", "final_over_constant",
    "seconds"};

Settings l2norm_settings() {
  Settings s;
  s.add_int("input_dim", 10, "length k of x ~ N(0, variance I_k); the label is ||x||_2", 1, 1 << 20);
  s.add_real("variance", 5.0, "variance of each coordinate of x (the paper's N(0, 5I): variance 5, std sqrt 5)",
             1e-12, 1e12);
  s.add_int_list("token_dims", {2, 5}, "token widths d; x is cut into m = input_dim / d tokens in index order",
                 1, 1 << 20);
  s.add_int_list("experts", {1, 2, 5, 10}, "numbers of experts n (one slot each)", 1, 1 << 16);
  s.add_int("width_factor", 10, "the experts' hidden width is h = width_factor * d / n (the paper: 10, so the "
            "experts hold 2 * width_factor * d^2 = 20 d^2 parameters for every n)", 1, 1 << 16);
  s.add_flag("expert_bias", false, "biases in the experts (the paper: none, 20 d^2 expert parameters)");
  s.add_flag("normalize", false, "l2-normalised routing logits with a learnable scale (the paper's eq. (1): no)");
  s.add_text("slot_inputs", "normalized", "with normalize, what the slots mix: normalized tokens (the paper's "
             "code; the layer is then scale-invariant and cannot follow ||x||) or raw tokens (the original Soft "
             "MoE's layer)", {"normalized", "raw"});
  s.add_text("phi_init", "uniform", "initial router phi: U[-1, 1) or normal(0, 1/d)", {"uniform", "lecun_normal"});
  s.add_int("steps", 500, "optimizer steps, each on a fresh batch", 1, 1e9);
  s.add_int("batch", 10000, "samples per step", 1, 1 << 24);
  s.add_real("lr", 1e-3, "Adam learning rate (betas 0.9, 0.999, eps 1e-8, no weight decay)", 1e-9, 10);
  s.add_int_list("seeds", {0}, "seeds: each gives every n its own initial weights and every tokenisation its "
                 "data stream (the same for every n)", 0, 1e15);
  s.add_int("log_every", 1, "steps per metrics.csv row (the row holds the mean loss of those steps)", 1, 1e9);
  s.add_real("final_fraction", 0.05, "the final loss is the mean training loss of this last fraction of the steps",
             1e-6, 1);
  add_job_settings(s, "5x2-n10-seed0");
  add_precision_setting(s);
  // A job's weights and data depend on its own tokenisation, n and seed: the lists add jobs.
  s.may_change_on_resume({"token_dims", "experts", "seeds"});
  return s;
}

std::vector<Preset> l2norm_presets() {
  return {
      {"paper",
       "Appendix C as written: batch 10,000, Adam lr 1e-3, 500 steps (the paper's \"500 epochs\" of freshly drawn "
       "batches read as 500 batches), n in {1, 2, 5, 10}, tokens 5x2 and 2x5, three seeds (24 jobs of about 2 "
       "minutes on one core)",
       {{"steps", "500"}, {"batch", "10000"}, {"seeds", "0,1,2"}, {"log_every", "1"}}},
      {"cpu",
       "the paper's sweep with batch 1000 for 1000 steps and three seeds (24 jobs, about 10 CPU-minutes on one "
       "core): twice the paper's Adam steps on a tenth of its batch",
       {{"steps", "1000"}, {"batch", "1000"}, {"seeds", "0,1,2"}, {"log_every", "5"}}},
      {"toy",
       "seconds, to try the command (one seed): 5x2 tokens, n in {1, 10}, 300 steps of batch 256, lr 3e-3",
       {{"token_dims", "2"}, {"experts", "1,10"}, {"steps", "300"}, {"batch", "256"}, {"lr", "3e-3"},
        {"log_every", "10"}}},
  };
}

template <class T>
bool has_duplicates(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return std::adjacent_find(v.begin(), v.end()) != v.end();
}

void validate_l2norm(const Settings& s) {
  for (const char* key : {"token_dims", "experts", "seeds"}) {
    if (s.ints(key).empty()) throw UsageError(std::string(key) + ": give at least one value");
    if (has_duplicates(s.ints(key))) throw UsageError(std::string(key) + ": a value is given twice");
  }
  const std::int64_t k = s.integer("input_dim"), f = s.integer("width_factor");
  for (std::int64_t d : s.ints("token_dims")) {
    // A step holds the batch's inputs and their tokens (2 k floats a sample) and the experts'
    // hidden units, f d a sample whatever n is (n experts of width f d / n, one slot each).
    const double batch = static_cast<double>(s.integer("batch"));
    check_memory_bound("batch = " + std::to_string(s.integer("batch")) + " at d = " + std::to_string(d),
                       4.0 * batch * (2.0 * static_cast<double>(k) + static_cast<double>(f * d)),
                       "one step's inputs, tokens and expert hidden units");
    if (k % d != 0)
      throw UsageError("token_dims: d = " + std::to_string(d) + " does not divide input_dim = " + std::to_string(k));
    for (std::int64_t n : s.ints("experts"))
      if ((f * d) % n != 0)
        throw UsageError("experts: n = " + std::to_string(n) + " does not divide width_factor * d = " +
                         std::to_string(f) + " * " + std::to_string(d) + ", so the experts cannot share the " +
                         std::to_string(2 * f * d * d) + " expert parameters equally");
  }
  if (s.integer("log_every") > s.integer("steps"))
    throw UsageError("log_every (" + std::to_string(s.integer("log_every")) + ") is more than steps (" +
                     std::to_string(s.integer("steps")) + ")");
}

l2norm::ModelSpec spec_for(const Settings& s, std::int64_t d, std::int64_t n) {
  l2norm::ModelSpec m;
  m.input_dim = s.integer("input_dim");
  m.d = d;
  m.experts = n;
  m.width_factor = s.integer("width_factor");
  m.bias = s.flag("expert_bias");
  m.normalize = s.flag("normalize");
  m.slot_inputs = s.text("slot_inputs");
  m.phi_init = s.text("phi_init");
  return m;
}

// The grid: token widths (outer) x n x seeds, named "<m>x<d>-n<n>-seed<s>" (e.g. 5x2-n10-seed0).
struct Point {
  l2norm::ModelSpec spec;
  std::int64_t seed = 0;
  std::string name;
};

std::vector<Point> grid_of(const Settings& s) {
  std::vector<Point> out;
  for (std::int64_t d : s.ints("token_dims"))
    for (std::int64_t n : s.ints("experts"))
      for (std::int64_t seed : s.ints("seeds")) {
        const l2norm::ModelSpec spec = spec_for(s, d, n);
        out.push_back({spec, seed, spec.tokenisation() + "-n" + std::to_string(n) + "-seed" + std::to_string(seed)});
      }
  return out;
}

// One job: its curve to points/<name>.csv, its results.csv row (kResultsHeader's order) to
// points/<name>.json, last.
void run_job(const RunContext& ctx, const Point& p) {
  const Settings& s = ctx.settings;
  const l2norm::ModelSpec& spec = p.spec;
  const std::int64_t seed = p.seed;
  CsvFile metrics = ctx.dir.csv(point_curve_file(p.name), kMetricsHeader);
  const std::string tok = spec.tokenisation(), n = std::to_string(spec.experts), seed_text = std::to_string(seed);
  const std::string base = std::to_string(ctx.seed) + "/" + tok + "/seed" + seed_text;
  Generator init_gen(l2norm::name_hash("init/" + base + "/n" + n));
  Generator data_gen(l2norm::name_hash("data/" + base));  // the same samples for every n
  l2norm::L2NormModel model(spec, init_gen);
  model.to(ctx.device);

  l2norm::TrainOptions o;
  o.steps = s.integer("steps"), o.batch = s.integer("batch"), o.lr = s.real("lr"), o.variance = s.real("variance");
  o.final_fraction = s.real("final_fraction");
  o.label = tok + " n=" + n + " seed " + seed_text;
  const std::int64_t log_every = s.integer("log_every");
  double window = 0;
  std::int64_t count = 0;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<double> losses = l2norm::train(model, o, data_gen, [&](std::int64_t step, double loss) {
    window += loss, ++count;
    if (step % log_every == 0 || step == o.steps) {
      metrics.row({tok, n, seed_text, std::to_string(step), cell(window / static_cast<double>(count))});
      window = 0, count = 0;
    }
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double constant = l2norm::constant_predictor_loss(spec.input_dim, o.variance);
  const double final_loss = l2norm::tail_mean(losses, s.real("final_fraction"));
  const std::vector<std::string> row = {
      tok, std::to_string(spec.tokens()), std::to_string(spec.d), n, std::to_string(spec.hidden()),
      std::to_string(spec.expert_parameters()), std::to_string(spec.router_parameters()), seed_text,
      cell(static_cast<double>(o.steps)), cell(static_cast<double>(o.batch)), cell(o.lr), cell(o.variance),
      cell(losses.front()), cell(final_loss), cell(constant), cell(final_loss / constant), cell(seconds)};
  nlohmann::ordered_json j;
  j["point"] = p.name;
  for (std::size_t c = 0; c < row.size(); ++c) j["row"][kResultsHeader[c]] = row[c];
  write_point(ctx.dir, p.name, j);  // last: its presence marks the job done
}

std::string fmt(double v, const char* f = "%.4g") { return format_number(v, f); }

// results.csv and metrics.csv -> summary.md and one loss plot per tokenisation.
void write_report(const RunContext& ctx, double wall_seconds) {
  const Settings& s = ctx.settings;
  const double constant = l2norm::constant_predictor_loss(s.integer("input_dim"), s.real("variance"));
  const double mean_norm = l2norm::expected_norm(s.integer("input_dim"), s.real("variance"));
  const auto results = read_csv(ctx.dir.file("results.csv"));
  const auto metrics = read_csv(ctx.dir.file("metrics.csv"));
  const std::vector<std::int64_t> seeds = s.ints("seeds");
  auto wanted_seed = [&](const CsvRow& row) {
    return std::find(seeds.begin(), seeds.end(), row.integer("seed")) != seeds.end();
  };

  std::ostringstream md, verdicts;
  md << "# softmoe-l2norm: Soft MoE learning ||x||_2 (implicit-bias paper, Appendix C)\n\n"
     << "x ~ N(0, " << fmt(s.real("variance")) << " I_" << s.integer("input_dim") << "), label ||x||_2; one Soft MoE "
     << "layer (one slot per expert, ReLU experts d -> " << s.integer("width_factor") << "d/n -> d"
     << (s.flag("expert_bias") ? " with" : " without") << " biases) and a fixed summation head; MSE; Adam lr "
     << fmt(s.real("lr")) << ", " << s.integer("steps") << " steps of " << s.integer("batch")
     << " fresh samples; final loss = mean training loss of the last " << fmt(100 * s.real("final_fraction"))
     << "% of the steps; mean +- std over seeds.\n\n"
     << "Reference: the best constant predictor, E||x|| = " << fmt(mean_norm) << ", has MSE Var||x|| = **"
     << fmt(constant) << "** (closed form; the zero predictor's MSE is " << fmt(s.real("variance") * s.integer("input_dim"))
     << "). A job \"lowers the loss\" when its final loss is below " << kClearlyBelow << " x that.\n\n";

  bool complete = true;
  double job_seconds = 0;
  for (std::int64_t d : s.ints("token_dims")) {
    const std::string tok = std::to_string(s.integer("input_dim") / d) + "x" + std::to_string(d);
    md << "## " << s.integer("input_dim") / d << " tokens of " << d << " (" << tok << ")\n\n"
       << "| n | hidden h | expert params | seeds | first loss | final loss | final / constant |\n"
       << "|---|---|---|---|---|---|---|\n";
    std::vector<std::tuple<std::int64_t, double, double>> finals;  // (n, mean, std of the final loss)
    std::string diverged;  // "n = 5 (1 of 3 seeds)": runs whose loss is NaN or inf, never compared
    for (std::int64_t n : s.ints("experts")) {
      std::vector<double> first, final_loss;
      std::int64_t seeds_diverged = 0, seeds_run = 0;
      for (const auto& row : results)
        if (row.at("tokenisation") == tok && row.at("experts") == std::to_string(n) && wanted_seed(row)) {
          ++seeds_run;
          job_seconds += row.real("seconds");
          if (!std::isfinite(row.real("final_loss")) || !std::isfinite(row.real("first_loss"))) {
            ++seeds_diverged;
            continue;
          }
          first.push_back(row.real("first_loss"));
          final_loss.push_back(row.real("final_loss"));
        }
      if (seeds_diverged > 0)
        diverged += (diverged.empty() ? "" : ", ") + ("n = " + std::to_string(n) + " (" +
                                                      std::to_string(seeds_diverged) + " of " +
                                                      std::to_string(seeds_run) + " seeds)");
      const l2norm::ModelSpec spec = spec_for(s, d, n);
      if (final_loss.empty() && seeds_diverged > 0) {
        md << "| " << n << " | " << spec.hidden() << " | " << spec.expert_parameters() << " | 0 | diverged | diverged"
           << " | - |\n";
        continue;
      }
      if (final_loss.empty()) {
        md << "| " << n << " | " << spec.hidden() << " | " << spec.expert_parameters() << " | 0 | - | - | - |\n";
        complete = false;
        continue;
      }
      const MeanStd f = mean_std(final_loss), f0 = mean_std(first);
      finals.push_back({n, f.mean, f.std});
      md << "| " << n << " | " << spec.hidden() << " | " << spec.expert_parameters() << " | " << final_loss.size()
         << " | " << fmt(f0.mean) << " | " << fmt(f.mean) << " +- " << fmt(f.std, "%.2g") << " | "
         << fmt(f.mean / constant, "%.3f") << " |\n";
    }
    md << "\n";
    if (!diverged.empty()) {
      // A diverged run has no loss to compare: it is said so and left out of every mean (the
      // claims, tasks/softmoe_l2norm/l2norm_claims.h, say what that does to the verdict).
      md << "Diverged (the loss became NaN or infinite; left out of the means above): " << diverged << ".\n\n";
      verdicts << "- " << tok << ": DIVERGED runs, " << diverged << ", not compared.\n";
    }
    if (finals.empty()) continue;
    std::sort(finals.begin(), finals.end());  // by n
    // The comparisons the claim rests on: does n = 1 lower the loss, does every n >= 2, does more
    // experts do better (the verdict is the Claims section's).
    std::ostringstream line;
    line << "- " << tok << ":";
    for (const auto& [n, f, sd] : finals) {
      const bool below = f < kClearlyBelow * constant;
      if (n == 1)
        line << " n = 1 ends at " << fmt(f / constant, "%.2f") << " x the constant's loss ("
             << (below ? "LOWERS it" : "does not lower it") << ");";
    }
    std::string above;
    bool any_larger = false;  // an n >= 2 with a finite loss (all of them may have diverged)
    for (const auto& [n, f, sd] : finals) {
      any_larger = any_larger || n >= 2;
      if (n >= 2 && !(f < kClearlyBelow * constant)) above += (above.empty() ? "" : ", ") + std::to_string(n);
    }
    if (!any_larger)
      line << " no n >= 2 has a finite loss to compare;";
    else
      line << (above.empty() ? " every n >= 2 lowers it;" : " n = " + above + " does not lower it;");
    // More experts, lower loss: a step from one n to the next "rises" when its mean grows by more
    // than the two seed standard deviations together, and "ties" when it grows by less (with one
    // seed, any growth rises).
    std::string chain, ties, rises;
    for (std::size_t i = 0; i < finals.size(); ++i) {
      const auto& [n, f, sd] = finals[i];
      chain += (i ? ", " : "") + ("n = " + std::to_string(n) + ": ") + fmt(f, "%.3g");
      if (i == 0 || f < std::get<1>(finals[i - 1])) continue;
      const std::string step = std::to_string(std::get<0>(finals[i - 1])) + " -> " + std::to_string(n);
      if (f - std::get<1>(finals[i - 1]) > sd + std::get<2>(finals[i - 1]))
        rises += (rises.empty() ? "" : ", ") + step;
      else
        ties += (ties.empty() ? "" : ", ") + step;
    }
    if (rises.empty() && ties.empty())
      line << " the final loss falls with every added expert (" << chain << ").";
    else if (rises.empty())
      line << " the final loss falls with n except n = " << ties << ", where it stays within the seeds' spread ("
           << chain << ").";
    else
      line << " the final loss RISES from n = " << rises << " by more than the seeds' spread (" << chain << ").";
    verdicts << line.str() << "\n";

    // The loss curves: the mean over the seeds present at each logged step, one line per n.
    LinePlot plot{.title = "Soft MoE learning ||x||_2, " + tok + " tokens",
                  .xlabel = "step",
                  .ylabel = "MSE (fresh batch)",
                  .log_y = true,
                  .series = {}};
    std::int64_t last_step = 1;
    for (std::int64_t n : s.ints("experts")) {
      std::map<std::int64_t, std::pair<double, int>> by_step;
      for (const auto& row : metrics)
        if (row.at("tokenisation") == tok && row.at("experts") == std::to_string(n) && wanted_seed(row)) {
          auto& [sum, k] = by_step[row.integer("step")];
          sum += row.real("loss"), ++k;
        }
      if (by_step.empty()) continue;
      Series line_n{"n = " + std::to_string(n) + " (h = " + std::to_string(spec_for(s, d, n).hidden()) + ")", {}, {}, {}, {}};
      for (const auto& [step, v] : by_step) {
        line_n.x.push_back(static_cast<double>(step));
        line_n.y.push_back(v.first / v.second);
        last_step = std::max(last_step, step);
      }
      plot.series.push_back(line_n);
    }
    plot.series.push_back({"best constant (" + fmt(constant) + ")", {1.0, static_cast<double>(last_step)},
                           {constant, constant}, {}, {}});
    const PlotResult r = plot_lines(plot, ctx.dir.path(), "loss_" + tok);
    md << (r.drawn ? "![loss curves](" + r.png.filename().string() + ")" : "(no plot: " + r.message + ")") << "\n\n";
  }
  md << "## Comparisons\n\n"
     << "The numbers behind the Claims section, pair by pair; the paper's claims are judged there only (`moelab claims --check` recomputes that section from the CSV files).\n\n" << verdicts.str() << "\n"
     << (complete ? "" : "(Some jobs are missing; the lines above cover the finished ones.)\n")
     << "Training time of the jobs: " << clock_text(job_seconds) << " (this invocation: " << clock_text(wall_seconds)
     << ", " << ctx.threads << " thread" << (ctx.threads == 1 ? "" : "s") << ").\n";
  ctx.dir.write_text("summary.md", md.str());
  std::printf("\n%s", md.str().c_str());
}

int run_l2norm(const RunContext& ctx) {
  const Settings& s = ctx.settings;
  validate_l2norm(s);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Point> points = grid_of(s);
  JobGrid g = job_grid_for(softmoe_l2norm_experiment());
  for (const Point& p : points) g.points.push_back(p.name);
  g.run_point = [&](std::size_t i) { run_job(ctx, points[i]); };
  g.report = [&] {
    // results.csv and metrics.csv from the finished jobs, in grid order.
    ctx.dir.write_text("results.csv", gather_rows(ctx.dir, g.points, kResultsHeader));
    ctx.dir.write_text("metrics.csv", gather_curves(ctx.dir, g.points));
    std::printf("softmoe-l2norm: best constant's loss %.4f\n",
                l2norm::constant_predictor_loss(s.integer("input_dim"), s.real("variance")));
    write_report(ctx, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
  return run_job_grid(ctx, g);
}

}  // namespace

Experiment softmoe_l2norm_experiment() {
  Experiment e;
  e.name = "softmoe-l2norm";
  e.summary = "implicit-bias paper App. C: Soft MoE with 1 expert cannot learn ||x||_2, more experts can";
  e.details =
      "Trains a Soft MoE layer (n experts, one slot each, bias-free ReLU experts of hidden width 10d/n so the "
      "experts always hold 20 d^2 parameters, routing logits X phi without normalisation) followed by a fixed "
      "summation head, by MSE to output ||x||_2 for x ~ N(0, 5 I_10) cut into m tokens of d values, on fresh "
      "batches, for every (tokenisation, n, seed). Reports the final loss per n against the best constant "
      "predictor's (Var||x|| = 2.435): the paper's claim is that n = 1 stays there and more experts go lower. "
      "Running the same command again skips finished jobs. Every (tokenisation, n, seed) is an independent job: "
      "--set mode=list prints one command line per missing job (docs/jobs.md), mode=point runs one, mode=report "
      "gathers them, mode=all (default) runs the missing ones and reports.";
  e.settings = l2norm_settings;
  e.presets = l2norm_presets();
  e.default_preset = "cpu";
  e.validate = [](const Settings& s) {
    validate_l2norm(s);
    std::vector<std::string> names;
    for (const Point& p : grid_of(s)) names.push_back(p.name);
    validate_job_settings(s, names);
  };
  e.run = run_l2norm;
  e.claims = l2norm::l2norm_claims;
  return e;
}

}  // namespace moelab
