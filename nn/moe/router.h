// nn/moe/router.h — the Router interface, the RoutingPlan it returns, and the router registry.
//
// A router decides, for each of the T tokens of a batch x: [T, d], which k experts (of E) process
// it and with what weight. Its answer is a RoutingPlan of T*k assignments (slots):
//
//   experts            int32 [T, k]  expert id of slot (t, j), or one of two sentinels:
//                                      kDroppedSlot (-1): the scheme chose an expert but the
//                                        assignment was dropped (a capacity was full);
//                                      kUnusedSlot (-2): the scheme did not use this slot (a
//                                        variable-k scheme such as top-p left it empty, or an
//                                        expert-choice column whose expert did not pick t)
//                                    so dropped_fraction counts only real drops. The MoE layer
//                                    treats both as "no expert", on the device, reading nothing.
//   gates              [T, k]        differentiable gate weight g_tj (0 in both sentinel slots);
//                                    the MoE layer computes y_t = sum_j g_tj * expert_{e_tj}(x_t),
//                                    so the router learns through the gates (and the aux losses)
//   aux_losses         (name, 0-d Variable) pairs, already multiplied by their coefficients; the
//                                    MoE layer hands them to its caller (FeedForward::forward_with_aux)
//   tokens_per_expert  int32 [E]     kept assignments per expert (sums to T*k when none dropped)
//   max_kept           an upper bound on the kept assignments that the router knows without
//                                    looking at the data (E*C for a capacity C), or -1 for T*k
//   metrics            a function computing name -> value for logging (dropped_fraction,
//                                    router_entropy, ...) when called, or empty
//   slots              optional int32 [T]: slots token t used (k minus its kUnusedSlot entries);
//                                    set by variable-k schemes (top-p), undefined otherwise
//
// Writing a router: nn/moe/router_toolkit.h has the pieces every scheme needs (row
// renormalisation, repeating a [T, 1] column, a plan made from ids + gates + a keep mask with its
// counts and metrics), and tests/router_contract.h checks a new scheme in a few lines.
//
// Everything a plan holds stays on x's device: a router must not read data back to the host
// (a GPU would wait for it every layer of every step). Metrics need the data on the host, so they
// are a closure over device tensors, run only when someone asks (at evaluation, for logging).
// kernels::group_by_expert (core/kernels.h) is the device-side counting sort that applies a
// capacity and counts tokens per expert; routers and the MoE layer both use it.
//
// Routers are Modules (their parameters appear as "router.weight" once the MoE layer registers
// the router under the name "router") and are built by name from a RouterConfig through a
// registry, so a new routing scheme is one new file in nn/moe/ plus one line in
// builtin_routers() (router.cpp) — or, outside nn/, one register_router() call at start-up.
//
//   RouterConfig cfg{/*d=*/64, /*experts=*/8, /*k=*/2, DType::Float32, {{"load_balance", "0.01"}}};
//   std::shared_ptr<Router> r = make_router("topk", cfg, gen);
//   RoutingPlan plan = r->route(x);     // x: [T, 64]
//
// The registry is a function-local static filled with the built-ins the first time it is used,
// so it never depends on the order in which a static library's globals are initialised.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/kernels.h"
#include "core/random.h"
#include "nn/module.h"

