// tasks/common/router_settings.cpp — see router_settings.h.
#include "tasks/common/router_settings.h"

#include <sstream>
#include <vector>

#include "core/random.h"
#include "nn/moe/router.h"

namespace moelab {

void add_router_settings(Settings& s, const std::string& whose) {
  s.add_text("router", "topk",
             "routing scheme of " + whose + ", by its name in the router registry (nn/moe/router.h). "
                 "expert-choice and balanced rank the whole batch, so in a decoder a token's experts depend on later "
                 "tokens (they see the future: fine to study, not a causal language model); balanced also "
                 "reads the scores back to the host once per layer per training step",
             router_names());  // the choices: what is registered when the settings are declared
  s.add_text("router_options", "",
             "options for the router's factory as key:value,key:value (empty: none; each scheme's header in "
             "nn/moe/ lists its keys, e.g. threshold:0.5 for top-p, update_rate:0.01 for aux-free, "
             "load_balance:0.01 for topk)",
             {}, /*may_be_empty=*/true);
}

std::map<std::string, std::string> parse_router_options(const std::string& text) {
  std::map<std::string, std::string> options;
  if (text.empty()) return options;
  if (text.back() == ',')
    throw UsageError("setting 'router_options': '" + text + "' ends with a comma (the list is key:value,key:value)");
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const auto colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      throw UsageError("setting 'router_options': '" + item + "' is not key:value (the list is key:value,key:value, " +
                       "e.g. threshold:0.5)");
    const std::string key = item.substr(0, colon);
    if (!options.emplace(key, item.substr(colon + 1)).second)
      throw UsageError("setting 'router_options': the key '" + key + "' is given twice in '" + text + "'");
  }
  return options;
}

std::string router_options_text(const std::map<std::string, std::string>& options) {
  std::string text;
  for (const auto& [key, value] : options) text += (text.empty() ? "" : ",") + key + ":" + value;
  return text;
}

void apply_router_settings(const Settings& s, std::vector<ModelSpec>& models) {
  const std::map<std::string, std::string> options = parse_router_options(s.text("router_options"));
  for (ModelSpec& m : models)
    if (m.moe()) m.router = s.text("router"), m.router_options = options;
}

void check_router(const std::string& name, const std::map<std::string, std::string>& options, std::int64_t d,
                  std::int64_t experts, std::int64_t k) {
  Generator gen(0);
  try {
    make_router(name, RouterConfig{d, experts, k, DType::Float32, options}, gen);
  } catch (const Error& err) {
    const std::string given = router_options_text(options);
    throw UsageError("router '" + name + "'" + (given.empty() ? "" : " with options '" + given + "'") + " for d = " +
                     std::to_string(d) + ", " + std::to_string(experts) + " experts, k = " + std::to_string(k) +
                     ": " + err.what());
  }
}

}  // namespace moelab
