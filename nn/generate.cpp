// nn/generate.cpp — greedy decoding: prompt pass into a KV cache, then one position per step.
#include "nn/generate.h"

#include <vector>

#include "autograd/ops.h"
#include "core/kernels.h"

namespace moelab {

Generation generate_greedy(Decoder& model, const Tensor& prompts, std::int64_t new_tokens, bool keep_logits) {
  check_dtype(prompts, DType::Int32, "generate_greedy", "prompts");
  MOELAB_CHECK(prompts.rank() == 2 && prompts.size(0) >= 1 && prompts.size(1) >= 1, "generate_greedy",
               "prompts must be [B, P] with B, P >= 1, got ", prompts.shape());
  MOELAB_CHECK(new_tokens >= 1, "generate_greedy", "new_tokens must be >= 1, got ", new_tokens);
  const std::int64_t P = prompts.size(1);
  MOELAB_CHECK(P + new_tokens <= model.config().max_seq, "generate_greedy", "prompt length ", P, " + ", new_tokens,
               " new tokens exceeds the model's max_seq ", model.config().max_seq);

  NoGradGuard no_grad;
  KVCache cache = model.make_cache();
  std::vector<Tensor> tokens, logits;  // per step: [B, 1] and [B, 1, V]
  Tensor input = prompts;              // [B, T]: the prompt, then the last chosen tokens
  for (std::int64_t step = 0; step < new_tokens; ++step) {
    const Variable h = model.hidden(input, &cache);                               // [B, T, d]
    const std::int64_t T = input.size(1);
    const Variable last = T == 1 ? h : Variable(kernels::narrow(h.data(), 1, T - 1, 1));  // [B, 1, d]
    const Tensor step_logits = model.logits(last).data();                         // [B, 1, V]
    Tensor next = kernels::max(step_logits, -1).indices;                          // [B, 1] int32
    if (keep_logits) logits.push_back(step_logits);
    tokens.push_back(next);
    input = next;
  }
  Generation out;
  out.tokens = kernels::concat(tokens, 1);                                        // [B, N]
  if (keep_logits) out.logits = kernels::concat(logits, 1);                       // [B, N, V]
  return out;
}

}  // namespace moelab
