// tasks/routers/routers_experiment.cpp — settings, presets and the sweep of `moelab routers` (see
// the header). The report is in routers_report.cpp, the schemes in router_schemes.cpp.
#include "tasks/routers/routers_experiment.h"

#include <algorithm>
#include <map>

#include "tasks/common/epoch_sampler.h"
#include "tasks/common/job_grid.h"
#include "tasks/common/models.h"
#include "tasks/common/train.h"
#include "tasks/phonebook/phonebook_data.h"
#include "tasks/routers/load_probe.h"
#include "tasks/routers/routers_report.h"

namespace moelab {

namespace {

std::string all_schemes() {
  std::string all;
  for (const std::string& n : scheme_names()) all += (all.empty() ? "" : ",") + n;
  return all;
}

Settings routers_settings() {
  Settings s;
  s.add_text("schemes", all_schemes(),
             "routing schemes to compare, comma-separated (tasks/routers/router_schemes.h; expert choice is left out: "
             "not causal)");
  s.add_int("layers", 2, "decoder blocks", 1, 256);
  s.add_int("heads", 4, "attention heads (d / heads must be even)", 1, 256);
  s.add_int("d", 64, "model width (every expert's FFN width is d)", 2, 1 << 16);
  s.add_int("experts", 8, "experts per MoE layer, E (shared-top1: 1 shared + E - 1 routed)", 2, 4096);
  s.add_int_list("book_sizes", {1500, 2000}, "phone-book sizes N, one task each", 1, phonebook::kMaxBookSize);
  s.add_int("steps", 1200, "optimizer steps per training run (when epochs = 0); no early stop", 1, 1e9);
  s.add_int("epochs", 0, "passes over the book per run instead of a fixed step count (0: use steps)", 0, 1e6);
  s.add_int("batch", 128, "entries per optimizer step", 1, 1 << 20);
  s.add_text("sampling", "epochs", kSamplingHelp, sampling_choices());
  s.add_real("lr", 3e-3, "peak learning rate", 1e-9, 10);
  s.add_real("weight_decay", 0.1, "AdamW weight decay on matrices", 0, 10);
  s.add_real("warmup_fraction", 0.2, "share of the steps with a linear warmup (then linear decay to 0)", 0, 1);
  s.add_real("clip", 1.0, "gradient clipping: max global norm (0: none)", 0, 1e9);
  s.add_int("log_every", 50, "read the routers' load every N steps (outside the timed steps)", 1, 1e9);
  s.add_int("test_names", 1000, "names of the book asked after training", 1, 1e8);
  s.add_real("load_balance", 0.01, "Switch load-balancing loss coefficient of topk-aux, topk-cap and top-p", 0, 10);
  s.add_real("capacity_factor", 1.25, "topk-cap: each expert keeps ceil(factor * T * 2 / E) assignments", 0.01, 100);
  s.add_real("aux_free_rate", 1e-3, "aux-free: the expert bias's update rate u per step", 0, 10);
  s.add_real("top_p_threshold", 0.4, "top-p: probability mass a token's experts must reach", 1e-6, 1);
  s.add_int("top_p_max_k", 0, "top-p: most experts per token (0: all E)", 0, 4096);
  s.add_int_list("seeds", {0}, "replicates of every (scheme, book): each draws its own book, test names, initial "
                 "weights and batches, the same for every scheme", 0, 1e9);
  add_job_settings(s, "aux-free-N1500-seed0");
  // Each point depends only on its scheme, size and seed: more of them add points, they change none.
  s.may_change_on_resume({"schemes", "book_sizes", "seeds"});
  return s;
}

std::vector<Preset> routers_presets() {
  return {
      {"demo",
       "a quick look (84 s on one thread of a busy 2-core machine): d 32, 8 experts, books of 600 and 800 entries (the demo "
       "top-2 model's edge in `moelab phonebook --preset demo`), 1000 steps of 64, one seed",
       {{"d", "32"}, {"book_sizes", "600,800"}, {"steps", "1000"}, {"batch", "64"}, {"lr", "1e-2"},
        {"test_names", "300"}}},
      {"cpu",
       "docs/EXPERIMENTS.md's CPU setting: d 64, 8 experts of width 64, books of 1500 (top-2 memorizes 92-100% in "
       "docs/results/phonebook-cpu) and 2000 entries (21-60%: past its edge), 1200 steps of 128, seeds 0, 1 "
       "(28 points: 12 minutes on one thread of a busy 2-core machine)",
       {{"seeds", "0,1"}}},
      {"paper",
       "the Mixture of Parrots phone-book scale (a GPU and days; not run here): 12 layers, d 256, 8 heads, 16 "
       "experts, books of 500k and 1M entries, 10 epochs of batch 32, lr 1e-3, three seeds",
       {{"layers", "12"}, {"heads", "8"}, {"d", "256"}, {"experts", "16"}, {"book_sizes", "500000,1000000"},
        {"epochs", "10"}, {"batch", "32"}, {"lr", "1e-3"}, {"log_every", "2000"}, {"seeds", "0,1,2"}}},
  };
}

SchemeSettings scheme_settings(const Settings& s) {
  return {.load_balance = s.real("load_balance"), .capacity_factor = s.real("capacity_factor"),
          .aux_free_rate = s.real("aux_free_rate"), .top_p_threshold = s.real("top_p_threshold"),
          .top_p_max_k = s.integer("top_p_max_k")};
}

std::vector<RouterScheme> schemes_of(const Settings& s) {
  std::vector<RouterScheme> out;
  for (const std::string& name : parse_scheme_list(s.text("schemes")))
    out.push_back(router_scheme(name, scheme_settings(s), s.integer("experts")));
  return out;
}

ModelSpec base_spec(const Settings& s) {
  ModelSpec spec;
  spec.d = s.integer("d"), spec.layers = s.integer("layers"), spec.heads = s.integer("heads");
  spec.experts = s.integer("experts"), spec.k = 2;
  return spec;
}

void validate_routers(const Settings& s) {
  schemes_of(s);  // UsageError for an unknown scheme or one the experts cannot hold (top_p_max_k > E)
  check_model_grid({base_spec(s)});
  if (s.ints("seeds").empty()) throw UsageError("seeds: give at least one value");
  const std::vector<std::int64_t> sizes = s.ints("book_sizes");
  for (std::size_t i = 1; i < sizes.size(); ++i)
    if (sizes[i] <= sizes[i - 1]) throw UsageError("book_sizes must be strictly ascending");
}

// One point: the scheme's decoder trained on its book, its load read at every log step.
void run_point(const RunContext& ctx, const RouterScheme& scheme, const RoutersPoint& p) {
  const Settings& s = ctx.settings;
  const std::int64_t book_size = p.book_size, batch = s.integer("batch"), log_every = s.integer("log_every");
  const std::uint64_t seed = replicate_seed(ctx.seed, p.seed);
  // The book, the test names and the batches are drawn as `moelab phonebook` draws them for the
  // same seed and size; they and the initial weights' generator are the same for every scheme.
  Generator book_gen(seed * 1000003 + static_cast<std::uint64_t>(book_size));
  const std::vector<phonebook::Entry> book = phonebook::make_book(book_size, book_gen);
  const std::vector<std::int64_t> tested = phonebook::test_indices(book_size, s.integer("test_names"), book_gen);
  Generator init_gen(seed * 7919), data_gen(seed * 104729 + static_cast<std::uint64_t>(book_size));
  std::unique_ptr<Decoder> model =
      build_scheme_decoder(scheme, base_spec(s), phonebook::kVocab, phonebook::kSequenceLength, init_gen);
  model->to(ctx.device);
  const ModelSize size = model_size(*model);

  EpochSampler sampler(book_size, batch, parse_sampling(s.text("sampling")));
  TrainConfig tc;
  tc.steps = s.integer("epochs") > 0 ? sampler.steps_for_epochs(s.integer("epochs")) : s.integer("steps");
  tc.lr = s.real("lr"), tc.weight_decay = s.real("weight_decay"), tc.warmup_fraction = s.real("warmup_fraction");
  tc.clip = s.real("clip"), tc.eval_every = log_every;

  // The loop calls the evaluation every log_every steps and after the last (never stopped early):
  // call c follows step min(c * log_every, steps). The load comes first, from the step's own
  // training forward; the recall test (its forwards replace that) only after the last step.
  std::int64_t calls = 0;
  std::map<std::string, std::pair<double, std::int64_t>> sums;  // averaged load figures over the logs
  std::map<std::string, double> last_load;
  phonebook::RecallResult recall{};
  CsvFile curves = ctx.dir.csv(point_curve_file(p.name), {"job", "step", "metric", "value"});
  const TrainReport report = train_decoder(
      *model, tc, [&](Generator& g) { return phonebook::training_batch(book, sampler.next(g)); }, data_gen,
      [&](Decoder& m) {
        const std::int64_t step = std::min(++calls * log_every, tc.steps);
        const LoadSnapshot load = read_load(m);
        last_load = load.mean;
        for (const auto& [name, value] : load.mean) sums[name].first += value, ++sums[name].second;
        std::map<std::string, double> out = load.as_metrics();
        if (step >= tc.steps) {
          recall = phonebook::recall(m, book, tested);
          out["exact_match"] = recall.exact_match, out["digit_accuracy"] = recall.digit_accuracy;
        }
        return out;
      },
      scheme.name + " book " + std::to_string(book_size) + " seed " + std::to_string(p.seed), &curves);

  nlohmann::ordered_json mean_load = nlohmann::ordered_json::object(), final_load = nlohmann::ordered_json::object();
  for (const auto& [name, sn] : sums) mean_load[name] = sn.first / static_cast<double>(sn.second);
  for (const auto& [name, value] : last_load) final_load[name] = value;
  // Active parameters at the mean slots per token (top-p's vary per token; the others' equal them).
  const double slots = mean_load.contains("mean_slots") ? mean_load["mean_slots"].get<double>()
                                                        : static_cast<double>(scheme.k);
  const double per_expert = static_cast<double>(parameters_per_expert(*model));
  nlohmann::ordered_json j;
  j["point"] = p.name;
  j["scheme"] = scheme.name;
  j["router"] = scheme.router;
  j["book_size"] = book_size;
  j["seed"] = p.seed;
  j["run_seed"] = ctx.seed;
  j["total_params"] = size.non_embedding;
  j["active_params"] = size.active;
  j["active_params_at_mean_slots"] =
      static_cast<double>(size.active) - (static_cast<double>(scheme.k) - slots) * s.integer("layers") * per_expert;
  j["steps"] = report.steps_done;
  j["exact_match"] = recall.exact_match;
  j["digit_accuracy"] = recall.digit_accuracy;
  j["final_loss"] = report.final_loss;
  j["tokens_per_second"] = report.tokens_per_second;
  j["seconds"] = report.seconds;
  j["logs"] = calls;
  j["mean_load"] = mean_load;
  j["final_load"] = final_load;
  write_point(ctx.dir, p.name, j);  // last: its presence marks the point done
}

int run_routers(const RunContext& ctx) {
  const Settings& s = ctx.settings;
  validate_routers(s);
  const std::vector<RouterScheme> schemes = schemes_of(s);
  const std::vector<RoutersPoint> points = routers_grid(schemes, s.ints("book_sizes"), s.ints("seeds"));
  JobGrid g;
  g.experiment = "routers";
  for (const RoutersPoint& p : points) g.points.push_back(p.name);
  g.run_point = [&](std::size_t i) { run_point(ctx, schemes[points[i].scheme], points[i]); };
  g.report = [&] { write_routers_report(ctx, schemes, points); };
  g.settings = routers_settings;
  g.presets = routers_presets();
  return run_job_grid(ctx, g);
}

}  // namespace

Experiment routers_experiment() {
  Experiment e;
  e.name = "routers";
  e.summary = "routing schemes side by side on phone-book memorization: accuracy, load balance, speed";
  e.details =
      "Trains the same MoE decoder (width d, E experts of width d) once per routing scheme at equal active "
      "parameters: topk (top-2, no aux loss), topk-aux (+ Switch loss), topk-cap (+ capacity, drops), aux-free "
      "(DeepSeek-V3 bias balancing), balanced (BASE-style assignment in training), top-p (dynamic k: active "
      "parameters vary per token, the report gives the mean slots), shared-top1 (1 shared + top-1 of E - 1). "
      "Expert choice is left out: its experts choose among the batch's tokens, later positions included, which a "
      "causal decoder cannot do. Tasks: phone-books of each size of book_sizes (test_names names asked, exact match "
      "of the 8 digits). Every log_every steps it reads each expert's load in that step's forward (outside the timed "
      "steps): max/mean, coefficient of variation, dropped fraction, router entropy. Writes results.csv, "
      "load_curves.csv, summary.md (tables and verdict in numbers) and per-expert load heat maps over the steps. "
      "Every (scheme, book size, seed) is an independent job: --set mode=list prints one command line per missing "
      "point (docs/jobs.md), mode=point runs one, mode=report gathers them, mode=all (default) runs the missing "
      "ones in order and reports.";
  e.settings = routers_settings;
  e.presets = routers_presets();
  e.default_preset = "cpu";
  e.validate = validate_routers;
  e.run = run_routers;
  return e;
}

}  // namespace moelab
