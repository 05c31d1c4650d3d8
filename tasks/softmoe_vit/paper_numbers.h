// tasks/softmoe_vit/paper_numbers.h — the implicit-bias paper's z-statistics for its transformers,
// printed beside ours (never used to grade a size: its models are Astroformer-1 on CIFAR and
// ViT-B/16 on ImageNet, ours a small ViT).
//
// Table 11 (CIFAR-10, Astroformer-1 with Soft MoE in its 2 transformer blocks): the number of
// random-draw standard deviations by which Algorithm 1's test accuracy exceeds the mean of 10
// random k-subsets, for fixed k = 1..5 and n = 2..128 (a cell exists where k < n). Our copy of
// Tables 2, 12 (CIFAR-100, k = n/2, n/4, n/8) and 13 (ImageNet-1k) is too damaged to transcribe
// with confidence (column headings lost), so they are not included.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

namespace moelab::softmoe_vit {

// (n, k) -> z
inline const std::map<std::pair<std::int64_t, std::int64_t>, double>& paper_table11() {
  static const std::map<std::pair<std::int64_t, std::int64_t>, double> table = {
      {{2, 1}, 3.22},   {{4, 1}, 20.40},  {{8, 1}, 33.14},  {{16, 1}, 35.48}, {{32, 1}, 70.75}, {{64, 1}, 83.71},
      {{128, 1}, 234.04},
      {{4, 2}, 4.05},   {{8, 2}, 12.26},  {{16, 2}, 15.17}, {{32, 2}, 24.26}, {{64, 2}, 42.77}, {{128, 2}, 176.57},
      {{4, 3}, 0.53},   {{8, 3}, -3.47},  {{16, 3}, 7.81},  {{32, 3}, 12.28}, {{64, 3}, 21.53}, {{128, 3}, 88.96},
      {{8, 4}, 1.99},   {{16, 4}, 2.51},  {{32, 4}, 4.74},  {{64, 4}, 15.12}, {{128, 4}, 46.92},
      {{8, 5}, 1.73},   {{16, 5}, 0.95},  {{32, 5}, 3.88},  {{64, 5}, 7.25},  {{128, 5}, 25.90},
  };
  return table;
}

}  // namespace moelab::softmoe_vit
