// tasks/phonebook/phonebook_experiment.cpp — settings, presets and the sweep of `moelab phonebook`
// (see the header). The report (capacity table, plots, summary) is in phonebook_report.cpp.
#include "tasks/phonebook/phonebook_experiment.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "tasks/common/epoch_sampler.h"
#include "runner/job_grid.h"
#include "tasks/common/models.h"
#include "tasks/common/precision_setting.h"
#include "tasks/common/routing_log.h"
#include "tasks/common/router_settings.h"
#include "tasks/common/train.h"
#include "tasks/phonebook/phonebook_claims.h"
#include "tasks/phonebook/phonebook_data.h"
#include "tasks/phonebook/phonebook_report.h"

namespace moelab {

namespace {

Settings phonebook_settings() {
  Settings s;
  s.add_int("layers", 2, "decoder blocks", 1, 256);
  s.add_int("heads", 4, "attention heads (d / heads must be even)", 1, 256);
  s.add_int_list("dense_widths", {64, 96, 128}, "widths d of the dense models (FFN width = d)", 2, 1 << 16);
  s.add_int_list("dense_ffn_factors", {1},
                 "FFN widths of the dense models in units of d (2: the active parameters of a top-2 MoE)", 1, 64);
  s.add_int_list("moe_widths", {64}, "widths d of the MoE models", 2, 1 << 16);
  s.add_int_list("experts", {4, 8, 16}, "expert counts E of the MoE models", 1, 4096);
  s.add_int("k", 2, "experts per token (router topk: Mixtral gates, no dropping)", 1, 4096);
  add_router_settings(s, "every MoE model");
  add_activation_setting(s);
  s.add_int_list("book_sizes", {250, 500, 1000, 1500, 2000, 3000, 4000}, "phone-book sizes N to try, ascending", 1,
                 1e8);
  s.add_int("steps", 1200, "optimizer steps per training run (when epochs = 0)", 1, 1e9);
  s.add_int_list("epochs", {0}, "passes over the book per run instead of a fixed step count (0: use steps)", 0, 1e6);
  s.add_int("batch", 128, "entries per optimizer step", 1, 1 << 20);
  s.add_text("sampling", "epochs", kSamplingHelp, sampling_choices());
  s.add_real_list("lrs", {3e-3}, "peak learning rates to try; the best run counts", 1e-9, 10);
  s.add_real("weight_decay", 0.1, "AdamW weight decay on matrices", 0, 10);
  s.add_real("warmup_fraction", 0.2, "share of the steps with a linear warmup (then linear decay to 0)", 0, 1);
  s.add_real("clip", 1.0, "gradient clipping: max global norm (0: none)", 0, 1e9);
  s.add_int("eval_every", 200, "recall test every N steps (training stops early at 100%)", 1, 1e9);
  s.add_int("test_names", 1000, "names of the book asked at test time", 1, 1e8);
  s.add_real("threshold", 0.9, "exact-match accuracy at which a book counts as memorized", 0, 1);
  s.add_int("stop_after_failures", 1, "larger books are skipped for a model after this many failed sizes in a row", 1,
            1000);
  s.add_int_list("seeds", {0}, "replicates of every (model, book size): each draws its own book, test names, initial "
                 "weights and batches (0,1,2: three; capacities are reported per seed and as their median)", 0, 1e9);
  add_job_settings(s, "moe-d64-16e-N2000-seed0");
  add_precision_setting(s);
  // Each point depends only on its model, seed and size: more sizes or seeds add points, they change none.
  s.may_change_on_resume({"book_sizes", "seeds"});
  return s;
}

// The presets, readable as tables: each value is what `--set key=value` would say.
std::vector<Preset> phonebook_presets() {
  return {
      {"demo",
       "what ./run.sh runs (2-3 minutes on 2 cores): a dense d 32 model with FFN width 2d (the active "
       "parameters of a top-2 MoE) against MoE d 32 with 4 and 8 experts, books of 400 to 800 entries, seeds 0, "
       "1, 2 (the capacity is the median over seeds)",
       {{"seeds", "0,1,2"}, {"dense_widths", "32"}, {"dense_ffn_factors", "2"}, {"moe_widths", "32"}, {"experts", "4,8"},
        {"book_sizes", "400,500,600,800"}, {"steps", "1000"}, {"batch", "64"}, {"lrs", "1e-2"},
        {"eval_every", "250"}, {"test_names", "300"}}},
      {"cpu",
       "docs/EXPERIMENTS.md's CPU setting: dense d 64/96/128, MoE d 64 with 4/8/16 experts, books of 250 to 4000 "
       "entries, 1200 steps of 128, seeds 0, 1, 2 (about 80 points after the stop rule, 15-20 core-minutes)",
       {{"seeds", "0,1,2"}}},
      {"paper",
       "the paper's Figure 4a (a GPU and days): 12 layers, dense d 256/512/1024, MoE d 256/512 with "
       "8/16/32/64 experts, books of 100k to 3M entries, learning rates 5e-5..1e-3, 2 to 15 epochs, batch 32",
       {{"layers", "12"}, {"heads", "8"}, {"dense_widths", "256,512,1024"}, {"moe_widths", "256,512"},
        {"experts", "8,16,32,64"}, {"book_sizes", "100000,500000,1000000,1500000,2000000,2500000,3000000"},
        {"epochs", "2,5,10,15"}, {"batch", "32"}, {"lrs", "5e-5,1e-4,5e-4,1e-3"}, {"eval_every", "5000"},
        {"seeds", "0,1,2"}}},
  };
}

// The job's name in metrics.csv and on the progress line.
std::string job_label(const Settings& s, const ModelSpec& spec, std::int64_t book_size, std::int64_t seed, double lr,
                      std::int64_t epochs) {
  return spec.name() + " book " + std::to_string(book_size) + " seed " + std::to_string(seed) +
         (s.reals("lrs").size() > 1 ? " lr " + cell(lr) : "") +
         (epochs > 0 ? " " + std::to_string(epochs) + " epochs" : "");
}

std::vector<ModelSpec> phonebook_models(const Settings& s) {
  std::vector<ModelSpec> models = model_grid(s.ints("dense_widths"), s.ints("moe_widths"), s.ints("experts"),
                                             s.integer("k"), s.integer("layers"), s.integer("heads"),
                                             s.ints("dense_ffn_factors"));
  apply_router_settings(s, models);
  apply_activation_setting(s, models);
  return models;
}

// Settings that are each fine but cannot work together (UsageError, before any work).
std::vector<PhonebookPoint> grid_of(const Settings& s) {
  return phonebook_grid(phonebook_models(s), s.ints("seeds"), s.ints("book_sizes"));
}

void validate_phonebook(const Settings& s) {
  check_model_grid(phonebook_models(s));
  if (s.ints("seeds").empty()) throw UsageError("seeds: give at least one value");
  const std::vector<std::int64_t> sizes = s.ints("book_sizes");
  for (std::size_t i = 1; i < sizes.size(); ++i)
    if (sizes[i] <= sizes[i - 1])
      throw UsageError("book_sizes must be strictly ascending, got " + s.to_json()["book_sizes"].dump());
  if (sizes.back() > phonebook::kMaxBookSize)
    throw UsageError("book_sizes: at most " + std::to_string(phonebook::kMaxBookSize) + " entries (half the " +
                     "5-letter names), got " + std::to_string(sizes.back()));
  // mode=point names a point of this grid: checked here, before the run folder is touched.
  std::vector<std::string> names;
  for (const PhonebookPoint& p : grid_of(s)) names.push_back(p.name);
  validate_job_settings(s, names);
}

// One point: the model trained once per (budget, learning rate) on its book; the best counts.
void run_point(const RunContext& ctx, const ModelSpec& spec, std::size_t mi, const PhonebookPoint& p) {
  const Settings& s = ctx.settings;
  const std::int64_t book_size = p.book_size, batch = s.integer("batch");
  // Replicate 0 is the run's seed itself: a one-seed run draws what runs before seeds drew.
  const std::uint64_t seed = replicate_seed(ctx.seed, p.seed);
  // The book and the test names depend only on the seed and the size: every model sees the same.
  Generator book_gen(seed * 1000003 + static_cast<std::uint64_t>(book_size));
  const std::vector<phonebook::Entry> book = phonebook::make_book(book_size, book_gen);
  const std::vector<std::int64_t> tested = phonebook::test_indices(book_size, s.integer("test_names"), book_gen);
  CsvFile metrics = ctx.dir.csv(point_curve_file(p.name), {"job", "step", "metric", "value"});
  RoutingLog routing(ctx.dir, p.name);  // MoE models: MaxVio, specialisation, drift (routing_log.h)
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  double best = 0;
  ModelSize size{};
  for (std::int64_t epochs : s.ints("epochs")) {
    for (double lr : s.reals("lrs")) {
      Generator init_gen(seed * 7919 + mi), data_gen(seed * 104729 + static_cast<std::uint64_t>(book_size));
      std::unique_ptr<Decoder> model = build_decoder(spec, phonebook::kVocab, phonebook::kSequenceLength, init_gen);
      model->to(ctx.device);  // before train_decoder builds its optimizer
      size = model_size(*model);
      TrainConfig tc;
      // Which entries each step shows (tasks/common/epoch_sampler.h); an epoch budget is
      // ceil(N / batch) steps per epoch (the last batch of each epoch short).
      EpochSampler sampler(book_size, batch, parse_sampling(s.text("sampling")));
      tc.steps = epochs > 0 ? sampler.steps_for_epochs(epochs) : s.integer("steps");
      tc.lr = lr, tc.weight_decay = s.real("weight_decay"), tc.warmup_fraction = s.real("warmup_fraction");
      tc.clip = s.real("clip"), tc.eval_every = s.integer("eval_every");
      phonebook::RecallResult last{};
      const std::string job = job_label(s, spec, book_size, p.seed, lr, epochs);
      const TrainReport report = train_decoder(
          *model, tc,
          routing.probing([&](Generator& g) { return phonebook::training_batch(book, sampler.next(g)); }), data_gen,
          routing.around(
              [&](Decoder& m, std::int64_t) {
                last = phonebook::recall(m, book, tested);
                return std::map<std::string, double>{{"exact_match", last.exact_match},
                                                     {"digit_accuracy", last.digit_accuracy}};
              },
              job),
          job, &metrics,
          [](const std::map<std::string, double>& m) { return m.at("exact_match") >= 1.0; });
      runs.push_back({{"lr", lr},
                      {"epochs", epochs},
                      {"steps", report.steps_done},
                      {"exact_match", last.exact_match},
                      {"digit_accuracy", last.digit_accuracy},
                      {"final_loss", report.final_loss},
                      {"seconds", report.seconds}});
      best = std::max(best, last.exact_match);
    }
  }
  nlohmann::ordered_json j;
  j["point"] = p.name;
  j["model"] = spec.name();
  j["family"] = spec.family();
  j["d"] = spec.d;
  j["experts"] = spec.experts;
  j["k"] = spec.moe() ? spec.k : 0;
  j["total_params"] = size.non_embedding;
  j["active_params"] = size.active;
  j["book_size"] = book_size;
  j["seed"] = p.seed;
  j["run_seed"] = ctx.seed;
  j["best_exact_match"] = best;
  j["runs"] = runs;
  write_point(ctx.dir, p.name, j);  // last: its presence marks the point done
}

// The best exact match of a finished point, nothing for one that is not done.
std::optional<double> best_of(const RunDir& dir, const std::string& name) {
  const std::optional<nlohmann::json> j = read_point(dir, name);
  if (!j) return std::nullopt;
  return j->at("best_exact_match").get<double>();
}

int run_phonebook(const RunContext& ctx) {
  const Settings& s = ctx.settings;
  validate_phonebook(s);
  const std::vector<ModelSpec> models = phonebook_models(s);
  const std::vector<PhonebookPoint> points = grid_of(s);
  const std::size_t sizes = s.ints("book_sizes").size();
  JobGrid g = job_grid_for(phonebook_experiment());
  for (const PhonebookPoint& p : points) g.points.push_back(p.name);
  g.run_point = [&](std::size_t i) { run_point(ctx, models[points[i].model], points[i].model, points[i]); };
  // The stop rule over the finished points of this point's (model, seed): its sizes are the
  // `sizes` points that end at the point's row of the grid's (model, seed) block.
  g.needed = [&](std::size_t i) {
    const std::size_t first = i - i % sizes;
    std::vector<std::optional<double>> best;
    for (std::size_t j = first; j < first + sizes; ++j) best.push_back(best_of(ctx.dir, points[j].name));
    return walk_books(best, s.real("threshold"), s.integer("stop_after_failures"))[i - first] != BookState::Skipped;
  };
  g.report = [&] { write_phonebook_report(ctx, models, points); };
  return run_job_grid(ctx, g);
}

}  // namespace

Experiment phonebook_experiment() {
  Experiment e;
  e.name = "phonebook";
  e.summary = "Mixture of Parrots Fig. 4a: the largest phone-book a dense or MoE decoder memorizes";
  e.details =
      "Trains each model of the grid (dense widths; MoE widths x expert counts, top-k or the `router` setting's "
      "scheme with router_options, FFN width = d) on "
      "phone-books of each size, asks 1,000 of its names, and reports the largest book recalled at >= "
      "threshold exact-match accuracy against total and active parameters. Batches are taken from a fresh "
      "shuffle of the book each epoch (every entry once per epoch; the last batch of an epoch is short when "
      "batch does not divide N); sampling=replacement draws them with replacement instead, the recipe of "
      "results recorded before this was the default. Every (model, book size, seed) is an independent job: "
      "--set mode=list prints one command line per missing point (GNU parallel, a Slurm job array: docs/jobs.md), "
      "mode=point runs one, mode=report gathers them (capacity: the largest book memorized per seed under the same "
      "stop rule as mode=all, and the median over seeds), mode=all (default) runs the missing ones in order and "
      "reports.";
  e.settings = phonebook_settings;
  e.presets = phonebook_presets();
  e.default_preset = "cpu";
  e.validate = validate_phonebook;
  e.run = run_phonebook;
  e.claims = phonebook_claims;
  return e;
}

}  // namespace moelab
