// nn/generate.h — batched greedy decoding with a key/value cache.
//
//   prompts: [B, P] int32 (every row the same length P >= 1) -> tokens: [B, N] int32
// Step 0 runs the whole prompt through the decoder once, filling a KVCache (nn/kv_cache.h) with
// every layer's keys and values [B, H, P, hd], and picks each row's argmax of the last position's
// logits. Each later step feeds only the B tokens just chosen ([B, 1], at position P + n - 1): one
// position's forward against the cache, not the whole prefix. Ties in the argmax go to the lower
// token id. Everything runs under NoGradGuard (no graph is kept). All rows advance together; a
// row's tokens do not depend on the other rows.
//
//   Generation g = generate_greedy(model, prompts, 8);     // g.tokens: [B, 8]
// P + N must not exceed the model's config().max_seq.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "nn/decoder.h"

namespace moelab {

struct Generation {
  Tensor tokens;  // [B, N] int32: the generated tokens only (not the prompt)
  Tensor logits;  // [B, N, V]: the logits each token was chosen from; only when keep_logits
};

// prompts: [B, P] int32 -> N new tokens per row. model is run in whatever train/eval mode it is in.
Generation generate_greedy(Decoder& model, const Tensor& prompts, std::int64_t new_tokens, bool keep_logits = false);

}  // namespace moelab
