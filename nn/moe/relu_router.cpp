// nn/moe/relu_router.cpp — ReMoE's ReLU routing and its adaptive L1 control (see the header).
#include "nn/moe/relu_router.h"

#include <cmath>
#include <functional>

#include "autograd/no_grad.h"
#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/router_toolkit.h"

namespace moelab {

namespace {
constexpr const char* kScheme = "ReluRouter";
}  // namespace

ReluRouterOptions parse_relu_router_options(const RouterConfig& config) {
  check_router_options(config, {"l1_init", "l1_multiplier"}, kScheme);
  ReluRouterOptions o;
  o.l1_init = router_option_double(config, "l1_init", 1e-8, kScheme);
  o.l1_multiplier = router_option_double(config, "l1_multiplier", 1.2, kScheme);
  MOELAB_CHECK(o.l1_init > 0.0 && std::isfinite(o.l1_init), kScheme, "option 'l1_init' must be > 0, got ", o.l1_init);
  MOELAB_CHECK(o.l1_multiplier > 1.0 && std::isfinite(o.l1_multiplier), kScheme,
               "option 'l1_multiplier' must be > 1, got ", o.l1_multiplier);
  return o;
}

// ---------------------------------------------------------------- the shared lambda
void ReluRoutingControl::add(Tensor lambda_buffer) {
  if (!buffers_.empty()) kernels::copy(lambda_buffer, buffers_.front());  // everyone's lambda is the first's
  buffers_.push_back(std::move(lambda_buffer));
}

void ReluRoutingControl::record(const Tensor& sparsity) {
  sparsity_sum_ = sparsity_sum_.defined() && sparsity_sum_.device() == sparsity.device()
                      ? kernels::add(sparsity_sum_, sparsity)
                      : sparsity;
  ++forwards_;
}

double ReluRoutingControl::lambda() const {
  return buffers_.empty() ? 0.0 : buffers_.front().to_vector<double>()[0];
}

void ReluRoutingControl::after_step(double target_sparsity, double multiplier) {
  if (forwards_ == 0 || buffers_.empty()) return;  // another router of the model already applied it
  const double mean_sparsity =
      sparsity_sum_.to(Device::cpu()).to(DType::Float64).to_vector<double>()[0] / static_cast<double>(forwards_);
  const double gap = target_sparsity - mean_sparsity;
  double lambda = this->lambda();
  if (gap > 0) lambda *= multiplier;  // too many active experts: stronger L1
  if (gap < 0) lambda /= multiplier;  // too few: weaker
  for (Tensor& b : buffers_) kernels::copy(b, full({1}, lambda, DType::Float64));
  sparsity_sum_ = Tensor();
  forwards_ = 0;
}

// ---------------------------------------------------------------- the router
ReluRouter::ReluRouter(std::int64_t d, std::int64_t experts, std::int64_t k, const ReluRouterOptions& options,
                       Generator& gen, DType dtype)
    : Router(d, experts, k, kScheme), options_(options) {
  MOELAB_CHECK(dtype != DType::Int32, kScheme, "needs a float dtype, got ", dtype);
  MOELAB_CHECK(k < experts, kScheme, "k (the target active experts per token) must be below E = ", experts,
               " (k = E asks for no sparsity), got ", k);
  const double bound = 1.0 / std::sqrt(static_cast<double>(d));
  weight_ = register_parameter("weight", uniform({experts, d}, -bound, bound, gen, dtype));
  lambda_ = register_buffer("l1_coefficient", full({1}, options.l1_init, DType::Float64), BufferPlace::Host);
  control_ = std::make_shared<ReluRoutingControl>();
  control_->add(lambda_);
}

double ReluRouter::target_sparsity() const {
  return 1.0 - static_cast<double>(k()) / static_cast<double>(experts());
}

void ReluRouter::share_control(const std::shared_ptr<ReluRoutingControl>& control) {
  MOELAB_CHECK(control != nullptr, kScheme, "share_control needs a controller");
  if (control == control_) return;
  control_ = control;
  control_->add(lambda_);
}

void ReluRouter::after_optimizer_step() { control_->after_step(target_sparsity(), options_.l1_multiplier); }

RoutingPlan ReluRouter::route(const Variable& x) {
  check_input(x, kScheme);
  MOELAB_CHECK(x.dtype() == weight_.dtype(), kScheme, "x is ", x.dtype(), " but the router weight is ", weight_.dtype());
  const std::int64_t T = x.size(0), E = experts();
  const Variable logits = matmul(x, weight_, false, /*trans_b=*/true);  // [T, E]
  const Variable gates = relu(logits);                                   // [T, E]
  const Tensor used = positive_mask(gates.data());                       // 0/1 [T, E]

  // Slot e is expert e where its gate is positive (ids constant; the gates carry the gradient).
  const Tensor every = kernels::mul(arange(0.0, static_cast<double>(E), 1.0, DType::Float64, x.device()).reshape({1, E}),
                                    ones({T, 1}, DType::Float64, x.device()));  // [T, E]: 0 .. E-1 per row
  PlanParts parts;
  parts.chosen = select_ids(kernels::cast(every, DType::Int32), used, kUnusedSlot);
  parts.gates = gates;
  parts.variable_slots = true;
  const double lambda = lambda_.to_vector<double>()[0];
  const Tensor sparsity = kernels::sub(1.0, kernels::mean(used));  // 0-d: share of zero gates
  parts.extra = [sparsity, lambda]() {
    return std::map<std::string, double>{{"sparsity", host_doubles(sparsity)[0]}, {"l1_coefficient", lambda}};
  };
  RoutingPlan plan = make_routing_plan(parts, E);

  // The adaptive L1 term: lambda E sum_e f_e mean_t R_te, f_e = active tokens of e / (T k).
  const Tensor f = kernels::div(kernels::cast(plan.tokens_per_expert, x.dtype()), static_cast<double>(T * k()));
  plan.aux_losses.emplace_back("l1_reg", switch_balance_loss(gates, f, lambda));
  if (is_training() && grad_enabled()) control_->record(sparsity);
  return plan;
}

std::shared_ptr<Router> make_relu_router(const RouterConfig& config, Generator& gen) {
  return std::make_shared<ReluRouter>(config.d, config.experts, config.k, parse_relu_router_options(config), gen,
                                      config.dtype);
}

std::int64_t link_relu_routers(Module& model) {
  std::shared_ptr<ReluRoutingControl> shared;
  std::int64_t linked = 0;
  const std::function<void(Module&)> visit = [&](Module& m) {
    if (auto* r = dynamic_cast<ReluRouter*>(&m)) {
      if (!shared) shared = r->control();
      r->share_control(shared);
      ++linked;
    }
    for (const auto& [name, child] : m.children()) visit(*child);
  };
  visit(model);
  return linked;
}

}  // namespace moelab
