// nn/moe/relu_router.h — ReMoE's ReLU routing: each token uses every expert whose ReLU gate is
// positive, so the number of active experts varies per token and the router is differentiable.
//
// Wang, Z., Zhu, J., Chen, J. "ReMoE: Fully Differentiable Mixture-of-Experts with ReLU Routing",
// ICLR 2025 (arXiv 2412.14711); the released code's ReLURouter (a Megatron-LM fork) where the paper
// leaves a detail open.
//
//   x: [T, d], weight W: [E, d]
//   gates R = relu(x W^T)                   [T, E]
//   token t uses expert e  <=>  R_te > 0, with gate R_te (no normalisation)
// The plan is E wide (slot e is expert e, kUnusedSlot where R_te = 0; plan.slots counts the used
// ones), so k = RouterConfig::k is not a cap but the target: the sparsity that the L1 term steers
// to is 1 - k/E, i.e. k active experts per token on average.
//
// Sparsity control (the paper's adaptive L1 regularisation, its section 3.3):
//   loss_l1 = lambda * E * sum_e f_e P_e,  f_e = (tokens with R_te > 0) / (T k) (constant),
//                                          P_e = mean_t R_te
// (the Switch loss's shape on the ReLU gates: the L1 norm of R weighted by each expert's load, as
// the released code's switch_load_balancing_loss_func call), and after every optimizer step
//   lambda <- lambda * alpha^sign((1 - k/E) - S)
// where S is the mean sparsity (share of zero gates) of the training forwards since the last step
// (training mode with gradients only). One lambda steers every ReLU router of a model: a decoder
// built with moe_feed_forward links its layers' routers (share_control), so S is the mean over the
// layers, as the released code's shared moe_relu_l1_reg_coeff and moe_relu_sparsity; a router on
// its own steers itself. lambda lives in the host buffer "l1_coefficient" [1] (float64), so
// checkpoints save it and a resumed run continues it.
//
// Options (unknown keys and bad values are errors):
//   l1_init         lambda at the start, > 0 (default 1e-8, the paper's)
//   l1_multiplier   alpha > 1 (default 1.2, the paper's)
// Metrics: the toolkit's (mean_slots: active experts per token, load_max_over_mean, load_cv,
// max_violation), sparsity (the share of zero gates) and l1_coefficient (lambda).
// The gate is exactly 0 where unused, so the router's gradient flows through the used gates only;
// a token with no positive gate gets y_t = 0 (the block's residual alone).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/moe/router.h"

namespace moelab {

struct ReluRouterOptions {
  double l1_init = 1e-8;
  double l1_multiplier = 1.2;
};

ReluRouterOptions parse_relu_router_options(const RouterConfig& config);

// The lambda controller one model's ReLU routers share (see above).
class ReluRoutingControl {
 public:
  // A router adds its lambda buffer ([1] float64 on the host); the first one's value is everyone's.
  void add(Tensor lambda_buffer);
  // One training forward's sparsity (0-d, on its device): summed without reading the device.
  void record(const Tensor& sparsity);
  // After an optimizer step: lambda <- lambda * alpha^sign(target - mean S) in every buffer, once
  // per step however many routers report (the first report after forwards applies it).
  void after_step(double target_sparsity, double multiplier);
  double lambda() const;

 private:
  std::vector<Tensor> buffers_;
  Tensor sparsity_sum_;  // 0-d on the forwards' device
  std::int64_t forwards_ = 0;
};

class ReluRouter : public Router {
 public:
  ReluRouter(std::int64_t d, std::int64_t experts, std::int64_t k, const ReluRouterOptions& options, Generator& gen,
             DType dtype = DType::Float32);
  RoutingPlan route(const Variable& x) override;
  std::string why_no_replay() const override {
    return "ReLU routing uses every expert whose gate is positive, a varying number per token, which a replay of k experts a token cannot express";
  }
  void after_optimizer_step() override;
  GateSum gate_sum() const override { return GateSum::Free; }

  // Steer with `control` (shared with other routers) from now on; this router's lambda takes the
  // controller's.
  void share_control(const std::shared_ptr<ReluRoutingControl>& control);
  const std::shared_ptr<ReluRoutingControl>& control() const { return control_; }
  double target_sparsity() const;
  const Variable& weight() const { return weight_; }

 private:
  ReluRouterOptions options_;
  Variable weight_;
  Tensor lambda_;  // host buffer "l1_coefficient" [1], float64
  std::shared_ptr<ReluRoutingControl> control_;
};

// The registry's factory for "relu".
std::shared_ptr<Router> make_relu_router(const RouterConfig& config, Generator& gen);

// Links the ReLU routers of `model` (any module) to one controller, the first one's: what
// moe_feed_forward's decoders do. Returns how many it linked.
std::int64_t link_relu_routers(Module& model);

}  // namespace moelab
