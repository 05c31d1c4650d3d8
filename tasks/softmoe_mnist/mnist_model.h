// tasks/softmoe_mnist/mnist_model.h — the implicit-bias paper's MNIST network: images cut into
// four 14x14 patches, one Soft MoE layer, a linear head; its training loop and its accuracy.
//
// The setup (Chung et al., "Beyond Parameter Count: Implicit Bias in Soft Mixture of Experts",
// 2024: Section 4.2 and Appendix E.1, with the
// details of the authors' released code):
//
//   image 28x28 bytes --(/255 - 0.1307) / 0.3081--> the four quadrants, each row-major
//   X [B, 4, 196]          token 0 = rows 0-13 x cols 0-13 (top left), 1 = top right,
//                          2 = bottom left, 3 = bottom right; inside a token, patch row r col c is
//                          value r * 14 + c
//   Y = SoftMoE(X)  [B, 4, 196]   n experts, one slot each; phi [196, n] uniform in [-1, 1];
//                          x and phi l2-normalised with a learnable scale (init 1), the slots
//                          mixing the normalised tokens (slot_inputs normalized: the released
//                          code's normalize_moe_input=True; raw: the original Soft MoE's layer,
//                          see nn/moe/soft_moe.h); experts are
//                          bias-free ReLU MLPs 196 -> floor(784 / n) -> 196 (all n together hold
//                          2 * 196 * 784 = 307,328 parameters whatever n is)
//   logits = head(flatten(Y))  [B, 10]   a bias-free Linear 784 -> 10
//   loss = cross-entropy; Adam, lr 1e-3, batch 256, the training images reshuffled every epoch
//                          (tasks/common/epoch_sampler.h; sampling=replacement draws them with
//                          replacement instead)
//
// The head has no bias and is linear, so the logits are a sum over experts: with c_e the logits of
// the network in which only expert e is kept (every other expert's slot output zeroed, C and D
// not renormalised), logits(subset S) = sum_{e in S} c_e. tasks/softmoe_mnist/subset_eval.h uses
// that to search every k-subset cheaply.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/random.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/moe/soft_moe.h"
#include "tasks/common/epoch_sampler.h"
#include "tasks/softmoe_mnist/idx.h"

namespace moelab::softmoe_mnist {

constexpr std::int64_t kTokens = 4;        // m: four 14x14 patches
constexpr std::int64_t kTokenWidth = 196;  // d = 14 * 14
constexpr std::int64_t kPixels = 784;      // 28 * 28
constexpr double kPixelMean = 0.1307, kPixelStd = 0.3081;  // MNIST's, as the released code uses

// The images `indices` of `data` (28x28 each, else moelab::Error) -> float32 [B, 4, 196],
// normalised and cut into quadrants as above.
Tensor patch_images(const ImageDataset& data, const std::vector<std::int64_t>& indices);
// Their labels -> int32 [B].
Tensor image_labels(const ImageDataset& data, const std::vector<std::int64_t>& indices);
// 0, 1, ..., n-1 from `start`, at most `count` of them (for batches in order).
std::vector<std::int64_t> index_range(std::int64_t start, std::int64_t count, std::int64_t n);

// A seed for one purpose of one network: splitmix64 over (run seed, training seed, n, purpose),
// so every network's initialisation and shuffling are independent of the others and of the order
// in which the suite is trained.
std::uint64_t mix_seed(std::uint64_t run_seed, std::uint64_t seed, std::uint64_t experts, std::uint64_t purpose);

// floor(784 / n): the experts' hidden width for n experts (>= 1 for n <= 784).
std::int64_t expert_hidden(std::int64_t experts);

class SoftMoEClassifier : public Module {
 public:
  // Draws phi, the experts, then the head from gen. experts in [1, 784].
  SoftMoEClassifier(std::int64_t experts, Generator& gen, SlotInputs slot_inputs = SlotInputs::Normalized);

  // tokens: [B, 4, 196] -> logits [B, 10]; with a subset only its experts are computed.
  Variable forward(const Variable& tokens);
  Variable forward(const Variable& tokens, const ExpertSubset& subset);

  std::int64_t experts() const { return moe_->config().experts; }
  SoftMoE& moe() const { return *moe_; }
  Linear& head() const { return *head_; }

 private:
  Variable classify(const Variable& mixed) const;  // [B, 4, 196] -> [B, 10]
  std::shared_ptr<SoftMoE> moe_;
  std::shared_ptr<Linear> head_;
};

struct TrainOptions {
  std::int64_t steps = 3525;       // optimizer steps (15 epochs of 60,000 images at batch 256)
  std::int64_t batch = 256;
  Sampling sampling = Sampling::Epochs;  // which images each step takes (tasks/common/epoch_sampler.h)
  double lr = 1e-3;                // Adam, PyTorch's default betas and eps, no weight decay
  std::int64_t eval_every = 0;     // test accuracy every this many steps (0: only at the end)
  std::string label;               // progress line label; empty: no progress output
};

struct EvalRecord {
  std::int64_t step = 0;
  double epoch = 0;          // step * batch / train size
  double train_loss = 0;     // mean of the training losses since the previous record
  double test_accuracy = 0;  // in [0, 1]
};

struct TrainResult {
  std::vector<EvalRecord> evals;  // the last one is at the final step
  double seconds = 0;
};

// Trains `model` on `train` (by default reshuffled by `gen` at every epoch, the last batch of an
// epoch smaller, as PyTorch's DataLoader gives it: tasks/common/epoch_sampler.h), evaluates on `test`. `on_eval` (optional) sees
// each record as it is made. A NaN loss is an error naming the step.
TrainResult train_classifier(SoftMoEClassifier& model, const ImageDataset& train, const ImageDataset& test,
                             const TrainOptions& options, Generator& gen,
                             const std::function<void(const EvalRecord&)>& on_eval = {});

// The predicted class of each row of logits [B, 10] (the first maximum, like torch.argmax).
std::vector<int> predictions(const Tensor& logits);

// Test accuracy in [0, 1] with every expert (subset == nullptr) or with a subset, in batches.
// A Random subset draws from its generator image by image, in order.
double accuracy(SoftMoEClassifier& model, const ImageDataset& data, const ExpertSubset* subset = nullptr,
                std::int64_t batch = 1000);

}  // namespace moelab::softmoe_mnist
