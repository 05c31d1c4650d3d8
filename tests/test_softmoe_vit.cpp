// tests/test_softmoe_vit.cpp — `moelab softmoe-vit` (tasks/softmoe_vit/): the k values evaluated,
// the image batches (layout and per-dataset normalisation), the command end to end at toy size on
// IDX files the test writes (files, refusals, no retraining, mode=report), and the paper's effect
// at toy size on Fashion-MNIST: Algorithm 1 keeping k of n experts in every Soft MoE block beats
// random k-subsets by many random-draw standard deviations.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/parallel.h"
#include "runner/report.h"
#include "tasks/softmoe_mnist/idx.h"
#include "tasks/softmoe_mnist/mnist_model.h"
#include "tasks/softmoe_vit/softmoe_vit_experiment.h"
#include "tasks/softmoe_vit/softmoe_vit_report.h"
#include "tasks/softmoe_vit/vit_classifier.h"
#include "temp_dir.h"

using namespace moelab;
using namespace moelab::softmoe_vit;

namespace {

ImageDataset random_images(std::int64_t n, std::int64_t channels, std::uint64_t seed, const std::string& name) {
  Generator gen(seed);
  ImageDataset d;
  d.name = name, d.rows = 28, d.cols = 28, d.channels = channels;
  for (std::int64_t i = 0; i < n * d.pixels(); ++i) d.images.push_back(static_cast<std::uint8_t>(gen.next_below(256)));
  for (std::int64_t i = 0; i < n; ++i) d.labels.push_back(static_cast<std::uint8_t>(gen.next_below(10)));
  return d;
}

}  // namespace

TEST_CASE("the evaluated k: 1, 2, n/4 and n/2 where 1 <= k < n") {
  CHECK(subset_sizes(1).empty());
  CHECK(subset_sizes(2) == std::vector<std::int64_t>{1});
  CHECK(subset_sizes(4) == std::vector<std::int64_t>{1, 2});
  CHECK(subset_sizes(8) == std::vector<std::int64_t>{1, 2, 4});
  CHECK(subset_sizes(16) == std::vector<std::int64_t>{1, 2, 4, 8});
  CHECK(subset_sizes(32) == std::vector<std::int64_t>{1, 2, 8, 16});
}

TEST_CASE("image batches: [B, C, H, W], channel planes kept, each dataset's mean and std") {
  const ImageDataset gray = random_images(3, 1, 1, "fashion-mnist test");
  const std::vector<float> g = image_batch(gray, {2, 0}).to_vector<float>();
  REQUIRE(g.size() == 2u * 784);
  CHECK(g[5] == doctest::Approx((gray.images[2 * 784 + 5] / 255.0 - 0.2860) / 0.3530).epsilon(1e-6));
  CHECK(g[784 + 7] == doctest::Approx((gray.images[7] / 255.0 - 0.2860) / 0.3530).epsilon(1e-6));
  const ImageDataset color = random_images(2, 3, 2, "cifar10 train");
  const Tensor c = image_batch(color, {1});
  CHECK(c.shape() == Shape{1, 3, 28, 28});
  const std::vector<float> cv = c.to_vector<float>();
  // pixel 10 of the green plane of image 1, with CIFAR-10's green mean and std
  CHECK(cv[784 + 10] == doctest::Approx((color.images[3 * 784 + 784 + 10] / 255.0 - 0.4822) / 0.2435).epsilon(1e-6));
  CHECK(label_batch(color, {1, 0}).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{color.labels[1], color.labels[0]});
}