namespace moelab {

using RouterMetrics = std::function<std::map<std::string, double>()>;

// The two sentinels of RoutingPlan::experts (see above).
constexpr std::int32_t kDroppedSlot = -1;
constexpr std::int32_t kUnusedSlot = -2;

struct RoutingPlan {
  Tensor experts;    // int32 [T, k]: ids in [0, E), kDroppedSlot or kUnusedSlot
  Variable gates;    // [T, k], 0 in sentinel slots
  std::vector<std::pair<std::string, Variable>> aux_losses;  // 0-d, coefficient applied
  Tensor tokens_per_expert;  // int32 [E]
  std::int64_t max_kept = -1;  // bound on kept assignments known without the data; -1: T*k
  RouterMetrics metrics;       // reads the device when called; may be empty
  // Optional: kernels::group_by_expert of `experts` when the router ran it anyway (top-k does, for
  // its capacity), so the MoE layer does not sort the same ids a second time. Its order, rows and
  // offsets must be exactly those of group_by_expert(experts, E) (wanted may count before a
  // capacity).
  // (group_by_expert takes ids in [-1, E): the layer maps kUnusedSlot to -1 before sorting.)
  std::shared_ptr<const kernels::ExpertGroups> groups;
  Tensor slots;  // optional int32 [T]: slots each token used (variable-k schemes)
  // The scheme's selection before any drop (int32 [T, k], make_routing_plan sets it): what a
  // replay (Router::replay, nn/moe/routing_tape.h) gives back, so that the replaying router applies
  // its own capacity again rather than replaying the drops. Equal to `experts` when nothing dropped;
  // undefined when a router builds its plan without make_routing_plan (a tape records `experts`).
  Tensor selected;
  // Optional [T, d]: added to the layer's output as it is, for experts the router computes itself
  // rather than the expert bank (top-k's copy experts: their gate times the token's input).
  Variable direct_output;
};

// What a router promises about each token's gates, summed over its kept slots (declared by
// Router::gate_sum(); tests/router_contract.h checks the promise):
//   One        every token whose slots were all kept has gates summing to 1 (renormalised
//              gates, a softmax over the chosen logits); a token that lost a slot to a capacity
//              sums to at most 1
//   AtMostOne  every token's gates sum to at most 1 (probabilities of a softmax over all experts,
//              not renormalised: Switch, DeepSeekMoE)
//   Free       no promise (sigmoid gates, constants)
enum class GateSum { Free, One, AtMostOne };
const char* gate_sum_name(GateSum sum);

// int32 [E + 1] offsets -> int32 [E] counts offsets[e+1] - offsets[e], on the offsets' device.
Tensor counts_from_offsets(const Tensor& offsets);

class Router : public Module {
 public:
  // x: [T, d] -> the plan for its T*k assignments.
  virtual RoutingPlan route(const Variable& x) = 0;
  // The same, told that the T tokens are T / sequence_length sequences of sequence_length
  // consecutive tokens (the MoE layer passes its input's [B, S, d] shape this way; a [T, d]
  // input is one sequence). Not virtual: it checks that the length divides T, makes it what
  // current_sequence_length() gives while route(x) runs, and calls route(x), so route() is a
  // router's one entry point and a subclass that overrides it is what the layer calls. Schemes
  // that look at sequences, such as DeepSeek-V3's sequence-wise balance loss (aux-free's option
  // seq_aux), read the length in route().
  RoutingPlan route_sequences(const Variable& x, std::int64_t sequence_length);

  std::int64_t d() const { return d_; }
  std::int64_t experts() const { return experts_; }
  std::int64_t k() const { return k_; }

  // Called once after every optimizer step, for schemes whose state follows training outside the
  // gradient, e.g. aux-loss-free balancing's expert bias. The MoE layer that holds the router
  // attaches it as a step hook (nn/optim/step_hooks.h), so Optimizer::step() runs it: no training
  // loop calls it. A router used on its own calls it itself. The default does nothing.
  virtual void after_optimizer_step() {}

  // The promise this router keeps about each token's gate sum (GateSum above); the default
  // promises nothing.
  virtual GateSum gate_sum() const { return GateSum::Free; }

  // Router replay: every route() from now on selects these experts (int32 [T, k], each in
  // [0, E), distinct per token: a plan's `selected`, recorded earlier) instead of its own choice,
  // with the gates recomputed from the current weights and any capacity applied again; until
  // stop_replay(). A batch of another T is an error. RL trainers replay the experts a rollout used
  // in the training forward over the same tokens (nn/moe/routing_tape.h records and replays whole
  // runs). A scheme where a replay is defined overrides all three; the default can_replay() is
  // false and replay() throws an Error naming the scheme and why_no_replay().
  virtual bool can_replay() const { return false; }
  virtual std::string why_no_replay() const;
  virtual void replay(const Tensor& ids);
  virtual void stop_replay() {}

