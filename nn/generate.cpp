// nn/generate.cpp — decoding: prompt pass into a KV cache, then one position per step. One loop
// (decode) serves greedy and sampling; they differ only in how a step's logits become tokens.
#include "nn/generate.h"

#include <cmath>
#include <functional>
#include <vector>

#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"

namespace moelab {

namespace {

// step_logits: [B, 1, V] -> next tokens [B, 1] int32
using PickFn = std::function<Tensor(const Tensor& step_logits)>;

Generation decode(Decoder& model, const Tensor& prompts, std::int64_t new_tokens, bool keep_logits, const char* op,
                  const PickFn& pick) {
  check_dtype(prompts, DType::Int32, op, "prompts");
  MOELAB_CHECK(prompts.rank() == 2 && prompts.size(0) >= 1 && prompts.size(1) >= 1, op,
               "prompts must be [B, P] with B, P >= 1, got ", prompts.shape());
  MOELAB_CHECK(new_tokens >= 1, op, "new_tokens must be >= 1, got ", new_tokens);
  const std::int64_t P = prompts.size(1);
  MOELAB_CHECK(P + new_tokens <= model.config().max_seq, op, "prompt length ", P, " + ", new_tokens,
               " new tokens exceeds the model's max_seq ", model.config().max_seq);

  NoGradGuard no_grad;
  KVCache cache = model.make_cache();
  std::vector<Tensor> tokens, logits;  // per step: [B, 1] and [B, 1, V]
  Tensor input = prompts.to(model.device());  // [B, T]: the prompt, then the last chosen tokens
  for (std::int64_t step = 0; step < new_tokens; ++step) {
    const Variable h = model.hidden(input, &cache);                               // [B, T, d]
    const std::int64_t T = input.size(1);
    const Variable last = T == 1 ? h : Variable(kernels::narrow(h.data(), 1, T - 1, 1));  // [B, 1, d]
    const Tensor step_logits = model.logits(last).data();                         // [B, 1, V]
    Tensor next = pick(step_logits);                                              // [B, 1] int32
    if (keep_logits) logits.push_back(step_logits);
    tokens.push_back(next);
    input = next;
  }
  Generation out;
  out.tokens = kernels::concat(tokens, 1);                                        // [B, N]
  if (keep_logits) out.logits = kernels::concat(logits, 1);                       // [B, N, V]
  return out;
}

Tensor argmax_pick(const Tensor& step_logits) { return kernels::max(step_logits, -1).indices; }

}  // namespace

Generation generate_greedy(Decoder& model, const Tensor& prompts, std::int64_t new_tokens, bool keep_logits) {
  return decode(model, prompts, new_tokens, keep_logits, "generate_greedy", argmax_pick);
}

Generation generate_sample(Decoder& model, const Tensor& prompts, std::int64_t new_tokens, double temperature,
                           std::int64_t top_k, Generator& gen, bool keep_logits) {
  const std::int64_t V = model.config().vocab;
  MOELAB_CHECK(std::isfinite(temperature) && temperature >= 0.0, "generate_sample",
               "temperature must be finite and >= 0, got ", temperature);
  MOELAB_CHECK(top_k >= 0 && top_k <= V, "generate_sample", "top_k must be in [0, vocab ", V, "], got ", top_k);
  if (temperature == 0.0) return decode(model, prompts, new_tokens, keep_logits, "generate_sample", argmax_pick);

  const int k = static_cast<int>(top_k == 0 ? V : top_k);
  const PickFn pick = [&](const Tensor& step_logits) {
    // The k largest logits per row, largest first (ties: lower id first), and their ids: [B, 1, k].
    const kernels::TopKResult top = kernels::topk(step_logits, k);
    // p = softmax(z / temperature) over the kept k, computed by the kernel (any device), read back.
    const Tensor p = kernels::softmax(kernels::div(top.values, temperature));
    const std::vector<float> probs = p.to(DType::Float32).to_vector<float>();
    const std::vector<std::int32_t> ids = top.indices.to_vector<std::int32_t>();
    const std::int64_t B = step_logits.size(0);
    std::vector<std::int32_t> next(static_cast<std::size_t>(B));
    for (std::int64_t b = 0; b < B; ++b) {
      const std::size_t row = static_cast<std::size_t>(b * k);
      const double u = gen.next_uniform();  // one draw per row per step, always
      std::size_t chosen = static_cast<std::size_t>(k) - 1;  // if rounding leaves the sum just under u
      double cumulative = 0.0;
      for (std::size_t j = 0; j < static_cast<std::size_t>(k); ++j) {
        cumulative += probs[row + j];
        if (u < cumulative) {
          chosen = j;
          break;
        }
      }
      next[static_cast<std::size_t>(b)] = ids[row + chosen];
    }
    return from_vector(next, {B, 1}).to(step_logits.device());
  };
  return decode(model, prompts, new_tokens, keep_logits, "generate_sample", pick);
}

}  // namespace moelab
