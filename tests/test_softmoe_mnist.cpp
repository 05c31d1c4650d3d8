// tests/test_softmoe_mnist.cpp — the MNIST Soft MoE network and its subset evaluations
// (tasks/softmoe_mnist/): patching puts each 14x14 quadrant in its token, the classifier keeps the
// Algorithm 1 experts (the k largest column sums of C), the per-expert logits add up to the
// network's logits for any subset, the exhaustive search finds a subset at least as good as
// Algorithm 1's (and solves every image some subset solves), and `moelab softmoe-mnist` end to
// end at toy size on IDX files the test writes (reruns train nothing; mode=report evaluates again; an
// interrupted network is retrained with one curve).
// Nothing here reads data/mnist: the effect on real digits is in test_softmoe_mnist_effect.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>

#include "autograd/no_grad.h"
#include "core/factories.h"
#include "core/parallel.h"
#include "tasks/softmoe_mnist/mnist_model.h"
#include "tasks/softmoe_mnist/softmoe_mnist_experiment.h"
#include "tasks/softmoe_mnist/subset_eval.h"
#include "temp_dir.h"

using namespace moelab;
using namespace moelab::softmoe_mnist;

namespace {

// N images of 28x28 random pixels with random labels.
ImageDataset random_images(std::int64_t n, std::uint64_t seed) {
  Generator gen(seed);
  ImageDataset d;
  d.name = "random", d.rows = 28, d.cols = 28;
  for (std::int64_t i = 0; i < n * kPixels; ++i) d.images.push_back(static_cast<std::uint8_t>(gen.next_below(256)));
  for (std::int64_t i = 0; i < n; ++i) d.labels.push_back(static_cast<std::uint8_t>(gen.next_below(10)));
  return d;
}

std::vector<std::int64_t> all_indices(const ImageDataset& d) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(d.size()));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

TEST_CASE("patching: each 14x14 quadrant goes to its token, row-major inside, normalised by MNIST's mean and std") {
  ImageDataset d;
  d.name = "marked", d.rows = 28, d.cols = 28;
  // Pixel (r, c) = 8 * quadrant + (r % 14 + c % 14) % 8: the value names the quadrant it lies in.
  for (int r = 0; r < 28; ++r)
    for (int c = 0; c < 28; ++c) d.images.push_back(static_cast<std::uint8_t>(8 * ((r / 14) * 2 + c / 14) + (r % 14 + c % 14) % 8));
  d.labels = {3};
  const Tensor x = patch_images(d, {0});
  REQUIRE(x.shape() == Shape{1, 4, 196});
  const float* p = x.data<float>();
  for (int token = 0; token < 4; ++token)
    for (int pr = 0; pr < 14; ++pr)
      for (int pc = 0; pc < 14; ++pc) {
        const int raw = 8 * token + (pr + pc) % 8;
        const double expected = (raw / 255.0 - 0.1307) / 0.3081;
        CHECK(p[token * 196 + pr * 14 + pc] == doctest::Approx(expected).epsilon(1e-6));
      }
  CHECK(image_labels(d, {0}).data<std::int32_t>()[0] == 3);
  // The quadrant order: token 1 is the top right (rows 0-13, cols 14-27).
  d.images.assign(784, 0);
  d.images[5 * 28 + 20] = 255;  // row 5, col 20: top right, patch position (5, 6)
  const Tensor y = patch_images(d, {0});
  CHECK(y.data<float>()[1 * 196 + 5 * 14 + 6] == doctest::Approx((1.0 - 0.1307) / 0.3081));
  CHECK(y.data<float>()[0] == doctest::Approx(-0.1307 / 0.3081));
  ImageDataset small;
  small.name = "small", small.rows = 14, small.cols = 14, small.images.assign(196, 0), small.labels = {0};
  CHECK_THROWS_AS(patch_images(small, {0}), Error);
}

