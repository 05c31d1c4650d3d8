// nn/generate.h — batched decoding with a key/value cache: greedy, and sampling with a temperature.
//
//   prompts: [B, P] int32 (every row the same length P >= 1) -> tokens: [B, N] int32
// Step 0 runs the whole prompt through the decoder once, filling a KVCache (nn/kv_cache.h) with
// every layer's keys and values [B, H, P, hd], and picks each row's next token from the last
// position's logits. Each later step feeds only the B tokens just chosen ([B, 1], at position
// P + n - 1): one position's forward against the cache, not the whole prefix. Everything runs
// under NoGradGuard (no graph is kept). All rows advance together; a row's tokens do not depend on
// the other rows' (for sampling: given the generator's draws, one per row per step, row order).
//
// How the next token is picked from the logits z: [V] of one row:
//   generate_greedy   argmax z; ties go to the lower token id.
//   generate_sample   keep the top_k largest z (top_k 0: all V; ties keep the lower ids), and draw
//                     from p = softmax(z_kept / temperature): u = gen.next_uniform() in [0, 1),
//                     the token is the first kept one whose cumulative p exceeds u (kept in
//                     descending z order). temperature 1 is the model's own distribution; lower
//                     sharpens it toward the argmax, higher flattens it. temperature 0 means greedy
//                     (no draws); top_k 1 gives greedy's tokens (one draw per row per step, unused).
//
//   Generation g = generate_greedy(model, prompts, 8);                   // g.tokens: [B, 8]
//   Generation s = generate_sample(model, prompts, 8, 0.8, 10, gen);     // same seed, same tokens
// P + N must not exceed the model's config().max_seq. The prompts may be on any device (they are
// copied to the model's, Module::device()); the tokens and logits come back on the model's device.
#pragma once

#include <cstdint>

#include "core/random.h"
#include "core/tensor.h"
#include "nn/decoder.h"

namespace moelab {

struct Generation {
  Tensor tokens;  // [B, N] int32: the generated tokens only (not the prompt)
  Tensor logits;  // [B, N, V]: the logits each token was chosen from; only when keep_logits
};

// prompts: [B, P] int32 -> N new tokens per row. model is run in whatever train/eval mode it is in.
Generation generate_greedy(Decoder& model, const Tensor& prompts, std::int64_t new_tokens, bool keep_logits = false);

// As generate_greedy, but each token is drawn as described above. temperature >= 0 (finite),
// 0 <= top_k <= V (0: no top-k cut). The logits kept are the unscaled ones.
Generation generate_sample(Decoder& model, const Tensor& prompts, std::int64_t new_tokens, double temperature,
                           std::int64_t top_k, Generator& gen, bool keep_logits = false);

}  // namespace moelab
