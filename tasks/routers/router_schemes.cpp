// tasks/routers/router_schemes.cpp — see router_schemes.h.
#include "tasks/routers/router_schemes.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "nn/moe/moe_decoder.h"
#include "nn/moe/router.h"
#include "runner/run_dir.h"
#include "runner/settings.h"

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
  const auto custom = std::find_if(s.custom.begin(), s.custom.end(), [&](const RouterScheme& c) { return c.name == name; });
  if (custom != s.custom.end()) {
    r = *custom;
  } else if (name == "topk") {
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
    std::string known = joined_names();
    for (const RouterScheme& c : s.custom) known += ", " + c.name;
    throw UsageError("no routing scheme '" + name + "' (the schemes: " + known + ")");
  }
  const std::int64_t routed = experts - r.shared_experts;
  if (routed < 2 || r.k > routed)
    throw UsageError(name + ": needs more experts than " + std::to_string(experts) + " (k = " + std::to_string(r.k) +
                     " of " + std::to_string(routed) + " routed experts, at least 2)");
  return r;
}

std::vector<std::string> parse_scheme_list(const std::string& text, const SchemeSettings& settings) {
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
    router_scheme(name, settings, 64);  // the name is known (64 experts: enough for any k)
    out.push_back(name);
  }
  if (out.empty()) throw UsageError("schemes: give at least one (the schemes: " + joined_names() + ")");
  return out;
}

std::vector<RouterScheme> parse_custom_schemes(const std::string& text) {
  std::vector<RouterScheme> out;
  if (text.empty()) return out;
  const auto refuse = [&](const std::string& entry, const std::string& why) {
    throw UsageError("custom_schemes: '" + entry + "': " + why +
                     " (the form: NAME:ROUTER[:KEY=VALUE]..., several separated by ';')");
  };
  std::stringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ';')) {
    std::vector<std::string> parts;
    std::stringstream fields(entry);
    std::string field;
    while (std::getline(fields, field, ':')) parts.push_back(field);
    if (parts.size() < 2 || parts[0].empty() || parts[1].empty()) refuse(entry, "needs a name and a router");
    RouterScheme r;
    r.name = parts[0], r.router = parts[1];
    const bool name_ok = std::all_of(r.name.begin(), r.name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    });
    if (!name_ok) refuse(entry, "a name is letters, digits, '-' and '_'");
    const std::vector<std::string> builtin = scheme_names();
    if (std::find(builtin.begin(), builtin.end(), r.name) != builtin.end()) refuse(entry, "a built-in scheme's name");
    for (const RouterScheme& c : out)
      if (c.name == r.name) refuse(entry, "the name is defined twice");
    const std::vector<std::string> routers = router_names();
    if (std::find(routers.begin(), routers.end(), r.router) == routers.end())
      refuse(entry, "no router '" + r.router + "'");
    if (r.router == "expert-choice") refuse(entry, "expert-choice is not causal (tasks/routers/router_schemes.h)");
    std::string options;
    for (std::size_t i = 2; i < parts.size(); ++i) {
      const std::size_t eq = parts[i].find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == parts[i].size()) refuse(entry, "'" + parts[i] + "' is not KEY=VALUE");
      const std::string key = parts[i].substr(0, eq), value = parts[i].substr(eq + 1);
      if (key == "shared_gate") {
        if (value != "0" && value != "1") refuse(entry, "shared_gate is 0 or 1, got '" + value + "'");
        r.shared_gate = value == "1";
      } else if (key == "k" || key == "shared") {
        char* end = nullptr;
        const long long v = std::strtoll(value.c_str(), &end, 10);
        if (end != value.c_str() + value.size() || v < (key == "k" ? 1 : 0) || v > 4096)
          refuse(entry, key + " must be a whole number" + (key == "k" ? " >= 1" : " >= 0") + ", got '" + value + "'");
        (key == "k" ? r.k : r.shared_experts) = v;
      } else {
        if (!r.options.emplace(key, value).second) refuse(entry, "option '" + key + "' given twice");
        options += " " + key + "=" + value;
      }
    }
    // Real slots vary per token with top-p, and with MoE++'s null, copy and constant experts (a slot
    // that picks one runs no MLP): the report then shows the measured mean_slots, not k.
    const auto positive = [&](const char* key) {
      const auto it = r.options.find(key);
      return it != r.options.end() && it->second != "0";
    };
    if (r.shared_gate && r.shared_experts == 0) refuse(entry, "shared_gate=1 needs shared experts (shared=N)");
    r.variable_k = r.router == "top-p" || positive("null_experts") || positive("copy_experts") ||
                   positive("constant_experts");
    r.batch_dependent = r.router == "balanced";
    r.description = "custom: " + r.router + ", k " + std::to_string(r.k) +
                    (r.shared_experts > 0 ? ", " + std::to_string(r.shared_experts) + " shared" : "") +
                    (r.shared_gate ? " (gated)" : "") +
                    (options.empty() ? "" : "," + options);
    out.push_back(std::move(r));
  }
  if (out.empty() || text.back() == ';') refuse(text, "an empty entry");
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
  moe.shared_gate = scheme.shared_gate;
  return std::make_unique<Decoder>(config, gen, moe_feed_forward(moe));
}

}  // namespace moelab
