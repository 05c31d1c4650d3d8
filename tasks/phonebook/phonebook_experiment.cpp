// tasks/phonebook/phonebook_experiment.cpp — settings, presets and the sweep of `moelab phonebook`
// (see the header). The report (capacity table, plots, summary) is in phonebook_report.cpp.
#include "tasks/phonebook/phonebook_experiment.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "tasks/common/epoch_sampler.h"
#include "tasks/common/models.h"
#include "tasks/common/train.h"
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
  s.add_int("k", 2, "experts per token (top-k, Mixtral gates, no dropping)", 1, 4096);
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
  // Each book depends only on the seed and its size: more sizes add jobs, they change none.
  s.may_change_on_resume({"book_sizes"});
  return s;
}

// The presets, readable as tables: each value is what `--set key=value` would say.
std::vector<Preset> phonebook_presets() {
  return {
      {"demo",
       "what ./run.sh runs (about 2 minutes on 2 cores): a dense d 32 model with FFN width 2d (the active "
       "parameters of a top-2 MoE) against MoE d 32 with 4 and 8 experts, books of 400 to 800 entries",
       {{"dense_widths", "32"}, {"dense_ffn_factors", "2"}, {"moe_widths", "32"}, {"experts", "4,8"},
        {"book_sizes", "400,500,600,800"}, {"steps", "1000"}, {"batch", "64"}, {"lrs", "1e-2"},
        {"eval_every", "250"}, {"test_names", "300"}}},
      {"cpu",
       "docs/EXPERIMENTS.md's CPU setting (within an hour on 2 cores): dense d 64/96/128, MoE d 64 with 4/8/16 "
       "experts, books of 250 to 4000 entries, 1200 steps of 128",
       {}},
      {"paper",
       "the paper's Figure 4a (a GPU and days): 12 layers, dense d 256/512/1024, MoE d 256/512 with "
       "8/16/32/64 experts, books of 100k to 3M entries, learning rates 5e-5..1e-3, 2 to 15 epochs, batch 32",
       {{"layers", "12"}, {"heads", "8"}, {"dense_widths", "256,512,1024"}, {"moe_widths", "256,512"},
        {"experts", "8,16,32,64"}, {"book_sizes", "100000,500000,1000000,1500000,2000000,2500000,3000000"},
        {"epochs", "2,5,10,15"}, {"batch", "32"}, {"lrs", "5e-5,1e-4,5e-4,1e-3"}, {"eval_every", "5000"}}},
  };
}

std::string job_key(const std::string& model, std::int64_t book, double lr, std::int64_t epochs) {
  return model + "|" + std::to_string(book) + "|" + cell(lr) + "|" + std::to_string(epochs);
}

// The job's name in metrics.csv and on the progress line.
std::string job_label(const Settings& s, const ModelSpec& spec, std::int64_t book_size, double lr, std::int64_t epochs) {
  return spec.name() + " book " + std::to_string(book_size) + (s.reals("lrs").size() > 1 ? " lr " + cell(lr) : "") +
         (epochs > 0 ? " " + std::to_string(epochs) + " epochs" : "");
}

std::vector<ModelSpec> phonebook_models(const Settings& s) {
  return model_grid(s.ints("dense_widths"), s.ints("moe_widths"), s.ints("experts"), s.integer("k"),
                    s.integer("layers"), s.integer("heads"), s.ints("dense_ffn_factors"));
}

// Settings that are each fine but cannot work together (UsageError, before any work).
void validate_phonebook(const Settings& s) {
  check_model_grid(phonebook_models(s));
  const std::vector<std::int64_t> sizes = s.ints("book_sizes");
  for (std::size_t i = 1; i < sizes.size(); ++i)
    if (sizes[i] <= sizes[i - 1])
      throw UsageError("book_sizes must be strictly ascending, got " + s.to_json()["book_sizes"].dump());
  if (sizes.back() > phonebook::kMaxBookSize)
    throw UsageError("book_sizes: at most " + std::to_string(phonebook::kMaxBookSize) + " entries (half the " +
                     "5-letter names), got " + std::to_string(sizes.back()));
}

