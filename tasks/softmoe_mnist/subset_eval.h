// tasks/softmoe_mnist/subset_eval.h — accuracy when only k of the n experts are used: the best
// k-subset per image by exhaustive search (Table 1 of the implicit-bias paper, "Beyond Parameter
// Count: Implicit Bias in Soft Mixture of Experts", docs/REFERENCES.md), Algorithm 1's subset and
// random subsets (Figure 2, Tables 1 and 10).
//
// Why exhaustive search is cheap here. The classifier's head is linear without a bias, and the
// Soft MoE output is C Ys with C not renormalised when experts are dropped, so the logits of the
// network that keeps a subset S of experts are a sum of per-expert parts:
//   logits_S(x) = sum_{e in S} c_e(x),    c_e(x) = the logits when ONLY expert e is kept.
// expert_logits computes every c_e once (n forward passes, each with a one-expert mask, through
// the real SoftMoE subset path), after which a subset costs k additions of 10-vectors. An image
// counts as solved when some k-subset's logits have their first maximum at the label; the search
// stops at the first such subset (in lexicographic order of expert ids). The paper's "Best
// k-Subset Accuracy" is the share of solved test images (it uses the label, so it is an upper
// bound that no inference procedure can reach, and it shows that specialised subsets exist).
#pragma once

#include <cstdint>
#include <vector>

#include "tasks/softmoe_mnist/idx.h"
#include "tasks/softmoe_mnist/mnist_model.h"

namespace moelab::softmoe_mnist {

// c_e(x) for every image and expert: values[(i * experts + e) * 10 + class].
struct ExpertLogits {
  std::int64_t images = 0, experts = 0;
  std::vector<double> values;
  std::vector<int> labels;  // [images]
  const double* at(std::int64_t image, std::int64_t expert) const {
    return values.data() + (image * experts + expert) * kImageClasses;
  }
};
ExpertLogits expert_logits(SoftMoEClassifier& model, const ImageDataset& data, std::int64_t batch = 500);

// n choose k (saturates at INT64_MAX); 0 when k > n.
std::int64_t binomial(std::int64_t n, std::int64_t k);

struct BestSubsetResult {
  double accuracy = 0;               // share of images some k-subset classifies correctly
  std::int64_t distinct_subsets = 0; // distinct first-found subsets over the solved images (Figure 5)
};
// Exhaustive search over all k-subsets, 1 <= k <= experts <= 64.
BestSubsetResult best_subset_accuracy(const ExpertLogits& logits, std::int64_t k);

// Accuracy of given subsets: masks[i] is image i's set of experts as a bit mask (experts <= 64).
double masked_accuracy(const ExpertLogits& logits, const std::vector<std::uint64_t>& masks);

}  // namespace moelab::softmoe_mnist
