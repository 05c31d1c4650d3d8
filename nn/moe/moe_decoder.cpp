// nn/moe/moe_decoder.cpp — the MoE FFN factory, parameter counts and per-layer aux losses.
#include "nn/moe/moe_decoder.h"

#include "autograd/ops.h"
#include "nn/moe/relu_router.h"

namespace moelab {

FeedForwardFactory moe_feed_forward(const MoEConfig& moe) {
  // ReLU routers (nn/moe/relu_router.h) of one decoder share one L1 controller: a new one at layer
  // 0, handed to every later layer's router (the cell is shared by the factory's copies).
  auto relu_control = std::make_shared<std::shared_ptr<ReluRoutingControl>>();
  return [moe, relu_control](const DecoderConfig& c, std::int64_t layer, Generator& gen) -> std::shared_ptr<FeedForward> {
    MoEConfig m = moe;
    m.d = c.d;
    m.dtype = c.dtype;
    m.ffn = moe.ffn > 0 ? moe.ffn : c.ffn_width();
    auto made = std::make_shared<MoELayer>(m, gen);
    if (auto* relu = dynamic_cast<ReluRouter*>(&made->router())) {
      if (layer == 0 || !*relu_control) *relu_control = relu->control();
      relu->share_control(*relu_control);
    }
    return made;
  };
}

namespace {
const MoELayer* as_moe(const Decoder& model, std::int64_t i) {
  return dynamic_cast<const MoELayer*>(&model.layer(i).ffn());
}
}  // namespace

MoECounts moe_parameter_counts(const Decoder& model) {
  MoECounts c;
  c.total = model.num_parameters();
  c.non_embedding = model.num_non_embedding_parameters();
  c.active = c.non_embedding;
  for (std::int64_t i = 0; i < model.config().layers; ++i) {
    if (const MoELayer* moe = as_moe(model, i)) {
      const ExpertBank& bank = moe->experts();
      c.active -= (bank.experts() - moe->router().k()) * bank.parameters_per_expert();
    }
  }
  return c;
}

std::map<std::string, double> moe_metrics(const Decoder& model) {
  std::map<std::string, double> out;
  for (std::int64_t i = 0; i < model.config().layers; ++i) {
    const MoELayer* moe = as_moe(model, i);
    if (moe == nullptr) continue;
    for (const auto& [name, value] : moe->last_metrics()) out["layers." + std::to_string(i) + "." + name] = value;
  }
  return out;
}

}  // namespace moelab