TEST_CASE("moelab softmoe-vit end to end at toy size: files, refusals, no retraining, mode=report") {
  set_num_threads(1);
  testing::TempDir tmp;
  const ImageDataset train = random_images(64, 1, 1, "random"), test = random_images(30, 1, 2, "random");
  auto write_set = [&](const ImageDataset& d, const std::string& images, const std::string& labels) {
    write_idx(tmp.file(images), IdxArray{{d.size(), 28, 28}, d.images}, false);
    write_idx(tmp.file(labels), IdxArray{{d.size()}, d.labels}, false);
  };
  write_set(train, "train-images-idx3-ubyte", "train-labels-idx1-ubyte");
  write_set(test, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte");

  const Experiment e = softmoe_vit_experiment();
  auto settings = [&](std::vector<std::string> extra) {
    Settings s = e.settings();
    for (const std::string& kv :
         {"data_dir=" + tmp.path().string(), std::string("experts=4,8"), std::string("seeds=0,1"),
          std::string("steps=4"), std::string("batch=16"), std::string("eval_every=2"), std::string("dim=16"),
          std::string("heads=2"), std::string("depth=2"), std::string("mlp_hidden=32"), std::string("moe_layers=1"),
          std::string("random_seeds=3"), std::string("timing_experts=4"), std::string("timing_hidden=8"),
          std::string("timing_trials=2"), std::string("timing_batches=1,3")})
      s.set_assignment(kv);
    for (const std::string& kv : extra) s.set_assignment(kv);
    return s;
  };
  CHECK_THROWS_WITH_AS(e.validate(settings({"moe_layers=3"})), doctest::Contains("do not fit in depth 2"), UsageError);
  CHECK_THROWS_WITH_AS(e.validate(settings({"experts=64"})), doctest::Contains("raise mlp_hidden"), UsageError);
  CHECK_THROWS_WITH_AS(e.validate(settings({"heads=3"})), doctest::Contains("does not divide dim"), UsageError);
  CHECK_THROWS_WITH_AS(e.validate(settings({"timing_experts=6"})), doctest::Contains("multiple of 4"), UsageError);
  CHECK_NOTHROW(e.check_inputs(settings({})));
  CHECK_THROWS_WITH_AS(e.check_inputs(settings({"dataset=cifar10", "data_dir=auto"})),
                       doctest::Contains("no default folder and no download"), UsageError);
  CHECK_THROWS_WITH_AS(e.check_inputs(settings({"data_dir=" + tmp.file("t10k-images-idx3-ubyte")})),
                       doctest::Contains("is not a folder"), UsageError);
  testing::TempDir empty;
  CHECK_THROWS_AS(e.check_inputs(settings({"data_dir=" + empty.path().string()})), Error);

  const RunDir dir(tmp.path() / "run");
  const Settings s = settings({});
  REQUIRE(e.run(RunContext{s, dir, "toy", 0, 1, Device::cpu()}) == 0);
  for (const char* f : {"models.csv", "train.csv", "subsets.csv", "timing.csv", "summary.md",
                        "checkpoints/n4-L1-seed0.safetensors", "checkpoints/n8-L1-seed1.safetensors"})
    CHECK_MESSAGE(std::filesystem::exists(dir.file(f)), f);
  REQUIRE(read_csv(dir.file("models.csv")).size() == 4);
  CHECK(read_csv(dir.file("train.csv")).size() == 8);                 // steps 2 and 4, four networks
  CHECK(read_csv(dir.file("subsets.csv")).size() == 2 * (2 + 3));     // n = 4: k = 1, 2; n = 8: 1, 2, 4
  CHECK(read_csv(dir.file("timing.csv")).size() == 2 * 4);            // batches 1, 3 x k = 4, 3, 2, 1
  for (const auto& row : read_csv(dir.file("subsets.csv"))) {
    CHECK(std::stoll(row.at("random_draws")) == 3);
    const double z = std::stod(row.at("stds_above_random"));
    const double want = (std::stod(row.at("algorithm1_accuracy")) - std::stod(row.at("random_mean"))) /
                        std::stod(row.at("random_std"));
    if (std::isfinite(want)) CHECK(z == doctest::Approx(want).epsilon(1e-6));
  }
  {
    std::ifstream in(dir.file("summary.md"));
    const std::string summary((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const char* part : {"## Claims", "| Fig. 2-3: ", "| Tables 2, 11-13: ", "| Fig. 2 (n): ", "| Table 3: ",
                             "Matching: ", "## Networks"})
      CHECK_MESSAGE(summary.find(part) != std::string::npos, part);
  }
  // A second run trains nothing; mode=report with seeds not trained leaves them out.
  const auto stamp = std::filesystem::last_write_time(dir.file("checkpoints/n4-L1-seed0.safetensors"));
  REQUIRE(e.run(RunContext{s, dir, "toy", 0, 1, Device::cpu()}) == 0);
  CHECK(std::filesystem::last_write_time(dir.file("checkpoints/n4-L1-seed0.safetensors")) == stamp);
  REQUIRE(e.run(RunContext{settings({"mode=report", "seeds=0,1,2"}), dir, "toy", 0, 1, Device::cpu()}) == 0);
  CHECK(read_csv(dir.file("models.csv")).size() == 4);
  const RunDir fresh(tmp.path() / "fresh");
  CHECK_THROWS_AS(e.run(RunContext{settings({"mode=report"}), fresh, "toy", 0, 1, Device::cpu()}), Error);
}