  // The name the router's messages use, as given to the constructor ("TopKRouter", ...).
  const std::string& scheme() const { return scheme_; }

  // The token ids of the rows that the following route calls see: int32 with one id per row, on
  // the rows' device (an undefined Tensor clears them). The MoE layer sets them from
  // MoELayer::set_token_ids, which a Decoder calls before every forward with its input ids; they
  // stay until replaced. Routers that route on the token's identity (token-hash) read them; the
  // others ignore them.
  void set_token_ids(Tensor ids) { token_ids_ = std::move(ids); }
  const Tensor& token_ids() const { return token_ids_; }

 protected:
  // Checks 1 <= k <= experts and d >= 1 (throws moelab::Error naming `scheme`).
  Router(std::int64_t d, std::int64_t experts, std::int64_t k, const char* scheme);
  // Checks that x is [T, d] with T >= 1 (throws naming `scheme`).
  void check_input(const Variable& x, const char* scheme) const;
  // Checks that sequence_length >= 1 divides x's T (throws naming `scheme`).
  void check_sequence_length(const Variable& x, std::int64_t sequence_length, const char* scheme) const;
  // Inside route(x): the sequence length route_sequences was given, or x's T (one sequence) when
  // route was called directly.
  std::int64_t current_sequence_length(const Variable& x) const;

 private:
  std::int64_t d_, experts_, k_;
  std::string scheme_;
  Tensor token_ids_;
  std::int64_t sequence_length_ = 0;  // set by route_sequences while route runs; 0: none
};


// ---------------------------------------------------------------- configuration and registry
struct RouterConfig {
  std::int64_t d = 0;        // token dimension
  std::int64_t experts = 0;  // E
  std::int64_t k = 1;        // assignments per token (or the scheme's equivalent)
  DType dtype = DType::Float32;
  std::map<std::string, std::string> options;  // scheme-specific, e.g. {"gates", "softmax-topk"}
};

using RouterFactory = std::function<std::shared_ptr<Router>(const RouterConfig&, Generator&)>;

// Adds a scheme; throws if the name is empty, holds anything but letters, digits, '-' and '_',
// is already registered, or the factory is empty.
void register_router(const std::string& name, RouterFactory factory);
// Builds the scheme `name`; an unknown name throws an Error listing the registered ones.
std::shared_ptr<Router> make_router(const std::string& name, const RouterConfig& config, Generator& gen);
// The registered names, sorted.
std::vector<std::string> router_names();
// The built-in ones only (nn/moe's, not those registered at run time), sorted: what the router
// contract test must cover, one case each at least.
std::vector<std::string> builtin_router_names();

// ---------------------------------------------------------------- option helpers for factories
// Throws an Error naming every key of config.options that is not in `allowed` (and the allowed ones).
void check_router_options(const RouterConfig& config, const std::vector<std::string>& allowed, const char* scheme);
// The option as a number (default when absent); throws naming the key and the value when it is
// not a finite number or below `min_value`.
double router_option_double(const RouterConfig& config, const std::string& key, double fallback, const char* scheme,
                            double min_value = 0.0);
// The option as a whole number >= min_value (default when absent); throws naming key and value.
std::int64_t router_option_int(const RouterConfig& config, const std::string& key, std::int64_t fallback,
                               const char* scheme, std::int64_t min_value = 0);
// The option as a boolean ("true"/"false"/"1"/"0"); throws naming key and value otherwise.
bool router_option_bool(const RouterConfig& config, const std::string& key, bool fallback, const char* scheme);
// The option as one of `choices`; throws naming key, value and the choices otherwise.
std::string router_option_choice(const RouterConfig& config, const std::string& key, const std::string& fallback,
                                 const std::vector<std::string>& choices, const char* scheme);

}  // namespace moelab