TEST_CASE("the classifier: hidden width floor(784/n), expert parameters constant in n, bias-free head") {
  for (std::int64_t n : {2, 4, 8, 16, 64, 512}) {
    Generator gen(1);
    SoftMoEClassifier model(n, gen);
    CHECK(model.moe().experts().ffn() == 784 / n);
    CHECK(model.moe().config().slots_per_expert == 1);
    CHECK(model.moe().config().normalize);
    CHECK(model.moe().config().slot_inputs == SlotInputs::Normalized);  // the implicit-bias paper's layer
    CHECK(model.moe().phi().shape() == Shape{196, n});
    CHECK(!model.head().bias().defined());
    CHECK(model.head().weight().shape() == Shape{10, 784});
    if (784 % n == 0) CHECK(model.moe().experts().num_parameters() == 2 * 196 * 784);
  }
  Generator gen(1);
  CHECK(SoftMoEClassifier(4, gen, SlotInputs::Raw).moe().config().slot_inputs == SlotInputs::Raw);
  CHECK_THROWS_AS(expert_hidden(0), Error);
  CHECK_THROWS_AS(expert_hidden(785), Error);
  CHECK(binomial(16, 4) == 1820);
  CHECK(binomial(4, 1) == 4);
  CHECK(binomial(3, 5) == 0);
}

TEST_CASE("Algorithm 1 in the classifier keeps the k experts with the largest column sums of C") {
  set_num_threads(1);
  Generator gen(5);
  SoftMoEClassifier model(8, gen);
  const ImageDataset d = random_images(12, 9);
  NoGradGuard no_grad;
  const Variable x(patch_images(d, all_indices(d)));
  const Tensor combine = model.moe().routing(x).combine.data();  // [12, 4, 8]
  for (std::int64_t k : {1, 2, 4, 7}) {
    model.forward(x, ExpertSubset::top_k(k));
    const Tensor mask = model.moe().last_mask();
    for (int b = 0; b < 12; ++b) {
      double sums[8] = {};
      for (int i = 0; i < 4; ++i)
        for (int e = 0; e < 8; ++e) sums[e] += combine.data<float>()[(b * 4 + i) * 8 + e];
      std::vector<int> order(8);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int c) { return sums[a] > sums[c]; });
      // The gap between the k-th and (k+1)-th sums is not a rounding tie.
      if (k < 8) REQUIRE(sums[order[k - 1]] - sums[order[k]] > 1e-6);
      for (int r = 0; r < 8; ++r) CHECK(mask.data<std::int32_t>()[b * 8 + order[r]] == (r < k ? 1 : 0));
    }
  }
}

TEST_CASE("per-expert logits add up to the network's logits; exhaustive search >= Algorithm 1") {
  set_num_threads(1);
  Generator gen(11);
  SoftMoEClassifier model(8, gen);
  const ImageDataset d = random_images(200, 4);
  const ExpertLogits parts = expert_logits(model, d, 64);
  REQUIRE(parts.images == 200);
  REQUIRE(parts.experts == 8);
  NoGradGuard no_grad;
  const Variable x(patch_images(d, all_indices(d)));
  // All experts: the sum of the parts is the full forward's logits.
  const Tensor full = model.forward(x).data();
  double worst = 0;
  for (int i = 0; i < 200; ++i)
    for (int c = 0; c < 10; ++c) {
      double sum = 0;
      for (int e = 0; e < 8; ++e) sum += parts.at(i, e)[c];
      worst = std::max(worst, std::abs(sum - full.data<float>()[i * 10 + c]));
    }
  CHECK(worst < 1e-4);
  for (std::int64_t k : {1, 2, 4}) {
    // Algorithm 1's accuracy through the layer equals the accuracy of its masks over the parts.
    const ExpertSubset top = ExpertSubset::top_k(k);
    const double layer_acc = accuracy(model, d, &top, 200);
    const Tensor mask = model.moe().last_mask();
    std::vector<std::uint64_t> masks(200, 0);
    for (int i = 0; i < 200; ++i)
      for (int e = 0; e < 8; ++e)
        if (mask.data<std::int32_t>()[i * 8 + e]) masks[static_cast<std::size_t>(i)] |= std::uint64_t{1} << e;
    CHECK(masked_accuracy(parts, masks) == doctest::Approx(layer_acc));
    const BestSubsetResult best = best_subset_accuracy(parts, k);
    CHECK(best.accuracy >= layer_acc);
    CHECK(best.distinct_subsets >= 1);
    CHECK(best.distinct_subsets <= binomial(8, k));
    // Every image that some single subset solves is counted: at least the best fixed subset's share.
    for (std::uint64_t fixed : {0x0Full >> (4 - std::min<std::int64_t>(k, 4)), 0xF0ull})
      if (std::popcount(fixed) == k)
        CHECK(best.accuracy >= masked_accuracy(parts, std::vector<std::uint64_t>(200, fixed)));
  }
  // With k = n every image is judged on the full network.
  CHECK(best_subset_accuracy(parts, 8).accuracy == doctest::Approx(accuracy(model, d, nullptr, 200)));
  CHECK_THROWS_AS(best_subset_accuracy(parts, 0), Error);
  CHECK_THROWS_AS(best_subset_accuracy(parts, 9), Error);
}

