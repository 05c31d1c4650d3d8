// tasks/common/load_probe.cpp — see load_probe.h.
#include "tasks/common/load_probe.h"

#include <cstdlib>

#include "autograd/no_grad.h"
#include "core/error.h"
#include "nn/moe/moe_layer.h"
#include "nn/moe/router_toolkit.h"
#include "nn/moe/routing_analysis.h"

namespace moelab {

namespace {

std::vector<const MoELayer*> moe_layers(const Decoder& model) {
  std::vector<const MoELayer*> out;
  for (std::int64_t i = 0; i < model.config().layers; ++i)
    if (const auto* m = dynamic_cast<const MoELayer*>(&model.layer(i).ffn())) out.push_back(m);
  return out;
}

}  // namespace

std::map<std::string, double> LoadSnapshot::as_metrics() const {
  std::map<std::string, double> out = mean;
  for (std::size_t l = 0; l < relative.size(); ++l)
    for (std::size_t e = 0; e < relative[l].size(); ++e)
      out["load.l" + std::to_string(l) + ".e" + std::to_string(e)] = relative[l][e];
  return out;
}

LoadSnapshot read_load(const Decoder& model) {
  const std::vector<const MoELayer*> layers = moe_layers(model);
  MOELAB_CHECK(!layers.empty(), "read_load", "the decoder has no MoE layer");
  LoadSnapshot snap;
  std::map<std::string, std::pair<double, std::size_t>> sums;  // metric -> (sum, layers reporting it)
  for (const MoELayer* layer : layers) {
    MOELAB_CHECK(layer->last_tokens_per_expert().defined(), "read_load", "no forward has run yet");
    const std::vector<double> counts = host_doubles(layer->last_tokens_per_expert());
    double total = 0;
    for (double c : counts) total += c;
    const double mean = total / static_cast<double>(counts.size());
    std::vector<double> rel;
    for (double c : counts) rel.push_back(mean > 0 ? c / mean : 0.0);
    snap.relative.push_back(rel);
    for (const auto& [name, value] : layer->last_metrics()) {
      auto& [sum, n] = sums[name];
      sum += value, ++n;
    }
  }
  for (const auto& [name, sn] : sums)
    if (sn.second == layers.size()) snap.mean[name] = sn.first / static_cast<double>(sn.second);
  return snap;
}

bool parse_load_name(const std::string& name, std::int64_t& layer, std::int64_t& expert) {
  if (name.rfind("load.l", 0) != 0) return false;
  const std::size_t dot = name.find(".e", 6);
  if (dot == std::string::npos || dot == 6 || dot + 2 >= name.size()) return false;
  char* end = nullptr;
  const std::string l = name.substr(6, dot - 6), e = name.substr(dot + 2);
  layer = std::strtoll(l.c_str(), &end, 10);
  if (*end != '\0') return false;
  expert = std::strtoll(e.c_str(), &end, 10);
  return *end == '\0' && layer >= 0 && expert >= 0;
}

double RoutingProbe::drift(Decoder& model) {
  MOELAB_CHECK(ids.defined(), "RoutingProbe", "no probe batch");
  {
    NoGradGuard no_grad;
    EvalModeGuard eval(model);
    model.forward(ids.to(model.device()));
  }
  std::vector<std::vector<std::int32_t>> now;
  std::int64_t k = 0;
  for (const MoELayer* layer : moe_layers(model)) {
    now.push_back(layer->last_experts().to(Device::cpu()).to_vector<std::int32_t>());
    k = layer->last_experts().size(1);
  }
  double total = 0;
  const bool first = last.empty();
  if (!first)
    for (std::size_t l = 0; l < now.size(); ++l) total += routing_drift(last[l], now[l], k);
  last = std::move(now);
  return first || last.empty() ? -1.0 : total / static_cast<double>(last.size());
}

std::int64_t parameters_per_expert(const Decoder& model) {
  const std::vector<const MoELayer*> layers = moe_layers(model);
  return layers.empty() ? 0 : layers.front()->experts().parameters_per_expert();
}

}  // namespace moelab
