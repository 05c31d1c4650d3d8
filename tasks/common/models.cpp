// tasks/common/models.cpp — see models.h.
#include "tasks/common/models.h"

#include "core/error.h"
#include "nn/moe/moe_decoder.h"
#include "tasks/common/settings.h"

namespace moelab {

std::string ModelSpec::name() const {
  std::string n = (moe() ? "moe-d" : "dense-d") + std::to_string(d);
  if (moe()) n += "-" + std::to_string(experts) + "e";
  if (moe() && k != 2) n += "-top" + std::to_string(k);
  if (ffn > 0 && ffn != d) n += "-f" + std::to_string(ffn);
  if (moe() && router != "topk") n += "-" + router;
  return n;
}

std::string ModelSpec::family() const { return moe() ? "moe-d" + std::to_string(d) : "dense"; }

std::unique_ptr<Decoder> build_decoder(const ModelSpec& spec, std::int64_t vocab, std::int64_t max_seq,
                                       Generator& gen) {
  DecoderConfig config;
  config.vocab = vocab, config.d = spec.d, config.layers = spec.layers, config.heads = spec.heads;
  config.ffn = spec.ffn, config.max_seq = max_seq;
  config.validate();
  if (!spec.moe()) return std::make_unique<Decoder>(config, gen);
  MoEConfig moe;
  moe.experts = spec.experts, moe.k = spec.k, moe.ffn = spec.ffn;  // router "topk", Mixtral gates, no capacity
  moe.router = spec.router; moe.router_options = spec.router_options;
  MOELAB_CHECK(spec.k >= 1 && spec.k <= spec.experts, "build_decoder", "k must be in [1, experts = ", spec.experts,
               "], got ", spec.k);
  return std::make_unique<Decoder>(config, gen, moe_feed_forward(moe));
}

ModelSize model_size(const Decoder& model) {
  const MoECounts c = moe_parameter_counts(model);
  return {c.non_embedding, c.active};
}

void check_model_grid(const std::vector<ModelSpec>& models) {
  if (models.empty()) throw UsageError("no models: dense_widths and moe_widths are both empty");
  for (const ModelSpec& m : models) {
    if (m.heads < 1 || m.d % m.heads != 0 || (m.d / m.heads) % 2 != 0)
      throw UsageError(m.name() + ": d = " + std::to_string(m.d) + " must be a multiple of heads = " +
                       std::to_string(m.heads) + " with an even head width (rotary embeddings)");
    if (m.moe() && (m.k < 1 || m.k > m.experts))
      throw UsageError(m.name() + ": k = " + std::to_string(m.k) + " must be in [1, " + std::to_string(m.experts) +
                       "] (its experts)");
  }
}

std::vector<ModelSpec> model_grid(const std::vector<std::int64_t>& dense_widths,
                                  const std::vector<std::int64_t>& moe_widths,
                                  const std::vector<std::int64_t>& experts, std::int64_t k, std::int64_t layers,
                                  std::int64_t heads, const std::vector<std::int64_t>& dense_ffn_factors) {
  std::vector<ModelSpec> grid;
  for (std::int64_t d : dense_widths)
    for (std::int64_t f : dense_ffn_factors)
      grid.push_back({.d = d, .layers = layers, .heads = heads, .ffn = f > 1 ? f * d : 0});
  for (std::int64_t d : moe_widths)
    for (std::int64_t e : experts) grid.push_back({.d = d, .layers = layers, .heads = heads, .experts = e, .k = k});
  return grid;
}

}  // namespace moelab
