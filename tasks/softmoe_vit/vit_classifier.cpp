// tasks/softmoe_vit/vit_classifier.cpp — data, training and accuracy of the Soft MoE ViT; see the header.
#include "tasks/softmoe_vit/vit_classifier.h"

#include <algorithm>
#include <array>

#include "autograd/no_grad.h"
#include "core/factories.h"
#include "nn/loss.h"
#include "nn/optim/adam.h"
#include "nn/progress.h"
#include "nn/train_loop.h"
#include "runner/report.h"
#include "tasks/softmoe_mnist/mnist_model.h"
#include "tasks/softmoe_vit/cifar.h"

namespace moelab::softmoe_vit {

namespace {

struct ChannelStats {
  std::array<float, 3> mean, std;
};

// The usual published per-channel statistics (of each training set, on the [0, 1] scale).
ChannelStats stats_of(const std::string& name) {
  if (name.rfind("cifar100", 0) == 0) return {{0.5071f, 0.4865f, 0.4409f}, {0.2673f, 0.2564f, 0.2762f}};
  if (name.rfind("cifar10", 0) == 0) return {{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};
  if (name.rfind("fashion-mnist", 0) == 0) return {{0.2860f, 0.2860f, 0.2860f}, {0.3530f, 0.3530f, 0.3530f}};
  return {{0.1307f, 0.1307f, 0.1307f}, {0.3081f, 0.3081f, 0.3081f}};  // MNIST's
}

bool cut(ImageDataset& d, std::int64_t limit) {
  if (limit <= 0 || limit >= d.size()) return false;
  d.labels.resize(static_cast<std::size_t>(limit));
  d.images.resize(static_cast<std::size_t>(limit * d.pixels()));
  return true;
}

}  // namespace

ImageSplit load_images(const std::string& dataset, const std::string& dir, std::int64_t train_limit,
                       std::int64_t test_limit) {
  ImageSplit split;
  if (dataset == "cifar10" || dataset == "cifar100") {
    if (dir.empty())
      throw Error("softmoe-vit: " + dataset + " has no default folder and no download: name the folder that holds "
                  "its binary files with --set data_dir=DIR");
    CifarSplit c = load_cifar(dataset, dir);
    split.train = std::move(c.train), split.test = std::move(c.test), split.source = c.source;
  } else {
    MnistSplit m = find_mnist(dataset, dir);
    split.train = std::move(m.train), split.test = std::move(m.test), split.source = m.source;
  }
  const bool cut_train = cut(split.train, train_limit), cut_test = cut(split.test, test_limit);
  if (cut_train || cut_test)
    split.source += " (used: the first " + std::to_string(split.train.size()) + " training and " +
                    std::to_string(split.test.size()) + " test images)";
  return split;
}

Tensor image_batch(const ImageDataset& data, const std::vector<std::int64_t>& indices) {
  const std::int64_t b = static_cast<std::int64_t>(indices.size()), c = data.channels, hw = data.rows * data.cols;
  MOELAB_CHECK(c >= 1 && c <= 3, "image_batch", data.name, " has ", c, " channels; 1 to 3 are supported");
  const ChannelStats st = stats_of(data.name);
  std::vector<float> out(static_cast<std::size_t>(b * c * hw));
  for (std::int64_t i = 0; i < b; ++i) {
    const std::int64_t n = indices[static_cast<std::size_t>(i)];
    MOELAB_CHECK(n >= 0 && n < data.size(), "image_batch", "image ", n, " of ", data.size());
    const std::uint8_t* src = data.images.data() + n * data.pixels();
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t p = 0; p < hw; ++p)
        out[static_cast<std::size_t>((i * c + ch) * hw + p)] =
            (static_cast<float>(src[ch * hw + p]) / 255.0f - st.mean[ch]) / st.std[ch];
  }
  return from_vector(out, {b, c, data.rows, data.cols});
}

Tensor label_batch(const ImageDataset& data, const std::vector<std::int64_t>& indices) {
  std::vector<std::int32_t> labels;
  for (std::int64_t n : indices) labels.push_back(data.labels.at(static_cast<std::size_t>(n)));
  return from_vector(labels, {static_cast<std::int64_t>(indices.size())});
}

double accuracy(Vit& model, const ImageDataset& data, const ExpertSubset* subset, std::int64_t batch) {
  NoGradGuard no_grad;
  model.eval();
  std::int64_t correct = 0;
  for (std::int64_t start = 0; start < data.size(); start += batch) {
    const std::vector<std::int64_t> idx = softmoe_mnist::index_range(start, batch, data.size());
    const Variable x(image_batch(data, idx).to(model.device()));
    const std::vector<int> pred =
        softmoe_mnist::predictions((subset ? model.forward(x, *subset) : model.forward(x)).data());
    for (std::size_t i = 0; i < idx.size(); ++i) correct += pred[i] == data.labels[static_cast<std::size_t>(idx[i])];
  }
  model.train();
  return data.size() ? static_cast<double>(correct) / static_cast<double>(data.size()) : 0.0;
}

std::vector<EvalRecord> train_vit(Vit& model, const ImageSplit& split, const TrainOptions& o, Generator& gen,
                                  const std::function<void(const EvalRecord&)>& on_eval) {
  if (o.steps < 1 || o.batch < 1 || split.train.size() < 1 || split.test.size() < 1)
    throw Error("softmoe_vit::train_vit: need steps >= 1, batch >= 1 and non-empty train and test sets");
  Adam opt(model.parameters(), AdamOptions{.lr = o.lr});
  EpochSampler sampler(split.train.size(), o.batch, o.sampling);
  std::vector<EvalRecord> records;
  double loss_sum = 0;
  std::int64_t losses = 0;
  LoopHooks hooks;
  hooks.batch_loss = [&](std::int64_t) {
    const std::vector<std::int64_t> idx = sampler.next(gen);
    const Device device = model.device();
    StepLoss s;
    s.loss = nn::cross_entropy(model.forward(Variable(image_batch(split.train, idx).to(device))),
                               label_batch(split.train, idx).to(device));
    s.items = static_cast<std::int64_t>(idx.size());
    return s;
  };
  hooks.on_step = [&](const LoopState&, double loss) { loss_sum += loss, ++losses; };
  hooks.evaluate = [&](const LoopState& state) {
    EvalRecord rec;
    rec.step = state.step;
    rec.epoch = static_cast<double>(state.step * o.batch) / static_cast<double>(split.train.size());
    rec.train_loss = loss_sum / static_cast<double>(std::max<std::int64_t>(losses, 1));
    rec.test_accuracy = accuracy(model, split.test);
    loss_sum = 0, losses = 0;
    records.push_back(rec);
    if (on_eval) on_eval(rec);
    return false;
  };
  hooks.summary = [&](const LoopState& state) {
    return "test accuracy " + format_number(100 * records.back().test_accuracy, "%.2f") + "% in " +
           clock_text(state.seconds);
  };
  train_loop(model, opt, LoopOptions{.steps = o.steps, .eval_every = o.eval_every, .label = o.label,
                                     .loss_name = "cross-entropy"},
             hooks);
  return records;
}

}  // namespace moelab::softmoe_vit
