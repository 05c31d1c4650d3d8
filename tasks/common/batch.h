// tasks/common/batch.h — turning token sequences into a next-token-prediction batch.
//
// A decoder learns from a sequence s_0 s_1 ... s_{L-1} by predicting s_{i+1} from s_0 .. s_i at
// every position i at once: the inputs are the sequence without its last token, the targets the
// sequence without its first, both [B, L-1]. A loss mask says which targets count: the
// phone-book trains on every token (no mask), shortest path only on the answer (the path and its
// EOS); targets that do not count are set to kIgnoreTarget, which nn::cross_entropy skips.
//
// Sequences of different lengths are padded at the end with a pad token up to the longest one
// (inputs = pad, targets = ignored). Causal attention means a real position never sees the padding
// that follows it, so padding changes no real prediction.
//
//   std::vector<std::vector<std::int32_t>> seqs = ...;          // B sequences
//   TokenBatch b = make_lm_batch(seqs, /*pad=*/PAD);             // every target counts
//   TokenBatch m = make_lm_batch(seqs, PAD, &masks);             // masks[b][i]: does s_i count as a target
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace moelab {

constexpr std::int32_t kIgnoreTarget = -100;  // nn::cross_entropy's ignore_index

struct TokenBatch {
  Tensor inputs;   // int32 [B, L-1]: s_0 .. s_{L-2}, then padding
  Tensor targets;  // int32 [B, L-1]: s_1 .. s_{L-1} where counted, else kIgnoreTarget
  std::int64_t counted_targets = 0;  // targets that are not kIgnoreTarget
};

// sequences: B >= 1 sequences of >= 2 tokens each; loss_masks (optional): same lengths, nonzero
// where token s_i (i >= 1) is a counted target (loss_masks[b][0] is never used). Throws
// moelab::Error naming the bad sequence otherwise.
TokenBatch make_lm_batch(const std::vector<std::vector<std::int32_t>>& sequences, std::int32_t pad,
                         const std::vector<std::vector<std::uint8_t>>* loss_masks = nullptr);

}  // namespace moelab
