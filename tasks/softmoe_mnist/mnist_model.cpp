// tasks/softmoe_mnist/mnist_model.cpp — patches, the Soft MoE classifier, its training loop and
// accuracy (see the header for the setup).
#include "tasks/softmoe_mnist/mnist_model.h"

#include <array>
#include <chrono>
#include <cmath>

#include "autograd/no_grad.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/factories.h"
#include "nn/loss.h"
#include "nn/optim/adam.h"
#include "nn/progress.h"
#include "nn/train_loop.h"

namespace moelab::softmoe_mnist {

namespace {

void check_28x28(const ImageDataset& data) {
  if (data.rows != 28 || data.cols != 28)
    throw Error("softmoe_mnist: " + data.name + " has images of " + std::to_string(data.rows) + "x" +
                std::to_string(data.cols) + " pixels; the network cuts 28x28 images into four 14x14 patches");
}

}  // namespace

namespace {

// The normalised value of each of the 256 pixel bytes, (v / 255 - mean) / std computed in double
// and rounded to float once: a lookup per pixel instead of a division and a subtraction (the
// formula's cost was 8% of an n = 8 training step).
const std::array<float, 256>& pixel_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[static_cast<std::size_t>(v)] = static_cast<float>((v / 255.0 - kPixelMean) / kPixelStd);
    return t;
  }();
  return table;
}

}  // namespace

Tensor patch_images(const ImageDataset& data, const std::vector<std::int64_t>& indices) {
  check_28x28(data);
  const auto b = static_cast<std::int64_t>(indices.size());
  const std::array<float, 256>& value = pixel_values();
  std::vector<float> out(static_cast<std::size_t>(b * kPixels));
  for (std::int64_t i = 0; i < b; ++i) {
    const std::int64_t n = indices[static_cast<std::size_t>(i)];
    if (n < 0 || n >= data.size()) throw Error("softmoe_mnist::patch_images: image index out of range");
    const std::uint8_t* image = data.images.data() + n * kPixels;
    float* tokens = out.data() + i * kPixels;  // [4, 196]
    for (std::int64_t row = 0; row < 28; ++row) {
      // Row `row` of the image is row row % 14 of the two quadrants (row / 14) * 2 + {0, 1}.
      const std::uint8_t* pixels = image + row * 28;
      float* left = tokens + ((row / 14) * 2) * kTokenWidth + (row % 14) * 14;
      float* right = left + kTokenWidth;
      for (std::int64_t col = 0; col < 14; ++col) left[col] = value[pixels[col]];
      for (std::int64_t col = 0; col < 14; ++col) right[col] = value[pixels[14 + col]];
    }
  }
  return from_vector(out, {b, kTokens, kTokenWidth});
}

Tensor image_labels(const ImageDataset& data, const std::vector<std::int64_t>& indices) {
  std::vector<std::int32_t> labels;
  labels.reserve(indices.size());
  for (std::int64_t n : indices) labels.push_back(data.labels.at(static_cast<std::size_t>(n)));
  return from_vector(labels, {static_cast<std::int64_t>(indices.size())});
}

std::vector<std::int64_t> index_range(std::int64_t start, std::int64_t count, std::int64_t n) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = start; i < std::min(start + count, n); ++i) v.push_back(i);
  return v;
}

std::uint64_t mix_seed(std::uint64_t run_seed, std::uint64_t seed, std::uint64_t experts, std::uint64_t purpose) {
  std::uint64_t h = 0x9E3779B97F4A7C15ull;
  for (std::uint64_t v : {run_seed, seed, experts, purpose}) {
    h += v + 0x9E3779B97F4A7C15ull;  // splitmix64 step on the running value
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
  }
  return h;
}

std::int64_t expert_hidden(std::int64_t experts) {
  if (experts < 1 || experts > kPixels)
    throw Error("softmoe_mnist: experts must be in [1, 784] (hidden width floor(784 / n) >= 1), got " +
                std::to_string(experts));
  return kPixels / experts;
}

SoftMoEClassifier::SoftMoEClassifier(std::int64_t experts, Generator& gen, SlotInputs slot_inputs) {
  SoftMoEConfig c;
  c.d = kTokenWidth, c.experts = experts, c.slots_per_expert = 1, c.hidden = expert_hidden(experts);
  c.normalize = true, c.slot_inputs = slot_inputs, c.phi_init = PhiInit::Uniform, c.bias = false;
  moe_ = register_module("moe", std::make_shared<SoftMoE>(c, gen));
  head_ = register_module("head", std::make_shared<Linear>(kPixels, kImageClasses, gen, /*bias=*/false));
}

