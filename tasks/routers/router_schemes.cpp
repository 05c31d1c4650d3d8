// tasks/routers/router_schemes.cpp — see router_schemes.h.
#include "tasks/routers/router_schemes.h"

#include <algorithm>
#include <sstream>

#include "nn/moe/moe_decoder.h"
#include "tasks/common/run_dir.h"
#include "tasks/common/settings.h"

namespace moelab {

namespace {

// Router options are text; numbers in the shortest form that reads back the same.
std::string option_number(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

std::string joined_names() {
  std::string all;
  for (const std::string& n : scheme_names()) all += (all.empty() ? "" : ", ") + n;
  return all;
}

}  // namespace

std::vector<std::string> scheme_names() {
  return {"topk", "topk-aux", "topk-cap", "aux-free", "balanced", "top-p", "shared-top1"};
}

RouterScheme router_scheme(const std::string& name, const SchemeSettings& s, std::int64_t experts) {
  const std::string lb = option_number(s.load_balance);
  RouterScheme r;
  r.name = name;
  if (name == "topk") {
    r.router = "topk";
    r.description = "top-2, Mixtral gates, no aux loss, no capacity (the Mixture of Parrots baseline)";
  } else if (name == "topk-aux") {
    r.router = "topk", r.options = {{"load_balance", lb}};
    r.description = "top-2 + Switch load-balancing loss " + cell(s.load_balance);
  } else if (name == "topk-cap") {
    r.router = "topk", r.options = {{"load_balance", lb}, {"capacity_factor", option_number(s.capacity_factor)}};
    r.description = "top-2 + Switch loss " + cell(s.load_balance) + " + capacity factor " + cell(s.capacity_factor) +
                    " (overflow dropped)";
  } else if (name == "aux-free") {
    r.router = "aux-free", r.options = {{"update_rate", option_number(s.aux_free_rate)}};
    r.description = "top-2 on sigmoid scores + selection bias, update rate " + cell(s.aux_free_rate) + ", no loss";
  } else if (name == "balanced") {
    r.router = "balanced", r.batch_dependent = true;
    r.description = "greedy balanced assignment in training (2T/E tokens per expert), top-2 in evaluation";
  } else if (name == "top-p") {
    r.router = "top-p", r.variable_k = true;
    r.k = s.top_p_max_k > 0 ? s.top_p_max_k : experts;
    r.options = {{"threshold", option_number(s.top_p_threshold)}, {"entropy_loss", "0.0001"}, {"load_balance", lb}};
    r.description = "experts until probability " + cell(s.top_p_threshold) + " (at most " + std::to_string(r.k) +
                    "), entropy loss 1e-4 + Switch loss " + cell(s.load_balance);
  } else if (name == "shared-top1") {
    // DeepSeekMoE's gate: the softmax probability itself, not renormalised over the one chosen
    // expert (that would be p/p = 1 for every token, and the router would never learn).
    r.router = "topk", r.k = 1, r.shared_experts = 1, r.options = {{"gates", "softmax-topk"}};
    r.description = "1 shared expert + top-1 of " + std::to_string(experts - 1) +
                    " routed, gate = softmax probability (DeepSeekMoE)";
  } else {
    throw UsageError("no routing scheme '" + name + "' (the schemes: " + joined_names() + ")");
  }
  const std::int64_t routed = experts - r.shared_experts;
  if (routed < 2 || r.k > routed)
    throw UsageError(name + ": needs more experts than " + std::to_string(experts) + " (k = " + std::to_string(r.k) +
                     " of " + std::to_string(routed) + " routed experts, at least 2)");
  return r;
}

std::vector<std::string> parse_scheme_list(const std::string& text) {
  std::vector<std::string> out;
  // getline drops a last empty item: "topk," would read as "topk" (router_options refuses it too).
  if (!text.empty() && text.back() == ',')
    throw UsageError("schemes: an empty name at the end of '" + text + "' (the schemes: " + joined_names() + ")");
  std::stringstream in(text);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name.empty()) throw UsageError("schemes: an empty name in '" + text + "' (the schemes: " + joined_names() + ")");
    if (std::find(out.begin(), out.end(), name) != out.end())
      throw UsageError("schemes: '" + name + "' is listed twice");
    router_scheme(name, SchemeSettings{}, 8);  // the name is known
    out.push_back(name);
  }
  if (out.empty()) throw UsageError("schemes: give at least one (the schemes: " + joined_names() + ")");
  return out;
}

ModelSpec routed_spec(const RouterScheme& scheme, const ModelSpec& base) {
  ModelSpec spec = base;
  spec.k = scheme.k, spec.router = scheme.router, spec.router_options = scheme.options;
  spec.experts = base.experts - scheme.shared_experts;
  return spec;
}

void check_schemes(const std::vector<RouterScheme>& schemes, const ModelSpec& base) {
  std::vector<ModelSpec> specs;
  for (const RouterScheme& r : schemes) specs.push_back(routed_spec(r, base));
  check_model_grid(specs);
}

std::unique_ptr<Decoder> build_scheme_decoder(const RouterScheme& scheme, const ModelSpec& base, std::int64_t vocab,
                                              std::int64_t max_seq, Generator& gen) {
  const ModelSpec spec = routed_spec(scheme, base);
  if (scheme.shared_experts == 0) return build_decoder(spec, vocab, max_seq, gen);
  // Shared experts are a layer option that ModelSpec does not carry: the same decoder as
  // build_decoder's, its MoE layers with shared experts taken out of the E.
  DecoderConfig config;
  config.vocab = vocab, config.d = spec.d, config.layers = spec.layers, config.heads = spec.heads;
  config.ffn = spec.ffn, config.max_seq = max_seq;
  config.validate();
  MoEConfig moe;
  moe.experts = spec.experts, moe.k = spec.k, moe.ffn = spec.ffn;
  moe.router = spec.router, moe.router_options = spec.router_options;
  moe.shared_experts = scheme.shared_experts;  // each of width ffn_width(), as a routed expert
  return std::make_unique<Decoder>(config, gen, moe_feed_forward(moe));
}

}  // namespace moelab
