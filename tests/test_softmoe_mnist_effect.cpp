// tests/test_softmoe_mnist_effect.cpp — the implicit-bias paper's (docs/REFERENCES.md) Table 1
// effect at toy size: after training, a Soft MoE classifier's experts are specialised, i.e. for
// most test images SOME subset of k = n/4 experts classifies the image correctly (found by
// exhaustive search using the label), far more often than a random subset of the same size does.
//
// Data: Fashion-MNIST from Debian's dataset-fashion-mnist (scripts/setup.sh installs it; the MNIST
// digits of data/mnist are not in a fresh clone), or from the folder MOELAB_FASHION_MNIST names.
// Setting: n = 4 experts, the first 6,000 training and 1,000 test images, 500 Adam steps of 128
// (about 5 s on one core).
// Measured with this setting (seeds 0-3 of mix_seed) and the implicit-bias paper's layer (the
// slots mix the normalised tokens): full network 77.3-80.9% test accuracy, best 1-subset
// 71.0-87.7%, random 1-subsets 42.8-50.2% (5 draws, std 0.6-1.4 points); seed 0, the one asserted,
// is the weakest (79.8 / 71.0 / 42.8). The assertions leave margins: best >= random + 0.20, best >=
// 0.65, full >= 0.70. (With the original Soft MoE's raw-token slots, slot_inputs = Raw, the same
// seeds gave 79.2-82.2 / 87.4-91.7 / 51.3-59.0%.)
// Algorithm 1 is not asserted: with the raw-token slots it fell BELOW random subsets on
// Fashion-MNIST, even with the paper's full training (docs/results/softmoe-fashion-cpu, recorded
// with that layer; bench/pytorch/softmoe_mnist_check.py agreed then), and beat them on the MNIST
// digits (docs/results/softmoe-mnist-cpu). Both are to be measured again with the paper's layer.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include "core/parallel.h"
#include "runner/report.h"
#include "tasks/softmoe_mnist/mnist_model.h"
#include "tasks/softmoe_mnist/subset_eval.h"

using namespace moelab;
using namespace moelab::softmoe_mnist;

TEST_CASE("Table 1 at toy size on Fashion-MNIST: the best k = n/4 subset per image beats random subsets by far") {
  set_num_threads(1);
  // MOELAB_FASHION_MNIST names another folder with the four files (scripts/device-kit.sh packs
  // them for a GPU machine, which has no Debian packages).
  const char* env = std::getenv("MOELAB_FASHION_MNIST");
  const std::string dir = env ? env : "/usr/share/datasets/fashion-mnist";
  REQUIRE_MESSAGE(std::filesystem::exists(dir), "Fashion-MNIST is missing from " << dir
                                                     << ": apt-get install dataset-fashion-mnist (scripts/setup.sh "
                                                        "installs it)");
  MnistSplit data = find_mnist("fashion-mnist", dir);
  data.train.labels.resize(6000), data.train.images.resize(6000 * 784);
  data.test.labels.resize(1000), data.test.images.resize(1000 * 784);

  const std::uint64_t seed = 0;
  Generator init(mix_seed(seed, 0, 4, 1)), shuffle(mix_seed(seed, 0, 4, 2));
  SoftMoEClassifier model(4, init);
  TrainOptions o;
  o.steps = 500, o.batch = 128, o.lr = 1e-3;
  const TrainResult r = train_classifier(model, data.train, data.test, o, shuffle);
  const double full = r.evals.back().test_accuracy;
  const double best = best_subset_accuracy(expert_logits(model, data.test), 1).accuracy;
  std::vector<double> random;
  for (std::uint64_t draw = 0; draw < 5; ++draw) {
    Generator gen(100 + draw);
    const ExpertSubset subset = ExpertSubset::random(1, gen);
    random.push_back(accuracy(model, data.test, &subset));
  }
  const MeanStd rnd = mean_std(random);
  MESSAGE("full " << full << ", best 1-subset " << best << ", random 1-subsets " << rnd.mean << " +- " << rnd.std);
  CHECK(full >= 0.70);
  CHECK(best >= 0.65);
  CHECK(best >= rnd.mean + 0.20);
}
