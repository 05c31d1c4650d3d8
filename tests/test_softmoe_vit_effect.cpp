// tests/test_softmoe_vit_effect.cpp — the implicit-bias paper's Section 4.4 effect at toy size: in
// a trained Soft MoE ViT, Algorithm 1 keeping k of n experts in every Soft MoE block (the k largest
// column sums of C per image and block) is far more accurate than k random experts per image.
//
// Data: Fashion-MNIST from Debian's dataset-fashion-mnist (scripts/setup.sh installs it), or the
// folder MOELAB_FASHION_MNIST names. Setting: the demo preset's ViT (d 64, 4 blocks, the last 2
// Soft MoE, no residual around them) with n = 8, 300 Adam steps of 64 on the first 6,000 training
// images, the first 1,000 test images, 5 random draws (about 7 s a network on one core).
// Measured with `moelab softmoe-vit --preset demo --threads 1 --set experts=8 --set seeds=0,1,2,3
// --set steps=300 --set train_limit=6000 --set test_limit=1000 --set random_seeds=5` (the same
// networks as here): all experts 74.8-77.5%; k = 1: Algorithm 1 50.2-57.4% against random
// 33.0-38.1% (z 6.5-47.1); k = 2: 60.6-70.7% against 51.1-55.2% (z 6.1-22.9); k = 4: 71.4-75.0%
// against 69.5-70.9% (z 0.7-4.6, not asserted). Seeds 0 and 1 are asserted with margins below the
// weakest of the four seeds: k = 1 at least 6 points and 3 stds above random, k = 2 at least 2.5
// points and 3 stds.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include "core/parallel.h"
#include "runner/report.h"
#include "tasks/softmoe_mnist/mnist_model.h"
#include "tasks/softmoe_vit/softmoe_vit_experiment.h"
#include "tasks/softmoe_vit/softmoe_vit_report.h"
#include "tasks/softmoe_vit/vit_classifier.h"

using namespace moelab;
using namespace moelab::softmoe_vit;

TEST_CASE("Algorithm 1 in a toy Soft MoE ViT on Fashion-MNIST beats random k-subsets by many stds") {
  set_num_threads(1);
  const char* env = std::getenv("MOELAB_FASHION_MNIST");
  const std::string dir = env ? env : "/usr/share/datasets/fashion-mnist";
  REQUIRE_MESSAGE(std::filesystem::exists(dir), "Fashion-MNIST is missing from " << dir
                                                     << ": apt-get install dataset-fashion-mnist (scripts/setup.sh "
                                                        "does), or name another folder in MOELAB_FASHION_MNIST");
  const ImageSplit data = load_images("fashion-mnist", dir, 6000, 1000);
  const Experiment e = softmoe_vit_experiment();
  Settings s = e.settings();
  for (const Preset& p : e.presets)
    if (p.name == "demo") s.apply(p);
  for (std::uint64_t seed : {0, 1}) {
    INFO("seed ", seed);
    // The same initialisation and shuffling seeds as the command's point n8-L2-seed<seed>.
    const std::uint64_t key = 8 * 100 + 2;
    Generator init(softmoe_mnist::mix_seed(0, seed, key, 1)), shuffle(softmoe_mnist::mix_seed(0, seed, key, 2));
    Vit model(vit_config(s, data.train, 8, 2), init);
    TrainOptions o;
    o.steps = 300, o.batch = 64;
    train_vit(model, data, o, shuffle);
    for (std::int64_t k : {1, 2}) {
      INFO("k = ", k);
      const ExpertSubset top = ExpertSubset::top_k(k);
      const double algorithm1 = accuracy(model, data.test, &top);
      std::vector<double> random;
      for (std::uint64_t r = 0; r < 5; ++r) {
        Generator gen(softmoe_mnist::mix_seed(seed, 8, static_cast<std::uint64_t>(k), 1000 + r));
        const ExpertSubset draw = ExpertSubset::random(k, gen);
        random.push_back(accuracy(model, data.test, &draw));
      }
      const MeanStd rnd = mean_std(random, StdKind::Population);
      MESSAGE("Algorithm 1 ", algorithm1, ", random ", rnd.mean, " +- ", rnd.std);
      CHECK(algorithm1 - rnd.mean >= (k == 1 ? 0.06 : 0.025));
      CHECK((algorithm1 - rnd.mean) / rnd.std >= 3.0);
    }
  }
}
