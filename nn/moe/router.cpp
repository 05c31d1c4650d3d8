// nn/moe/router.cpp — the Router base checks, the registry of routing schemes, option parsing.
//
// To add a built-in scheme: write nn/moe/<scheme>_router.{h,cpp} with a factory function and add
// one line to builtin_routers() below. Code outside nn/ calls register_router() instead.
#include "nn/moe/router.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include "core/error.h"
#include "core/kernels.h"
#include "nn/moe/aux_free_router.h"
#include "nn/moe/balanced_router.h"
#include "nn/moe/expert_choice_router.h"
#include "nn/moe/token_hash_router.h"
#include "nn/moe/relu_router.h"
#include "nn/moe/top_k_router.h"
#include "nn/moe/top_p_router.h"

namespace moelab {

namespace {

using Registry = std::map<std::string, RouterFactory>;

// The built-in schemes: one line each.
Registry builtin_routers() {
  Registry r;
  r["topk"] = make_top_k_router;
  r["expert-choice"] = make_expert_choice_router;
  r["top-p"] = make_top_p_router;
  r["aux-free"] = make_aux_free_router;
  r["balanced"] = make_balanced_router;
  r["token-hash"] = make_token_hash_router;
  r["relu"] = make_relu_router;
  return r;
}

// Filled on first use (a function-local static: no static-initialisation-order dependence).
Registry& registry() {
  static Registry r = builtin_routers();
  return r;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::string join(const std::vector<std::string>& names) {
  std::ostringstream s;
  for (std::size_t i = 0; i < names.size(); ++i) s << (i ? ", " : "") << "'" << names[i] << "'";
  return s.str();
}

const std::string* find_option(const RouterConfig& config, const std::string& key) {
  auto it = config.options.find(key);
  return it == config.options.end() ? nullptr : &it->second;
}

}  // namespace

// ---------------------------------------------------------------- Router
Router::Router(std::int64_t d, std::int64_t experts, std::int64_t k, const char* scheme)
    : d_(d), experts_(experts), k_(k), scheme_(scheme != nullptr ? scheme : "router") {
  MOELAB_CHECK(d >= 1, scheme, "d must be >= 1, got ", d);
  MOELAB_CHECK(experts >= 1, scheme, "experts must be >= 1, got ", experts);
  MOELAB_CHECK(k >= 1 && k <= experts, scheme, "k must be in [1, experts = ", experts, "], got ", k);
}

std::string Router::why_no_replay() const {
  return "the scheme does not take recorded experts (replay is defined for topk and aux-free)";
}

void Router::replay(const Tensor&) {
  MOELAB_CHECK(can_replay(), scheme_.c_str(), "cannot replay recorded experts: ", why_no_replay());
  MOELAB_CHECK(false, scheme_.c_str(), "can_replay() is true but replay() is not overridden");
}

void Router::check_input(const Variable& x, const char* scheme) const {
  check_defined(x.data(), scheme, "x");
  MOELAB_CHECK(x.rank() == 2 && x.size(1) == d_, scheme, "x must be [T, ", d_, "], got ", x.shape());
  MOELAB_CHECK(x.size(0) >= 1, scheme, "x must have at least one token, got ", x.shape());
}

RoutingPlan Router::route_sequences(const Variable& x, std::int64_t sequence_length) {
  check_sequence_length(x, sequence_length, "Router::route_sequences");
  // The length holds for this call only, also when route throws.
  struct Scope {
    std::int64_t& slot;
    ~Scope() { slot = 0; }
  } scope{sequence_length_};
  sequence_length_ = sequence_length;
  return route(x);
}

std::int64_t Router::current_sequence_length(const Variable& x) const {
  return sequence_length_ > 0 ? sequence_length_ : (x.defined() && x.rank() >= 1 ? x.size(0) : 1);
}

void Router::check_sequence_length(const Variable& x, std::int64_t sequence_length, const char* scheme) const {
  MOELAB_CHECK(x.defined() && x.rank() == 2, scheme, "x must be [T, ", d_, "], got ",
               x.defined() ? x.shape().str() : std::string("an undefined Variable"));
  MOELAB_CHECK(sequence_length >= 1 && x.size(0) % sequence_length == 0, scheme, "sequence_length ", sequence_length,
               " must be >= 1 and divide the ", x.size(0), " tokens");
}

const char* gate_sum_name(GateSum sum) {
  switch (sum) {
    case GateSum::Free: return "free";
    case GateSum::One: return "sums to 1";
    case GateSum::AtMostOne: return "sums to at most 1";
  }
  return "?";
}

Tensor counts_from_offsets(const Tensor& offsets) {
  // Through float64 (exact for any int32): the float ops run on every device; int32 ones do not.
  const Tensor f = kernels::cast(offsets, DType::Float64);
  const std::int64_t E = offsets.numel() - 1;
  return kernels::cast(kernels::sub(kernels::narrow(f, 0, 1, E), kernels::narrow(f, 0, 0, E)), DType::Int32);
}


// ---------------------------------------------------------------- registry
void register_router(const std::string& name, RouterFactory factory) {
  MOELAB_CHECK(!name.empty(), "register_router", "the name must not be empty");
  // Names end up in file names (the routers experiment's heat maps), CSV cells and `--set
  // router=NAME` / comma-separated lists, so they keep to characters that are safe in all three.
  MOELAB_CHECK(std::all_of(name.begin(), name.end(),
                           [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }),
               "register_router", "the name '", name, "' may hold only letters, digits, '-' and '_'");
  MOELAB_CHECK(static_cast<bool>(factory), "register_router", "the factory for '", name, "' is empty");
  std::lock_guard<std::mutex> lock(registry_mutex());
  Registry& r = registry();
  MOELAB_CHECK(r.find(name) == r.end(), "register_router", "a router named '", name, "' is already registered");
  r.emplace(name, std::move(factory));
}

std::vector<std::string> builtin_router_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : builtin_routers()) names.push_back(name);
  return names;  // a std::map's keys: sorted
}

