// tasks/softmoe_mnist/subset_eval.cpp — per-expert logits and the exhaustive k-subset search
// (see the header for why the logits of a subset are a sum over its experts).
#include "tasks/softmoe_mnist/subset_eval.h"

#include <limits>
#include <set>

#include "autograd/no_grad.h"
#include "core/error.h"
#include "core/factories.h"

namespace moelab::softmoe_mnist {

namespace {

// First maximum of a 10-vector, like torch.argmax and predictions().
int first_argmax(const double* v) {
  int best = 0;
  for (int c = 1; c < kImageClasses; ++c)
    if (v[c] > v[best]) best = c;
  return best;
}

}  // namespace

ExpertLogits expert_logits(SoftMoEClassifier& model, const ImageDataset& data, std::int64_t batch) {
  NoGradGuard no_grad;
  model.eval();
  const std::int64_t n = model.experts();
  ExpertLogits out;
  out.images = data.size(), out.experts = n;
  out.values.assign(static_cast<std::size_t>(data.size() * n * kImageClasses), 0.0);
  for (std::int64_t i = 0; i < data.size(); ++i) out.labels.push_back(data.labels[static_cast<std::size_t>(i)]);
  for (std::int64_t start = 0; start < data.size(); start += batch) {
    const std::vector<std::int64_t> idx = index_range(start, batch, data.size());
    const Variable x(patch_images(data, idx).to(model.device()));
    for (std::int64_t e = 0; e < n; ++e) {
      std::vector<std::int32_t> only(static_cast<std::size_t>(n), 0);
      only[static_cast<std::size_t>(e)] = 1;
      const Tensor logits =
          model.forward(x, ExpertSubset::from_mask(from_vector(only, {n}))).data().to(Device::cpu()).to(DType::Float32);
      const float* p = logits.data<float>();
      for (std::size_t i = 0; i < idx.size(); ++i)
        for (int c = 0; c < kImageClasses; ++c)
          out.values[static_cast<std::size_t>((idx[i] * n + e) * kImageClasses + c)] = p[i * kImageClasses + c];
    }
  }
  model.train();
  return out;
}

std::int64_t binomial(std::int64_t n, std::int64_t k) {
  if (k < 0 || k > n) return 0;
  k = std::min(k, n - k);
  std::int64_t r = 1;
  for (std::int64_t i = 1; i <= k; ++i) {
    // r * (n - k + i) / i stays an integer at every step; guard the multiplication.
    const std::int64_t f = n - k + i;
    if (r > std::numeric_limits<std::int64_t>::max() / f) return std::numeric_limits<std::int64_t>::max();
    r = r * f / i;
  }
  return r;
}

BestSubsetResult best_subset_accuracy(const ExpertLogits& logits, std::int64_t k) {
  const std::int64_t n = logits.experts;
  if (n < 1 || n > 64 || k < 1 || k > n)
    throw Error("softmoe_mnist::best_subset_accuracy: need 1 <= k <= experts <= 64, got k = " + std::to_string(k) +
                ", experts = " + std::to_string(n));
  BestSubsetResult r;
  std::int64_t solved = 0;
  std::set<std::uint64_t> used;
  std::vector<std::int64_t> pick(static_cast<std::size_t>(k));
  for (std::int64_t i = 0; i < logits.images; ++i) {
    for (std::int64_t j = 0; j < k; ++j) pick[static_cast<std::size_t>(j)] = j;  // first subset {0..k-1}
    while (true) {
      double sum[kImageClasses] = {};
      for (std::int64_t e : pick) {
        const double* c = logits.at(i, e);
        for (int cls = 0; cls < kImageClasses; ++cls) sum[cls] += c[cls];
      }
      if (first_argmax(sum) == logits.labels[static_cast<std::size_t>(i)]) {
        ++solved;
        std::uint64_t mask = 0;
        for (std::int64_t e : pick) mask |= std::uint64_t{1} << e;
        used.insert(mask);
        break;
      }
      // The next subset in lexicographic order: bump the last index that can still move.
      std::int64_t j = k - 1;
      while (j >= 0 && pick[static_cast<std::size_t>(j)] == n - k + j) --j;
      if (j < 0) break;  // every subset tried
      ++pick[static_cast<std::size_t>(j)];
      for (std::int64_t t = j + 1; t < k; ++t) pick[static_cast<std::size_t>(t)] = pick[static_cast<std::size_t>(t - 1)] + 1;
    }
  }
  r.accuracy = logits.images ? static_cast<double>(solved) / static_cast<double>(logits.images) : 0.0;
  r.distinct_subsets = static_cast<std::int64_t>(used.size());
  return r;
}

double masked_accuracy(const ExpertLogits& logits, const std::vector<std::uint64_t>& masks) {
  if (static_cast<std::int64_t>(masks.size()) != logits.images || logits.experts > 64)
    throw Error("softmoe_mnist::masked_accuracy: need one mask per image and at most 64 experts");
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < logits.images; ++i) {
    double sum[kImageClasses] = {};
    for (std::int64_t e = 0; e < logits.experts; ++e)
      if (masks[static_cast<std::size_t>(i)] >> e & 1) {
        const double* c = logits.at(i, e);
        for (int cls = 0; cls < kImageClasses; ++cls) sum[cls] += c[cls];
      }
    correct += first_argmax(sum) == logits.labels[static_cast<std::size_t>(i)];
  }
  return logits.images ? static_cast<double>(correct) / static_cast<double>(logits.images) : 0.0;
}

}  // namespace moelab::softmoe_mnist
