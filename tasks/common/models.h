// tasks/common/models.h — the experiments' model recipes: a dense or MoE decoder by name.
//
// The Mixture of Parrots experiments compare dense decoders with MoE decoders (top-k token
// choice, Mixtral gates, no dropping) whose FFN width equals d. A ModelSpec says which one:
//
//   dense-d64        ModelSpec{.d = 64, .experts = 0}            dense FFN, f = d
//   moe-d64-8e       ModelSpec{.d = 64, .experts = 8, .k = 2}    8 experts of width f = d, top-2
//   moe-d64-8e-top-p ModelSpec{..., .router = "top-p"}          another registered router
//
// The router is "topk" (Mixtral gates, no dropping) unless `router` names another registered
// scheme (nn/moe/router.h) with its `router_options`; the name shows it only then, so the names
// of topk models (point names, results) are what they were before routers could be chosen.
//
// Parameters are counted as the paper counts them (nn/moe/moe_decoder.h): non-embedding (the
// token embedding and the LM head left out) and active (what one token uses: attention, norms,
// router and k experts). For a dense model active = total non-embedding.
//
// Every FFN's hidden activation, dense or expert, is `activation` (the setting of the same name,
// add_activation_setting): relu as in the papers unless a run asks for gelu or swiglu
// (nn/activation.h). It is not in the model's name: the run's settings record it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "nn/decoder.h"
#include "runner/settings.h"

namespace moelab {

struct ModelSpec {
  std::int64_t d = 64;
  std::int64_t layers = 2;
  std::int64_t heads = 4;
  std::int64_t experts = 0;  // 0: dense
  std::int64_t k = 2;        // experts per token (MoE only)
  std::int64_t ffn = 0;      // FFN (expert) width; 0 means d
  std::string router = "topk";                          // registered router name (nn/moe/router.h)
  std::map<std::string, std::string> router_options{};  // passed to the router's factory
  Activation activation = Activation::Relu;              // every FFN's: the dense MLP's or the experts'

  bool moe() const { return experts > 0; }
  // "dense-d64" or "moe-d64-8e" (with "-top1"... when k != 2, "-f128" when ffn != d, "-top-p" when
  // the router is not topk; the options are not in the name: the run's settings record them).
  std::string name() const;
  // Its family for plots: "dense" or "moe-d64" (a line of Figure 4 per MoE width).
  std::string family() const;
};

struct ModelSize {
  std::int64_t non_embedding = 0;  // the paper's "total parameters"
  std::int64_t active = 0;         // the paper's "active parameters"
};

// Throws moelab::Error for a bad spec (d not divisible by heads, k > experts, ...).
std::unique_ptr<Decoder> build_decoder(const ModelSpec& spec, std::int64_t vocab, std::int64_t max_seq,
                                       Generator& gen);
ModelSize model_size(const Decoder& model);

// Throws UsageError (runner/settings.h) naming the first model that cannot be built: d not a
// multiple of heads with an even head width (rotary embeddings), k > experts, a router (or router
// options) its registry or factory refuses (tasks/common/router_settings.h), or no model at all.
void check_model_grid(const std::vector<ModelSpec>& models);

// Declares `activation` (relu | gelu | swiglu, default relu): the hidden activation of every model's
// FFN, the dense MLP and the routed and shared experts alike.
void add_activation_setting(Settings& s);
// Every model of `models` gets the setting's activation.
void apply_activation_setting(const Settings& s, std::vector<ModelSpec>& models);

// The sweep's models: one dense model per (dense width, FFN factor), FFN width factor * d (factor
// k gives a dense model the active parameters of a top-k MoE of the same width, less the router),
// then one MoE model per (MoE width, experts).
std::vector<ModelSpec> model_grid(const std::vector<std::int64_t>& dense_widths,
                                  const std::vector<std::int64_t>& moe_widths,
                                  const std::vector<std::int64_t>& experts, std::int64_t k, std::int64_t layers,
                                  std::int64_t heads, const std::vector<std::int64_t>& dense_ffn_factors = {1});

}  // namespace moelab