int run_phonebook(const RunContext& ctx) {
  const Settings& s = ctx.settings;
  validate_phonebook(s);
  const std::vector<ModelSpec> models = phonebook_models(s);
  const std::vector<std::int64_t> sizes = s.ints("book_sizes");

  const std::vector<std::string> header = {"model",     "family",  "d",          "experts",        "k",
                                           "total_params", "active_params", "book_size", "lr", "epochs",
                                           "steps",     "exact_match", "digit_accuracy", "final_loss", "seconds"};
  std::set<std::string> done;
  std::map<std::string, double> accuracy_of;  // job key -> exact match, for jobs found on disk
  for (const auto& row : read_csv(ctx.dir.file("results.csv"))) {
    const std::string key = job_key(row.at("model"), row.integer("book_size"), row.real("lr"),
                                    row.integer("epochs"));
    done.insert(key);
    accuracy_of[key] = row.real("exact_match");
  }
  if (!done.empty())
    std::printf("resuming: %zu finished jobs found in %s\n", done.size(), ctx.dir.file("results.csv").c_str());
  // A job that did not finish runs again from the start: its metrics rows go, so it has one curve.
  std::set<std::string> unfinished;
  for (const ModelSpec& spec : models)
    for (std::int64_t book_size : sizes)
      for (std::int64_t epochs : s.ints("epochs"))
        for (double lr : s.reals("lrs"))
          if (!done.count(job_key(spec.name(), book_size, lr, epochs)))
            unfinished.insert(job_label(s, spec, book_size, lr, epochs));
  drop_unfinished_rows(ctx.dir.file("metrics.csv"),
                       [&](const CsvRow& row) { return unfinished.count(row.text("job")) > 0; });
  CsvFile results = ctx.dir.csv("results.csv", header);
  CsvFile metrics = ctx.dir.csv("metrics.csv", {"job", "step", "metric", "value"});

  const double threshold = s.real("threshold");
  const std::int64_t batch = s.integer("batch");
  std::printf("phonebook: %zu models x %zu book sizes x %zu learning rates x %zu budgets, %s sampling, %d threads "
              "-> %s\n",
              models.size(), sizes.size(), s.reals("lrs").size(), s.ints("epochs").size(), s.text("sampling").c_str(),
              ctx.threads, ctx.dir.path().c_str());
  for (std::size_t mi = 0; mi < models.size(); ++mi) {
    const ModelSpec& spec = models[mi];
    std::int64_t failures_in_a_row = 0;
    for (std::int64_t book_size : sizes) {
      if (failures_in_a_row >= s.integer("stop_after_failures")) {
        std::printf("[%s] book %lld skipped: failed the last %lld sizes\n", spec.name().c_str(),
                    static_cast<long long>(book_size), static_cast<long long>(failures_in_a_row));
        continue;
      }
      // The book and the test names depend only on the seed and the size: every model sees the same.
      Generator book_gen(ctx.seed * 1000003 + static_cast<std::uint64_t>(book_size));
      const std::vector<phonebook::Entry> book = phonebook::make_book(book_size, book_gen);
      const std::vector<std::int64_t> tested = phonebook::test_indices(book_size, s.integer("test_names"), book_gen);
      double best = 0;
      for (std::int64_t epochs : s.ints("epochs")) {
        for (double lr : s.reals("lrs")) {
          const std::string key = job_key(spec.name(), book_size, lr, epochs);
          if (done.count(key)) {
            best = std::max(best, accuracy_of[key]);
            continue;
          }
          Generator init_gen(ctx.seed * 7919 + mi), data_gen(ctx.seed * 104729 + static_cast<std::uint64_t>(book_size));
          std::unique_ptr<Decoder> model = build_decoder(spec, phonebook::kVocab, phonebook::kSequenceLength, init_gen);
          model->to(ctx.device);  // before train_decoder builds its optimizer
          const ModelSize size = model_size(*model);
          TrainConfig tc;
          // Which entries each step shows (tasks/common/epoch_sampler.h); an epoch budget is
          // ceil(N / batch) steps per epoch (the last batch of each epoch short).
          EpochSampler sampler(book_size, batch, parse_sampling(s.text("sampling")));
          tc.steps = epochs > 0 ? sampler.steps_for_epochs(epochs) : s.integer("steps");
          tc.lr = lr, tc.weight_decay = s.real("weight_decay"), tc.warmup_fraction = s.real("warmup_fraction");
          tc.clip = s.real("clip"), tc.eval_every = s.integer("eval_every");
          const std::string label = job_label(s, spec, book_size, lr, epochs);
          phonebook::RecallResult last{};
          const TrainReport report = train_decoder(
              *model, tc, [&](Generator& g) { return phonebook::training_batch(book, sampler.next(g)); }, data_gen,
              [&](Decoder& m) {
                last = phonebook::recall(m, book, tested);
                return std::map<std::string, double>{{"exact_match", last.exact_match},
                                                     {"digit_accuracy", last.digit_accuracy}};
              },
              label, &metrics, [](const std::map<std::string, double>& m) { return m.at("exact_match") >= 1.0; });
          results.row({spec.name(), spec.family(), cell(spec.d), cell(spec.experts), cell(spec.moe() ? spec.k : 0),
                       cell(size.non_embedding), cell(size.active), cell(book_size), cell(lr), cell(epochs),
                       cell(report.steps_done), cell(last.exact_match), cell(last.digit_accuracy),
                       cell(report.final_loss), cell(report.seconds)});
          best = std::max(best, last.exact_match);
        }
      }
      failures_in_a_row = best >= threshold ? 0 : failures_in_a_row + 1;
    }
  }
  return write_phonebook_report(ctx, models, threshold);
}

}  // namespace

Experiment phonebook_experiment() {
  Experiment e;
  e.name = "phonebook";
  e.summary = "Mixture of Parrots Fig. 4a: the largest phone-book a dense or MoE decoder memorizes";
  e.details =
      "Trains each model of the grid (dense widths; MoE widths x expert counts, top-k, FFN width = d) on "
      "phone-books of each size, asks 1,000 of its names, and reports the largest book recalled at >= "
      "threshold exact-match accuracy against total and active parameters. Batches are taken from a fresh "
      "shuffle of the book each epoch (every entry once per epoch; the last batch of an epoch is short when "
      "batch does not divide N); sampling=replacement draws them with replacement instead, the recipe of "
      "results recorded before this was the default.";
  e.settings = phonebook_settings;
  e.presets = phonebook_presets();
  e.default_preset = "cpu";
  e.validate = validate_phonebook;
  e.run = run_phonebook;
  return e;
}

}  // namespace moelab
