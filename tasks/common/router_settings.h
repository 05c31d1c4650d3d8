// tasks/common/router_settings.h — the `router` and `router_options` settings of the experiments
// that train routed MoE layers (phonebook, shortest-path, teacher-student).
//
//   moelab phonebook --set router=top-p --set router_options=threshold:0.5
//   moelab phonebook --set router=aux-free --set router_options=update_rate:0.01,score:softmax
//
// `router` is a name in the router registry (nn/moe/router.h): the built-ins (topk, expert-choice,
// top-p, aux-free, balanced) and any scheme the program registered before it parsed its settings
// (examples/moelab_with_hash.cpp registers "hash" and then runs the same command line).
// `router_options` is a comma-separated list of key:value pairs handed to the router's factory as
// RouterConfig::options ("" = none); the factory says which keys it knows.
//
// The defaults (topk, no options) are what the experiments did before these settings existed, so
// every earlier run and recorded result stays as it was (and old run folders resume: run_start.h).
//
// Everything is checked before any work: an unknown name lists the registered ones, a malformed
// options list names the bad item, and check_router builds the router once for each model shape of
// the grid so that the factory's own checks (an unknown option key, a bad value, a k the scheme
// cannot take) become a UsageError at start-up, not an error mid-sweep.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tasks/common/models.h"
#include "runner/settings.h"

namespace moelab {

// Declares `router` (choices: the registry's names now) and `router_options` (may be empty).
// `whose` says which MoE layers they route, e.g. "every MoE model" or "the student".
void add_router_settings(Settings& s, const std::string& whose);

// "key:value,key:value" -> {key: value}; "" -> {}. UsageError naming the item for one without a
// ':', an empty key or value, or a key given twice.
std::map<std::string, std::string> parse_router_options(const std::string& text);

// The options as the settings write them: "key:value,..." in key order ("" for none).
std::string router_options_text(const std::map<std::string, std::string>& options);

// Every MoE model of `models` gets the settings' router and parsed router_options (UsageError for
// a malformed list); dense models have no router and stay as they are.
void apply_router_settings(const Settings& s, std::vector<ModelSpec>& models);

// Builds the router `name` once for tokens of width d, `experts` experts and k per token, and
// turns any error of the registry or the factory into a UsageError naming the router, its options
// and the shape. Cheap: a router is one [E, d] matrix at most.
void check_router(const std::string& name, const std::map<std::string, std::string>& options, std::int64_t d,
                  std::int64_t experts, std::int64_t k);

}  // namespace moelab