TEST_CASE("best_subset_accuracy on hand-made parts: a subset counts only when its summed logits pick the label") {
  ExpertLogits parts;
  parts.images = 2, parts.experts = 4;
  parts.values.assign(2 * 4 * 10, 0.0);
  parts.labels = {7, 2};
  auto set = [&](int i, int e, int c, double v) { parts.values[static_cast<std::size_t>((i * 4 + e) * 10 + c)] = v; };
  // Image 0 (label 7): experts 0 and 2 push class 0 hard; expert 1 alone prefers 0 (1.2 > 1.0),
  // expert 3 alone prefers 7 (1.0 > 0.7), and {1, 3} together prefer 7 (2.0 > 1.9).
  set(0, 0, 0, 5.0), set(0, 2, 0, 5.0);
  set(0, 1, 7, 1.0), set(0, 1, 0, 1.2);
  set(0, 3, 7, 1.0), set(0, 3, 0, 0.7);
  // Image 1 (label 2): every expert pushes class 5, so no subset reaches class 2.
  for (int e = 0; e < 4; ++e) set(1, e, 5, 1.0);
  const BestSubsetResult k1 = best_subset_accuracy(parts, 1), k2 = best_subset_accuracy(parts, 2);
  CHECK(k1.accuracy == doctest::Approx(0.5));
  CHECK(k1.distinct_subsets == 1);  // {3}
  CHECK(k2.accuracy == doctest::Approx(0.5));
  CHECK(k2.distinct_subsets == 1);  // {1, 3}
  CHECK(best_subset_accuracy(parts, 4).accuracy == doctest::Approx(0.0));  // all four: class 0 wins
  CHECK(masked_accuracy(parts, {0b1000, 0b1111}) == doctest::Approx(0.5));
  CHECK(masked_accuracy(parts, {0b1010, 0b0001}) == doctest::Approx(0.5));
  CHECK(masked_accuracy(parts, {0b0010, 0b0001}) == doctest::Approx(0.0));
  CHECK_THROWS_AS(masked_accuracy(parts, {0b1}), Error);
}

