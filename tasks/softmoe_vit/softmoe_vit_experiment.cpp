// tasks/softmoe_vit/softmoe_vit_experiment.cpp — settings, presets and the training half of
// `moelab softmoe-vit` (see the header); the evaluation is in softmoe_vit_report.cpp.
#include "tasks/softmoe_vit/softmoe_vit_experiment.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "nn/io/checkpoint.h"
#include "runner/job_grid.h"
#include "runner/report.h"
#include "tasks/common/precision_setting.h"
#include "tasks/softmoe_mnist/mnist_model.h"
#include "tasks/softmoe_vit/softmoe_vit_claims.h"
#include "tasks/softmoe_vit/softmoe_vit_report.h"

namespace moelab {

namespace sv = softmoe_vit;

namespace {

Settings softmoe_vit_settings() {
  Settings s;
  s.add_text("dataset", "fashion-mnist", "fashion-mnist (Debian's dataset-fashion-mnist), mnist (scripts/get-mnist.sh), "
             "cifar10 or cifar100 (the binary versions, from the folder data_dir names; no download exists)",
             {"fashion-mnist", "mnist", "cifar10", "cifar100"});
  s.add_text("data_dir", "auto", "folder with the dataset's files, the only one searched; auto: data/mnist for mnist, "
             "/usr/share/datasets/fashion-mnist for fashion-mnist (cifar10/cifar100 need a folder)");
  s.add_int("train_limit", 0, "use only the first N training images (0: all)", 0, 1e9);
  s.add_int("test_limit", 0, "use only the first N test images (0: all)", 0, 1e9);
  s.add_int_list("experts", {2, 4, 8, 16, 32}, "n: one network per value, experts of hidden width "
                 "floor(mlp_hidden / n) (all n together hold one dense MLP's weights)", 1, 4096);
  s.add_int_list("moe_layers", {2}, "L: one network per value, its last L blocks Soft MoE (the paper's ViT: the last "
                 "half)", 1, 64);
  s.add_int_list("seeds", {0, 1, 2}, "training seeds (one network per n, L and seed; the report gives mean +- std "
                 "over them and judges nothing with fewer than 2)", 0, 1e9);
  s.add_int("steps", 2000, "Adam steps per network", 1, 1e9);
  s.add_int("batch", 128, "images per step", 1, 1 << 20);
  s.add_real("lr", 1e-3, "Adam learning rate", 1e-9, 10);
  s.add_text("sampling", "epochs", kSamplingHelp, sampling_choices());
  s.add_int("patch", 7, "patch size p (divides the image's height and width): 28x28 images in 7x7 patches give 16 "
            "tokens", 1, 1024);
  s.add_int("dim", 64, "token width d", 1, 1 << 16);
  s.add_int("depth", 4, "encoder blocks", 1, 64);
  s.add_int("heads", 4, "attention heads (divides dim)", 1, 1024);
  s.add_int("mlp_hidden", 256, "the dense blocks' MLP width; each of n experts gets floor(mlp_hidden / n)", 1, 1 << 20);
  s.add_text("activation", "relu",
             "hidden activation of the dense MLPs and the Soft MoE experts alike: relu (the recorded runs'), gelu "
             "(the ViT's, exact) or swiglu (3 d f parameters an MLP instead of 2 d f; nn/activation.h)",
             {"relu", "gelu", "swiglu"});
  s.add_int("slots_per_expert", 1, "Soft MoE slots per expert (p)", 1, 1024);
  s.add_text("pool", "mean", "mean (global average pooling) or cls (a class token)", {"mean", "cls"});
  s.add_flag("moe_residual", false, "keep the residual around each Soft MoE layer (the ViT's); off (default): "
             "the paper's Astroformer variant, which dropped it because the network otherwise ignored the experts "
             "(its Appendix E.2)");
  s.add_int("eval_every", 500, "test accuracy every N steps during training (and at the end)", 1, 1e9);
  s.add_int("random_seeds", 10, "random-subset draws per (network, k), for mean and std (the paper: 10)", 2, 1000);
  s.add_int("timing_experts", 8, "Table 3: n of the untrained Soft MoE layers timed with k in {n, 3n/4, n/2, n/4} "
            "(0: no timing)", 0, 4096);
  s.add_int("timing_hidden", 2048, "Table 3: the timed experts' hidden width (the paper times large experts)", 1,
            1 << 20);
  s.add_int_list("timing_batches", {1, 100}, "Table 3: images per timed forward pass", 1, 100000);
  s.add_int("timing_trials", 100, "Table 3: timed passes per (k, batch), after 5 warm-up passes", 1, 1e6);
  add_job_settings(s, "n8-L2-seed0");
  add_precision_setting(s);
  s.may_change_on_resume({"experts", "moe_layers", "seeds", "random_seeds", "timing_experts", "timing_hidden",
                          "timing_batches", "timing_trials"});
  return s;
}

std::vector<Preset> softmoe_vit_presets() {
  return {
      {"demo",
       "about 3 minutes on one core: n = 4, 8, 16 "
       "with the last 2 of 4 blocks Soft MoE, two seeds (the fewest the claims are judged with), 600 steps of 64 on "
       "10,000 Fashion-MNIST training images, 2,000 "
       "test images, 10 random draws, a small timing",
       {{"experts", "4,8,16"}, {"seeds", "0,1"}, {"steps", "600"}, {"batch", "64"}, {"train_limit", "10000"},
        {"test_limit", "2000"}, {"eval_every", "200"}, {"timing_trials", "20"}, {"timing_hidden", "512"}}},
      {"cpu",
       "a CPU night, as jobs (docs/jobs.md): n = 2, 4, 8, 16, 32, the last 2 of 4 blocks Soft MoE, 3 seeds, 2000 "
       "Adam steps of 128 (4.3 epochs of Fashion-MNIST's 60,000 images; --set dataset=mnist for MNIST), all 10,000 "
       "test images, 10 random draws",
       {}},
      {"paper",
       "CIFAR shapes (--set dataset=cifar10 or cifar100 --set data_dir=DIR): 32x32x3 images in 4x4 patches (64 "
       "tokens), d 256, 8 blocks of 8 heads, the last 4 Soft MoE, n = 2..128, 3 seeds, 40,000 steps of 128 (about "
       "100 epochs); estimated 3-6 GPU-hours for the 21 networks from FLOPs (0.63 GFLOP a forward image, "
       "docs/EXPERIMENTS.md) at 10-20 TFLOP/s; not run",
       {{"dataset", "cifar10"}, {"patch", "4"}, {"dim", "256"}, {"depth", "8"}, {"heads", "8"}, {"mlp_hidden", "1024"},
        {"moe_layers", "4"}, {"experts", "2,4,8,16,32,64,128"}, {"steps", "40000"}, {"eval_every", "2000"}}},
  };
}

struct Point {
  std::int64_t experts = 0, moe_layers = 0, seed = 0;
  std::string name;
};

// seeds (outer) x L x n, named "n<n>-L<L>-seed<s>".
std::vector<Point> grid_of(const Settings& s) {
  std::vector<Point> out;
  for (std::int64_t seed : s.ints("seeds"))
    for (std::int64_t layers : s.ints("moe_layers"))
      for (std::int64_t n : s.ints("experts"))
        out.push_back({n, layers, seed,
                       "n" + std::to_string(n) + "-L" + std::to_string(layers) + "-seed" + std::to_string(seed)});
  return out;
}

void validate_softmoe_vit(const Settings& s) {
  for (const char* key : {"experts", "moe_layers", "seeds"})
    if (s.ints(key).empty()) throw UsageError(std::string(key) + ": give at least one value");
  std::vector<std::string> names;
  for (const Point& p : grid_of(s)) names.push_back(p.name);
  validate_job_settings(s, names);
  for (std::int64_t L : s.ints("moe_layers"))
    if (L > s.integer("depth"))
      throw UsageError("moe_layers: " + std::to_string(L) + " Soft MoE blocks do not fit in depth " +
                       std::to_string(s.integer("depth")));
  for (std::int64_t n : s.ints("experts"))
    if (s.integer("mlp_hidden") / n < 1)
      throw UsageError("experts: n = " + std::to_string(n) + " leaves floor(mlp_hidden / n) = 0 hidden units per "
                       "expert; raise mlp_hidden");
  if (s.integer("dim") % s.integer("heads") != 0)
    throw UsageError("heads: " + std::to_string(s.integer("heads")) + " does not divide dim " +
                     std::to_string(s.integer("dim")));
  const std::int64_t tn = s.integer("timing_experts");
  if (tn > 0 && tn % 4 != 0)
    throw UsageError("timing_experts: " + std::to_string(tn) + " is not a multiple of 4 (k = 3n/4, n/4)");
}

// Before anything is written: a named data_dir must be a folder; the files must be there.
void check_softmoe_vit_inputs(const Settings& s) {
  const std::string dir = s.text("data_dir"), dataset = s.text("dataset");
  std::error_code ec;
  if (dir != "auto" && !std::filesystem::is_directory(dir, ec))
    throw UsageError("data_dir: '" + dir + "' is not a folder");
  if (dataset == "cifar10" || dataset == "cifar100") {
    if (dir == "auto")
      throw UsageError("data_dir: " + dataset + " has no default folder and no download; name the folder that "
                       "holds its binary files (data_batch_*.bin or train.bin / test.bin)");
  } else {
    (void)locate_mnist(dataset, dir == "auto" ? "" : dir);  // moelab::Error naming what is missing where
  }
}

sv::ImageSplit load_data(const Settings& s) {
  const std::string dir = s.text("data_dir") == "auto" ? "" : s.text("data_dir");
  return sv::load_images(s.text("dataset"), dir, s.integer("train_limit"), s.integer("test_limit"));
}

const std::vector<std::string> kModelsHeader = {"experts", "moe_layers", "seed", "expert_hidden", "expert_parameters",
                                                "total_parameters", "steps", "epochs", "test_accuracy", "seconds",
                                                "checkpoint"};

std::string checkpoint_name(const Point& p) { return "checkpoints/" + p.name + ".safetensors"; }

void train_point(const RunContext& ctx, const sv::ImageSplit& data, const Point& p) {
  const Settings& s = ctx.settings;
  ctx.dir.subfolder("checkpoints");
  CsvFile curves = ctx.dir.csv(point_curve_file(p.name),
                               {"experts", "moe_layers", "seed", "step", "epoch", "train_loss", "test_accuracy"});
  const std::uint64_t key = static_cast<std::uint64_t>(p.experts * 100 + p.moe_layers);
  Generator init(softmoe_mnist::mix_seed(ctx.seed, static_cast<std::uint64_t>(p.seed), key, 1));
  Generator shuffle(softmoe_mnist::mix_seed(ctx.seed, static_cast<std::uint64_t>(p.seed), key, 2));
  const VitConfig config = sv::vit_config(s, data.train, p.experts, p.moe_layers);
  Vit model(config, init);
  model.to(ctx.device);
  sv::TrainOptions o;
  o.steps = s.integer("steps"), o.batch = s.integer("batch"), o.lr = s.real("lr");
  o.sampling = parse_sampling(s.text("sampling"));
  o.eval_every = s.integer("eval_every");
  o.label = p.name;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<sv::EvalRecord> records = sv::train_vit(model, data, o, shuffle, [&](const sv::EvalRecord& e) {
    curves.row({std::to_string(p.experts), std::to_string(p.moe_layers), std::to_string(p.seed), std::to_string(e.step),
                cell(e.epoch), cell(e.train_loss), cell(e.test_accuracy)});
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  save_checkpoint(ctx.dir.file(checkpoint_name(p)).string(), model, nullptr, o.steps, nullptr,
                  {{"experiment", "softmoe-vit"}, {"point", p.name}});
  std::int64_t expert_parameters = 0;
  for (SoftMoE* layer : model.moe_layers()) expert_parameters += layer->experts().num_parameters();
  const std::vector<std::string> row = {
      std::to_string(p.experts), std::to_string(p.moe_layers), std::to_string(p.seed),
      std::to_string(config.expert_width()), std::to_string(expert_parameters), std::to_string(model.num_parameters()),
      std::to_string(o.steps), cell(records.back().epoch), cell(records.back().test_accuracy), cell(seconds),
      checkpoint_name(p)};
  nlohmann::ordered_json j;
  j["point"] = p.name;
  for (std::size_t c = 0; c < row.size(); ++c) j["row"][kModelsHeader[c]] = row[c];
  write_point(ctx.dir, p.name, j);  // last: its presence marks the network trained
}

void report(const RunContext& ctx, const sv::ImageSplit& data, const std::vector<Point>& points) {
  std::string models = csv_line(kModelsHeader) + "\n", missing;
  std::vector<std::string> names;
  std::vector<sv::TrainedVit> chosen;
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
    auto integer = [&](const char* k) { return std::stoll(row.at(k).get<std::string>()); };
    auto real = [&](const char* k) { return std::stod(row.at(k).get<std::string>()); };
    sv::TrainedVit m;
    m.experts = integer("experts"), m.moe_layers = integer("moe_layers"), m.seed = integer("seed");
    m.expert_hidden = integer("expert_hidden"), m.expert_parameters = integer("expert_parameters");
    m.total_parameters = integer("total_parameters"), m.steps = integer("steps"), m.epochs = real("epochs");
    m.test_accuracy = real("test_accuracy"), m.seconds = real("seconds");
    m.checkpoint = ctx.dir.file(checkpoint_name(p)).string();  // this folder's, wherever it was made
    chosen.push_back(m);
  }
  ctx.dir.write_text("models.csv", models);
  ctx.dir.write_text("train.csv", gather_curves(ctx.dir, names));
  if (chosen.empty())
    throw Error("softmoe-vit: no trained network in " + ctx.dir.path().string() +
                " (run with mode=all, or the points of mode=list, first)");
  if (!missing.empty())
    std::printf("not trained yet, left out of the evaluation: %s (run them, then --set mode=report)\n", missing.c_str());
  sv::evaluate_and_report(ctx, data, chosen);
}

int run_softmoe_vit(const RunContext& ctx) {
  validate_softmoe_vit(ctx.settings);
  const std::vector<Point> points = grid_of(ctx.settings);
  for (const Point& p : points) redo_point_without(ctx.dir, p.name, checkpoint_name(p));  // trains again
  std::optional<sv::ImageSplit> data;
  auto loaded = [&]() -> const sv::ImageSplit& {
    if (!data) {
      data = load_data(ctx.settings);
      std::printf("data: %s\n", data->source.c_str());
    }
    return *data;
  };
  JobGrid g = job_grid_for(softmoe_vit_experiment());
  for (const Point& p : points) g.points.push_back(p.name);
  g.run_point = [&](std::size_t i) { train_point(ctx, loaded(), points[i]); };
  g.report = [&] { report(ctx, loaded(), points); };
  return run_job_grid(ctx, g);
}

}  // namespace

Experiment softmoe_vit_experiment() {
  Experiment e;
  e.name = "softmoe-vit";
  e.summary = "Soft MoE in a vision transformer: Algorithm 1 against random expert subsets in every Soft MoE block";
  e.details =
      "The implicit-bias paper's Section 4.4 at CPU scale: a ViT (patch embedding, learned positions, pre-norm "
      "blocks, mean pooling or a class token) whose last L blocks carry a Soft MoE layer with n experts of hidden "
      "width floor(mlp_hidden / n), trained with Adam for each n, L and seed and saved; then, from the "
      "checkpoints, the test accuracy when every Soft MoE block keeps only k experts per image, chosen by "
      "Algorithm 1 (the k largest column sums of C) or at random (10 draws), the z-statistic of Tables 2 and "
      "11-13, and the forward time of L Soft MoE layers with k of n experts (Table 3). Networks of every n are "
      "trained for the same steps; the report prints each one's test accuracy, so how closely they match (the "
      "paper picks models of equal accuracy) is visible. Data: Fashion-MNIST from Debian's package (default), "
      "MNIST (scripts/get-mnist.sh), or CIFAR-10/100 from --set data_dir=DIR. Every network is an independent job: "
      "--set mode=list prints one command line per network to train (docs/jobs.md), mode=point trains one, "
      "mode=report evaluates the trained ones, mode=all (default) does both.";
  e.settings = softmoe_vit_settings;
  e.presets = softmoe_vit_presets();
  e.default_preset = "demo";
  e.validate = validate_softmoe_vit;
  e.check_inputs = check_softmoe_vit_inputs;
  e.run = run_softmoe_vit;
  e.claims = sv::softmoe_vit_claims;
  return e;
}

}  // namespace moelab