std::vector<std::string> router_names() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry()) names.push_back(name);
  return names;  // std::map: already sorted
}

std::shared_ptr<Router> make_router(const std::string& name, const RouterConfig& config, Generator& gen) {
  RouterFactory factory;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = registry().find(name);
    if (it != registry().end()) factory = it->second;
  }
  if (!factory) fail("make_router", "unknown router '", name, "'; registered routers: ", join(router_names()));
  std::shared_ptr<Router> router = factory(config, gen);
  MOELAB_CHECK(router != nullptr, "make_router", "the factory for '", name, "' returned null");
  return router;
}

// ---------------------------------------------------------------- option helpers
void check_router_options(const RouterConfig& config, const std::vector<std::string>& allowed, const char* scheme) {
  std::vector<std::string> unknown;
  for (const auto& [key, value] : config.options)
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) unknown.push_back(key);
  if (!unknown.empty())
    fail(scheme, "unknown option", unknown.size() > 1 ? "s " : " ", join(unknown), "; known options: ", join(allowed));
}

double router_option_double(const RouterConfig& config, const std::string& key, double fallback, const char* scheme,
                            double min_value) {
  const std::string* text = find_option(config, key);
  if (!text) return fallback;
  char* end = nullptr;
  const double v = std::strtod(text->c_str(), &end);
  const bool parsed = !text->empty() && end == text->c_str() + text->size();
  MOELAB_CHECK(parsed && std::isfinite(v), scheme, "option '", key, "' must be a number, got '", *text, "'");
  MOELAB_CHECK(v >= min_value, scheme, "option '", key, "' must be >= ", min_value, ", got '", *text, "'");
  return v;
}

std::int64_t router_option_int(const RouterConfig& config, const std::string& key, std::int64_t fallback,
                               const char* scheme, std::int64_t min_value) {
  const double v = router_option_double(config, key, static_cast<double>(fallback), scheme,
                                        static_cast<double>(min_value));
  MOELAB_CHECK(v == std::floor(v) && v <= 1e15, scheme, "option '", key, "' must be a whole number, got '",
               *find_option(config, key), "'");
  return static_cast<std::int64_t>(v);
}

bool router_option_bool(const RouterConfig& config, const std::string& key, bool fallback, const char* scheme) {
  const std::string* text = find_option(config, key);
  if (!text) return fallback;
  if (*text == "true" || *text == "1") return true;
  if (*text == "false" || *text == "0") return false;
  fail(scheme, "option '", key, "' must be true, false, 1 or 0, got '", *text, "'");
}

std::string router_option_choice(const RouterConfig& config, const std::string& key, const std::string& fallback,
                                 const std::vector<std::string>& choices, const char* scheme) {
  const std::string* text = find_option(config, key);
  if (!text) return fallback;
  MOELAB_CHECK(std::find(choices.begin(), choices.end(), *text) != choices.end(), scheme, "option '", key,
               "' must be one of ", join(choices), ", got '", *text, "'");
  return *text;
}

}  // namespace moelab