TEST_CASE("moelab softmoe-mnist end to end at toy size: files, no retraining, mode=report") {
  set_num_threads(1);
  testing::TempDir tmp;
  // A toy dataset on disk in the standard layout.
  const ImageDataset train = random_images(96, 1), test = random_images(40, 2);
  auto write_set = [&](const ImageDataset& d, const std::string& images, const std::string& labels) {
    write_idx(tmp.file(images), IdxArray{{d.size(), 28, 28}, d.images}, false);
    write_idx(tmp.file(labels), IdxArray{{d.size()}, d.labels}, true);
  };
  write_set(train, "train-images-idx3-ubyte", "train-labels-idx1-ubyte.gz");
  write_set(test, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte.gz");

  const Experiment e = softmoe_mnist_experiment();
  auto settings = [&](std::vector<std::string> extra) {
    Settings s = e.settings();
    for (const Preset& p : e.presets)
      if (p.name == "toy") s.apply(p);
    for (const std::string& kv : {"data_dir=" + tmp.path().string(), std::string("experts=4,8"),
                                  std::string("steps=6"), std::string("batch=32"), std::string("eval_every=3"),
                                  std::string("timing_trials=2"), std::string("timing_batches=1,5"),
                                  std::string("timing_wide_hidden=16")})
      s.set_assignment(kv);
    for (const std::string& kv : extra) s.set_assignment(kv);
    return s;
  };
  CHECK_THROWS_AS(e.validate(settings({"table1_experts=6"})), UsageError);   // not a multiple of 4
  CHECK_THROWS_AS(e.validate(settings({"table1_experts=16"})), UsageError);  // not trained
  CHECK_THROWS_AS(e.validate(settings({"timing_experts=2"})), UsageError);
  // The inputs are checked before anything is written: a named data_dir is the only place looked
  // in; a folder that is not there, or a file, is a usage error, never a quiet fall-back.
  CHECK_NOTHROW(e.check_inputs(settings({})));
  CHECK_THROWS_WITH_AS(e.check_inputs(settings({"data_dir=/nonexistent"})),
                       doctest::Contains("data_dir: the folder '/nonexistent' does not exist"), UsageError);
  CHECK_THROWS_WITH_AS(e.check_inputs(settings({"data_dir=" + tmp.file("t10k-images-idx3-ubyte")})),
                       doctest::Contains("is not a folder"), UsageError);
  testing::TempDir empty;
  CHECK_THROWS_WITH_AS(e.check_inputs(settings({"data_dir=" + empty.path().string()})),
                       doctest::Contains("no mnist data found"), Error);
  // cpu-full's guard: the standard files' 60,000 images, not a smaller set in their place.
  CHECK_NOTHROW(e.check_inputs(settings({"min_train_images=96"})));
  CHECK_THROWS_WITH_AS(e.check_inputs(settings({"min_train_images=97"})),
                       doctest::Contains("holds 96 training images, fewer than 97"), UsageError);

  const RunDir dir(tmp.path() / "run");
  const Settings s = settings({});
  REQUIRE(e.run(RunContext{s, dir, "toy", 0, 1, Device::cpu()}) == 0);
  for (const char* f : {"models.csv", "train.csv", "table1.csv", "subsets.csv", "timing.csv", "summary.md",
                        "checkpoints/n4-seed0.safetensors", "checkpoints/n8-seed0.safetensors"})
    CHECK_MESSAGE(std::filesystem::exists(dir.file(f)), f);
  REQUIRE(read_csv(dir.file("models.csv")).size() == 2);
  CHECK(read_csv(dir.file("train.csv")).size() == 4);             // steps 3 and 6, two networks
  CHECK(read_csv(dir.file("table1.csv")).size() == 2);            // n = 4 and 8
  CHECK(read_csv(dir.file("subsets.csv")).size() == 2 + 3);       // n = 4: n/2, n/4; n = 8: n/2, n/4, n/8
  CHECK(read_csv(dir.file("timing.csv")).size() == 2 * 4 + 2 * 4);  // trained n = 8 and the wide layer
  for (const auto& row : read_csv(dir.file("timing.csv")))
    CHECK(std::stoll(row.at("computed_slots")) == std::stoll(row.at("k")) * std::stoll(row.at("batch")));
  for (const auto& row : read_csv(dir.file("table1.csv")))
    CHECK(std::stod(row.at("best_subset_accuracy")) >= std::stod(row.at("algorithm1_accuracy")));
  {
    // The summary opens with the six claims, judged from the CSVs just written.
    std::ifstream in(dir.file("summary.md"));
    const std::string summary((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(summary.find("## Claims") != std::string::npos);
    for (const char* claim : {"| Table 1: expert specialization", "| Table 10: ", "| Table 3: "})
      CHECK_MESSAGE(summary.find(claim) != std::string::npos, claim);
  }

  // A second run trains nothing: models.csv and the checkpoints stay as they were.
  const auto stamp = std::filesystem::last_write_time(dir.file("checkpoints/n4-seed0.safetensors"));
  REQUIRE(e.run(RunContext{s, dir, "toy", 0, 1, Device::cpu()}) == 0);
  CHECK(read_csv(dir.file("models.csv")).size() == 2);
  CHECK(std::filesystem::last_write_time(dir.file("checkpoints/n4-seed0.safetensors")) == stamp);
  // mode=report evaluates the trained networks only (seed 1's are not trained: left out, not
  // trained), and with no trained network at all it is an error.
  REQUIRE(e.run(RunContext{settings({"mode=report", "seeds=0,1"}), dir, "toy", 0, 1, Device::cpu()}) == 0);
  CHECK(read_csv(dir.file("models.csv")).size() == 2);
  CHECK(!std::filesystem::exists(dir.file("checkpoints/n4-seed1.safetensors")));
  const RunDir fresh(tmp.path() / "fresh");
  CHECK_THROWS_AS(e.run(RunContext{settings({"mode=report"}), fresh, "toy", 0, 1, Device::cpu()}), Error);
  REQUIRE(e.run(RunContext{settings({"mode=report"}), dir, "toy", 0, 1, Device::cpu()}) == 0);

  // A network whose checkpoint is gone is trained again, and the derived models.csv and train.csv
  // are written whole from the points: one curve and one row per network, whatever was in them.
  std::filesystem::remove(dir.file("checkpoints/n4-seed0.safetensors"));
  {
    CsvFile curves(dir.file("train.csv"), {"experts", "seed", "step", "epoch", "train_loss", "test_accuracy"});
    curves.row({"4", "0", "3", "1", "99", "0"});  // a curve cut short by the interruption
  }
  REQUIRE(e.run(RunContext{s, dir, "toy", 0, 1, Device::cpu()}) == 0);
  CHECK(read_csv(dir.file("models.csv")).size() == 2);
  const auto curve = read_csv(dir.file("train.csv"));
  CHECK(curve.size() == 4);
  std::set<std::string> points;
  for (const auto& row : curve) {
    points.insert(row.at("experts") + "/" + row.at("seed") + "/" + row.at("step"));
    CHECK(row.at("train_loss") != "99");
  }
  CHECK(points.size() == curve.size());

  // A run folder can be moved or copied: everything it records is relative to itself. The moved
  // folder reports from its own checkpoints; a copy with a damaged checkpoint fails on the copy's
  // file (it never reads the original's), and models.csv names no absolute path.
  for (const auto& row : read_csv(dir.file("models.csv")))
    for (const auto& [key, value] : row) CHECK_MESSAGE(value.find(tmp.path().string()) == std::string::npos, key);
  const RunDir moved(tmp.path() / "moved"), copied(tmp.path() / "copied");
  std::filesystem::copy(dir.path(), copied.path(), std::filesystem::copy_options::recursive);
  std::filesystem::rename(dir.path(), moved.path());
  REQUIRE(e.run(RunContext{settings({"mode=report"}), moved, "toy", 0, 1, Device::cpu()}) == 0);
  CHECK(read_csv(moved.file("table1.csv")).size() == 2);
  std::filesystem::resize_file(copied.file("checkpoints/n4-seed0.safetensors"), 100);
  CHECK_THROWS_WITH_AS(e.run(RunContext{settings({"mode=report"}), copied, "toy", 0, 1, Device::cpu()}),
                       doctest::Contains("copied"), Error);
}
