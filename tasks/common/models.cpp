// tasks/common/models.cpp — see models.h.
#include "tasks/common/models.h"

#include <cstdio>

#include "core/error.h"
#include "nn/moe/moe_decoder.h"
#include "tasks/common/memory_check.h"
#include "tasks/common/router_settings.h"
#include "runner/settings.h"

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
  config.ffn_activation = spec.activation;
  config.validate();
  if (!spec.moe()) return std::make_unique<Decoder>(config, gen);
  MoEConfig moe;
  moe.experts = spec.experts, moe.k = spec.k, moe.ffn = spec.ffn;
  moe.router = spec.router;  // by default "topk" without options: Mixtral gates, no capacity
  moe.router_options = spec.router_options;
  moe.expert_activation = spec.activation;
  MOELAB_CHECK(spec.k >= 1 && spec.k <= spec.experts, "build_decoder", "k must be in [1, experts = ", spec.experts,
               "], got ", spec.k);
  return std::make_unique<Decoder>(config, gen, moe_feed_forward(moe));
}

ModelSize model_size(const Decoder& model) {
  const MoECounts c = moe_parameter_counts(model);
  return {c.non_embedding, c.active};
}

namespace {

// A setting in range can still ask for more memory than the machine has (d = 65536: 2e11
// parameters). Training holds each parameter four times in float32 (the weight, its gradient and
// Adam's two moments): 16 bytes per parameter, before any activation. A model whose parameters
// alone need more than the machine's memory is refused before anything is written.
void check_fits_in_memory(const ModelSpec& m) {
  const double d = static_cast<double>(m.d), f = static_cast<double>(m.ffn > 0 ? m.ffn : m.d);
  const double experts = m.moe() ? static_cast<double>(m.experts) : 1.0;
  const double ffn_matrices = is_gated(m.activation) ? 3.0 : 2.0;  // swiglu: gate, linear and down
  const double per_layer = 4.0 * d * d + experts * ffn_matrices * d * f + (m.moe() ? experts * d : 0.0);
  const double parameters = static_cast<double>(m.layers) * per_layer;
  const double bytes = 16.0 * parameters;
  const double memory = physical_memory_bytes();
  if (memory > 0.0 && bytes > memory) {
    char text[256];
    std::snprintf(text, sizeof text, "%.3g parameters need %.3g GB to train (weight, gradient and Adam's two moments "
                  "in float32), more than this machine's %.3g GB", parameters, bytes / 1e9, memory / 1e9);
    throw UsageError(m.name() + ": d = " + std::to_string(m.d) + ", " + std::to_string(m.layers) + " layers" +
                     (m.moe() ? ", " + std::to_string(m.experts) + " experts of width " + std::to_string(static_cast<std::int64_t>(f))
                              : std::string()) +
                     ": " + text);
  }
}

}  // namespace

void check_model_grid(const std::vector<ModelSpec>& models) {
  if (models.empty()) throw UsageError("no models: dense_widths and moe_widths are both empty");
  for (const ModelSpec& m : models) {
    if (m.heads < 1 || m.d % m.heads != 0 || (m.d / m.heads) % 2 != 0)
      throw UsageError(m.name() + ": d = " + std::to_string(m.d) + " must be a multiple of heads = " +
                       std::to_string(m.heads) + " with an even head width (rotary embeddings)");
    if (m.moe() && (m.k < 1 || m.k > m.experts))
      throw UsageError(m.name() + ": k = " + std::to_string(m.k) + " must be in [1, " + std::to_string(m.experts) +
                       "] (its experts)");
    if (m.moe()) check_router(m.router, m.router_options, m.d, m.experts, m.k);
    check_fits_in_memory(m);
  }
}

void add_activation_setting(Settings& s) {
  s.add_text("activation", "relu",
             "hidden activation of every FFN, the dense models' MLP and the MoE models' experts alike: relu (the "
             "papers'), gelu (exact), or swiglu (silu(gate) * linear, as Mixtral's, DeepSeek's, Qwen's and OLMoE's "
             "experts: 3 d f parameters an FFN instead of 2 d f; nn/activation.h)",
             {"relu", "gelu", "swiglu"});
}

void apply_activation_setting(const Settings& s, std::vector<ModelSpec>& models) {
  const Activation activation = parse_activation(s.text("activation"));
  for (ModelSpec& m : models) m.activation = activation;
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
