// tasks/routers/router_schemes.h — the routing schemes `moelab routers` compares, each one the
// same MoE decoder with another router, at equal active parameters.
//
// Every scheme has the same width d, the same expert width f and the same number of expert
// parameters in total (E experts of width f per layer); what changes is who decides which experts
// a token uses (nn/moe/router.h):
//
//   topk          top-2 token choice, Mixtral gates, no aux loss, no capacity: the Mixture of
//                 Parrots baseline (nn/moe/top_k_router.h)
//   topk-aux      the same plus Switch's load-balancing loss, coefficient `load_balance`
//   topk-cap      topk-aux plus a capacity: each expert keeps ceil(capacity_factor * T * 2 / E)
//                 assignments per batch, later ones are dropped (Switch / GShard); the only scheme
//                 here that drops tokens
//   aux-free      top-2 on sigmoid scores plus a per-expert selection bias nudged after every step
//                 toward an even load, no loss (DeepSeek-V3; nn/moe/aux_free_router.h)
//   balanced      greedy balanced assignment in training, every expert exactly 2T/E tokens
//                 (BASE layers; nn/moe/balanced_router.h); top-2 in evaluation
//   top-p         each token takes experts until their probability reaches `top_p_threshold`
//                 (Huang et al. 2024; nn/moe/top_p_router.h), with the paper's entropy loss (1e-4)
//                 and the load-balancing loss; at most `top_p_max_k` experts (0: E). Its active
//                 parameters vary per token: the report gives its mean slots per token
//   shared-top1   DeepSeekMoE's shared expert: 1 shared expert every token uses + top-1 of E - 1
//                 routed experts. Active expert width 2f as top-2's, and E experts of width f in
//                 all, so total AND active parameters equal topk's (the router has E - 1 rows,
//                 d fewer parameters per layer)
//
// More schemes without editing this file: the setting custom_schemes (parse_custom_schemes
// below), e.g. DeepSeek-V3's full router beside the others:
//   moelab routers --set schemes=topk,aux-free,dsv3
//                  --set custom_schemes=dsv3:aux-free:groups=2:topk_groups=1:scale=2.5
//
// Left out on purpose: expert choice (nn/moe/expert_choice_router.h). Its experts choose tokens
// across the whole batch, later positions included, so a causal decoder trained with it sees the
// future, and greedy decoding (one batch of prompts at a time) routes differently from training:
// its phone-book accuracy would measure that leak, not the routing. balanced shares half of the
// caveat (its training assignment also looks at the whole batch; its evaluation is causal top-2):
// the report says so next to its numbers.
//
//   SchemeSettings s{.load_balance = 0.01, ...};
//   RouterScheme r = router_scheme("aux-free", s);
//   std::unique_ptr<Decoder> m = build_scheme_decoder(r, base_spec, vocab, max_seq, gen);
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "nn/decoder.h"
#include "tasks/common/models.h"

namespace moelab {

struct RouterScheme;

// The knobs of the schemes that have one (the experiment's settings), and the schemes defined on
// the command line (setting custom_schemes, parse_custom_schemes below).
struct SchemeSettings {
  double load_balance = 0.01;     // Switch loss coefficient (topk-aux, topk-cap, top-p)
  double capacity_factor = 1.25;  // topk-cap
  double aux_free_rate = 1e-3;    // aux-free's bias update rate u
  double top_p_threshold = 0.4;   // top-p's p
  std::int64_t top_p_max_k = 0;   // top-p's most experts per token (0: all E)
  std::vector<RouterScheme> custom;  // more schemes, by name
};

struct RouterScheme {
  std::string name;         // as on the command line: "topk", "shared-top1", ...
  std::string description;  // one line for the summary
  std::string router;       // registered router name
  std::map<std::string, std::string> options;
  std::int64_t k = 2;               // slots per token (top-p: its cap)
  std::int64_t shared_experts = 0;  // always-active experts (taken from the E experts)
  bool shared_gate = false;         // Qwen2-MoE's sigmoid gate on their output (MoEConfig::shared_gate)
  bool variable_k = false;          // active parameters vary per token (top-p; null/copy/constant experts)
  bool batch_dependent = false;     // training routing looks at the whole batch (balanced)
};

// Every scheme's name, in the report's order.
std::vector<std::string> scheme_names();
// The scheme `name` with the experts' total E (UsageError naming the known schemes for another
// name, or when E is too small for it: at least 2 routed experts and k of them, so E >= 2 for
// top-2, E >= 3 for shared-top1, E >= top_p_max_k for top-p).
RouterScheme router_scheme(const std::string& name, const SchemeSettings& settings, std::int64_t experts);
// "a,b,c" -> names, each checked by router_scheme (the custom schemes of `settings` included);
// UsageError for an empty list, an empty name (a trailing comma included) or a repeat.
std::vector<std::string> parse_scheme_list(const std::string& text, const SchemeSettings& settings = {});

// Schemes as data: "NAME:ROUTER[:KEY=VALUE]...", several separated by ';', e.g.
//   dsv3:aux-free:groups=2:topk_groups=1:scale=2.5:seq_aux=0.0001;top1:topk:k=1:gates=softmax-topk
// KEY k sets the slots per token (default 2), KEY shared the always-active experts taken from the
// E (default 0), KEY shared_gate=1 scales their output by Qwen2-MoE's sigmoid gate; every other KEY=VALUE is a router option, checked by the router's factory when
// the experiment validates its grid. NAME: letters, digits, '-' and '_', not a built-in scheme's.
// ROUTER: a registered router but expert-choice (not causal: see above). UsageError naming the
// entry for anything else. An empty text gives no scheme.
std::vector<RouterScheme> parse_custom_schemes(const std::string& text);

// The spec of the scheme's routed experts on `base`: its k, router and options, and E - shared
// experts (shared-top1: E - 1).
ModelSpec routed_spec(const RouterScheme& scheme, const ModelSpec& base);
// UsageError (check_model_grid, tasks/common/models.h) naming the first scheme whose decoder on
// `base` cannot be built: a width the heads refuse, or a router or options its factory refuses.
void check_schemes(const std::vector<RouterScheme>& schemes, const ModelSpec& base);

// The decoder of `base` (d, layers, heads, ffn, experts = E) with the scheme's router: built by
// build_decoder (tasks/common/models.h) with the router and its options, or, with shared experts,
// with E - shared routed experts and the shared ones beside them (MoEConfig::shared_experts).
std::unique_ptr<Decoder> build_scheme_decoder(const RouterScheme& scheme, const ModelSpec& base, std::int64_t vocab,
                                              std::int64_t max_seq, Generator& gen);

}  // namespace moelab
