// examples/hash_router.h — a routing scheme defined outside nn/: a hash router by locality-sensitive
// hashing, header-only so that two example programs share it: examples/custom_router.cpp (trains it
// in a character-level MoE decoder and runs its router contract) and examples/moelab_with_hash.cpp
// (the `moelab` command line with it registered, so `--set router=hash` runs the experiments with it).
//
// The scheme: the router owns b = ceil(log2 E) fixed random hyperplanes r_1 .. r_b (drawn once when
// it is built, never trained) and sends token t to the expert whose number has bit i set when
// x_t . r_i > 0:
//
//   expert(t) = (sum_i [x_t . r_i > 0] 2^i) mod E,      gate 1,      k = 1
//
// so tokens whose representations point the same way share an expert (Hash Layers, Roller et al.
// 2021, hash the token id; this hashes the representation instead, which is all a Router sees).
// The router has no parameters and its gates are constant, so the task loss trains the experts and
// the rest of the model only. The hyperplanes are a buffer (Module::register_buffer): checkpoints
// save them with the model. Every step runs on x's device with the toolkit's pieces
// (nn/moe/router_toolkit.h: positive_mask for the bits, make_routing_plan for the counts, groups
// and metrics), so nothing is read back.
//
// Registering it: register_router("hash", make_hash_router) before the first model is built; then
// MoEConfig{.router = "hash"} builds it in every MoE layer. Options: seed (a whole number: the
// hyperplanes from their own stream instead of the model's generator).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>

#include "core/error.h"
#include "core/factories.h"
#include "nn/moe/router.h"
#include "nn/moe/router_toolkit.h"

namespace moelab::examples {

class HashRouter : public Router {
 public:
  static constexpr const char* kScheme = "HashRouter";

  // planes: [b, d], the fixed hyperplanes (b = 0 when E = 1). They are a buffer, not a parameter:
  // never trained, but saved by checkpoints with the model (nn/module.h).
  HashRouter(std::int64_t d, std::int64_t experts, const Tensor& planes) : Router(d, experts, /*k=*/1, kScheme) {
    if (planes.numel() > 0) planes_ = register_buffer("planes", planes);
  }

  // x: [T, d] -> plan; every step on x's device (nothing read back), with the toolkit's pieces.
  RoutingPlan route(const Variable& x) override {
    check_input(x, kScheme);
    const std::int64_t T = x.size(0), E = experts();
    using kernels::BinaryOp;
    Tensor code = zeros({T, 1}, x.dtype(), x.device());
    if (planes_.defined()) {
      const std::int64_t b = planes_.size(0);
      const Tensor bits = positive_mask(kernels::matmul(x.data(), planes_, false, /*trans_b=*/true));  // [T, b] 0/1
      const Tensor i = arange(0.0, static_cast<double>(b), 1.0, x.dtype(), x.device()).reshape({b, 1});
      const Tensor powers = kernels::pow(2.0, i);  // 2^i, made on the device: [b, 1]
      code = kernels::matmul(bits, powers);  // [T, 1]
      // code mod E = code - E * trunc(code / E) (casting to int32 truncates)
      const Tensor q = kernels::cast(kernels::cast(kernels::div(code, static_cast<double>(E)),
                                                   DType::Int32), x.dtype());
      code = kernels::sub(code, kernels::mul(q, static_cast<double>(E)));
    }
    PlanParts parts;                                   // nn/moe/router_toolkit.h
    parts.chosen = kernels::cast(code, DType::Int32);  // int32 [T, 1]
    parts.gates = Variable(ones({T, 1}, x.dtype(), x.device()));  // constant: the router does not learn
    return make_routing_plan(parts, E);                // counts, groups, metrics (load_cv, ...)
  }

 private:
  Tensor planes_;
};

// The factory the registry calls with the MoE layer's RouterConfig and the model's Generator.
inline std::shared_ptr<Router> make_hash_router(const RouterConfig& config, Generator& gen) {
  check_router_options(config, {"seed"}, HashRouter::kScheme);  // unknown keys are errors
  MOELAB_CHECK(config.k == 1, HashRouter::kScheme, "routes each token to one expert: k must be 1, got ", config.k);
  MOELAB_CHECK(config.d >= 1 && config.experts >= 1, HashRouter::kScheme, "d and experts must be >= 1");
  std::int64_t b = 0;
  while ((std::int64_t{1} << b) < config.experts) ++b;  // ceil(log2 E) hyperplanes
  // With "seed" the hyperplanes come from their own stream; otherwise from the model's, as a
  // learned router's initial weights would.
  Generator own(0);
  Generator* source = &gen;
  if (config.options.count("seed")) {
    const double s = router_option_double(config, "seed", 0.0, HashRouter::kScheme);
    MOELAB_CHECK(s == std::floor(s) && s < 1.8e19, HashRouter::kScheme, "option 'seed' must be a whole number, got '",
                 config.options.at("seed"), "'");
    own = Generator(static_cast<std::uint64_t>(s));
    source = &own;
  }
  const Tensor planes = b > 0 ? normal({b, config.d}, 0.0, 1.0, *source, config.dtype) : Tensor();
  return std::make_shared<HashRouter>(config.d, config.experts, planes);
}

}  // namespace moelab::examples
