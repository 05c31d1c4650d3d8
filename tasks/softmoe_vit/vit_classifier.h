// tasks/softmoe_vit/vit_classifier.h — the data, training and accuracy of `moelab softmoe-vit`:
// image classification with a Soft MoE vision transformer (nn/vit/vit.h) on MNIST, Fashion-MNIST,
// CIFAR-10 or CIFAR-100.
//
//   bytes [N, C*H*W] --(x/255 - mean_c) / std_c--> images [B, C, H, W] float32
//   logits = vit(images)  [B, classes];  loss = cross-entropy;  Adam, a fresh shuffle per epoch
// The per-channel means and stds are the datasets' usual published ones (MNIST 0.1307 / 0.3081,
// Fashion-MNIST 0.2860 / 0.3530, CIFAR-10 and CIFAR-100 per channel, below in the .cpp), fixed so
// that a network's inputs do not depend on which images a run used.
// accuracy() evaluates with every expert or with a subset kept in every Soft MoE block (Algorithm
// 1, or random subsets drawn image by image, block after block, from the subset's generator).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/random.h"
#include "nn/moe/soft_moe.h"
#include "nn/vit/vit.h"
#include "tasks/common/epoch_sampler.h"
#include "tasks/softmoe_mnist/idx.h"

namespace moelab::softmoe_vit {

struct ImageSplit {
  ImageDataset train, test;
  std::string source;  // where the files came from and how many images were used
};

// "mnist", "fashion-mnist" (IDX files: tasks/softmoe_mnist/idx.h find_mnist; dir "" searches the
// usual places), "cifar10" or "cifar100" (tasks/softmoe_vit/cifar.h; dir must be named). Each set
// cut to its first train_limit / test_limit images when those are > 0.
ImageSplit load_images(const std::string& dataset, const std::string& dir, std::int64_t train_limit,
                       std::int64_t test_limit);

// The images `indices` of `data`, normalised per channel -> float32 [B, C, H, W].
Tensor image_batch(const ImageDataset& data, const std::vector<std::int64_t>& indices);
// Their labels -> int32 [B].
Tensor label_batch(const ImageDataset& data, const std::vector<std::int64_t>& indices);

struct TrainOptions {
  std::int64_t steps = 1000, batch = 128;
  double lr = 1e-3;                // Adam, PyTorch's betas and eps, no weight decay
  Sampling sampling = Sampling::Epochs;
  std::int64_t eval_every = 0;     // test accuracy every N steps (0: at the end only)
  std::string label;               // the progress line's label; empty: none
};

struct EvalRecord {
  std::int64_t step = 0;
  double epoch = 0, train_loss = 0, test_accuracy = 0;
};

// Trains `model` on split.train, evaluating on split.test; returns the records (the last at the
// final step). A NaN loss is an error naming the step.
std::vector<EvalRecord> train_vit(Vit& model, const ImageSplit& split, const TrainOptions& options, Generator& gen,
                                  const std::function<void(const EvalRecord&)>& on_eval = {});

// Test accuracy in [0, 1], every expert (subset == nullptr) or `subset` in every Soft MoE block.
double accuracy(Vit& model, const ImageDataset& data, const ExpertSubset* subset = nullptr,
                std::int64_t batch = 500);

}  // namespace moelab::softmoe_vit