Variable SoftMoEClassifier::classify(const Variable& mixed) const {
  return head_->forward(reshape(mixed, {mixed.shape()[0], kPixels}));
}

Variable SoftMoEClassifier::forward(const Variable& tokens) { return classify(moe_->forward(tokens)); }

Variable SoftMoEClassifier::forward(const Variable& tokens, const ExpertSubset& subset) {
  return classify(moe_->forward(tokens, subset));
}

std::vector<int> predictions(const Tensor& logits) {
  const Tensor host = logits.to(Device::cpu()).to(DType::Float32);
  const std::int64_t b = host.shape()[0], classes = host.shape()[1];
  const float* p = host.data<float>();
  std::vector<int> out(static_cast<std::size_t>(b));
  for (std::int64_t i = 0; i < b; ++i) {
    int best = 0;
    for (int c = 1; c < classes; ++c)
      if (p[i * classes + c] > p[i * classes + best]) best = c;
    out[static_cast<std::size_t>(i)] = best;
  }
  return out;
}

double accuracy(SoftMoEClassifier& model, const ImageDataset& data, const ExpertSubset* subset, std::int64_t batch) {
  NoGradGuard no_grad;
  model.eval();
  std::int64_t correct = 0;
  for (std::int64_t start = 0; start < data.size(); start += batch) {
    const std::vector<std::int64_t> idx = index_range(start, batch, data.size());
    const Variable x(patch_images(data, idx).to(model.device()));  // the images go where the model is
    const std::vector<int> pred = predictions((subset ? model.forward(x, *subset) : model.forward(x)).data());
    for (std::size_t i = 0; i < idx.size(); ++i) correct += pred[i] == data.labels[static_cast<std::size_t>(idx[i])];
  }
  model.train();
  return data.size() ? static_cast<double>(correct) / static_cast<double>(data.size()) : 0.0;
}

TrainResult train_classifier(SoftMoEClassifier& model, const ImageDataset& train, const ImageDataset& test,
                             const TrainOptions& o, Generator& gen, const std::function<void(const EvalRecord&)>& on_eval) {
  if (o.steps < 1 || o.batch < 1 || train.size() < 1 || test.size() < 1)
    throw Error("softmoe_mnist::train_classifier: need steps >= 1, batch >= 1 and non-empty train and test sets");
  Adam opt(model.parameters(), AdamOptions{.lr = o.lr});
  const auto start = std::chrono::steady_clock::now();
  TrainResult r;
  EpochSampler sampler(train.size(), o.batch, o.sampling);
  double loss_sum = 0;
  std::int64_t losses = 0;
  LoopHooks hooks;
  hooks.batch_loss = [&](std::int64_t) {
    const std::vector<std::int64_t> idx = sampler.next(gen);
    const Device device = model.device();  // made on the host, the batch goes where the model is
    StepLoss s;
    s.loss = nn::cross_entropy(model.forward(Variable(patch_images(train, idx).to(device))),
                               image_labels(train, idx).to(device));
    s.items = o.batch;
    return s;
  };
  hooks.on_step = [&](const LoopState&, double loss) { loss_sum += loss, ++losses; };
  hooks.evaluate = [&](const LoopState& state) {
    EvalRecord rec;
    rec.step = state.step;
    rec.epoch = static_cast<double>(state.step) * static_cast<double>(o.batch) / static_cast<double>(train.size());
    rec.train_loss = loss_sum / static_cast<double>(losses);
    rec.test_accuracy = accuracy(model, test);
    loss_sum = 0, losses = 0;
    r.evals.push_back(rec);
    if (on_eval) on_eval(rec);
    return false;
  };
  hooks.summary = [&](const LoopState& state) {
    return "test accuracy " + std::to_string(r.evals.back().test_accuracy * 100).substr(0, 5) + "% in " +
           clock_text(state.seconds);
  };
  train_loop(model, opt,
             LoopOptions{.steps = o.steps, .eval_every = o.eval_every, .label = o.label,
                         .loss_name = "cross-entropy (n = " + std::to_string(model.experts()) + ")"},
             hooks);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace moelab::softmoe_mnist
