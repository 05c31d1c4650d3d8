// tasks/common/batch.cpp — see batch.h.
#include "tasks/common/batch.h"

#include <algorithm>

#include "core/error.h"
#include "core/factories.h"

namespace moelab {

TokenBatch make_lm_batch(const std::vector<std::vector<std::int32_t>>& sequences, std::int32_t pad,
                         const std::vector<std::vector<std::uint8_t>>* loss_masks) {
  MOELAB_CHECK(!sequences.empty(), "make_lm_batch", "needs at least one sequence");
  MOELAB_CHECK(!loss_masks || loss_masks->size() == sequences.size(), "make_lm_batch", "got ", sequences.size(),
               " sequences but ", loss_masks ? loss_masks->size() : 0, " loss masks");
  std::size_t longest = 0;
  for (std::size_t b = 0; b < sequences.size(); ++b) {
    MOELAB_CHECK(sequences[b].size() >= 2, "make_lm_batch", "sequence ", b, " has ", sequences[b].size(),
                 " tokens; a next-token batch needs at least 2");
    MOELAB_CHECK(!loss_masks || (*loss_masks)[b].size() == sequences[b].size(), "make_lm_batch", "loss mask ", b,
                 " has ", loss_masks ? (*loss_masks)[b].size() : 0, " entries for a sequence of ", sequences[b].size());
    longest = std::max(longest, sequences[b].size());
  }
  const std::size_t B = sequences.size(), T = longest - 1;
  std::vector<std::int32_t> inputs(B * T, pad), targets(B * T, kIgnoreTarget);
  TokenBatch batch;
  for (std::size_t b = 0; b < B; ++b) {
    const std::vector<std::int32_t>& s = sequences[b];
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      inputs[b * T + i] = s[i];
      if (!loss_masks || (*loss_masks)[b][i + 1]) {
        targets[b * T + i] = s[i + 1];
        ++batch.counted_targets;
      }
    }
  }
  const auto rows = static_cast<std::int64_t>(B), cols = static_cast<std::int64_t>(T);
  batch.inputs = from_vector(inputs, {rows, cols});
  batch.targets = from_vector(targets, {rows, cols});
  return batch;
}

}  // namespace moelab
