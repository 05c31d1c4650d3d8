// tasks/softmoe_l2norm/l2norm.cpp — see l2norm.h.
#include "tasks/softmoe_l2norm/l2norm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factories.h"
#include "nn/loss.h"
#include "nn/optim/adam.h"
#include "nn/train_loop.h"

namespace moelab::l2norm {

std::int64_t ModelSpec::hidden() const {
  MOELAB_CHECK(d >= 1 && experts >= 1 && width_factor >= 1 && (width_factor * d) % experts == 0, "l2norm",
               "the experts' hidden width ", width_factor, " * d / n needs n to divide ", width_factor, " * d, got d ",
               d, ", n ", experts);
  return width_factor * d / experts;
}

std::string ModelSpec::tokenisation() const { return std::to_string(tokens()) + "x" + std::to_string(d); }

std::int64_t ModelSpec::expert_parameters() const {
  const std::int64_t h = hidden();
  return experts * (2 * d * h + (bias ? h + d : 0));
}

std::int64_t ModelSpec::router_parameters() const { return d * experts + (normalize ? 1 : 0); }

SoftMoEConfig ModelSpec::config() const {
  MOELAB_CHECK(input_dim >= 1 && d >= 1 && input_dim % d == 0, "l2norm", "the token width d must divide the input ",
               "length, got d ", d, " and ", input_dim);
  SoftMoEConfig c;
  c.d = d;
  c.experts = experts;
  c.slots_per_expert = 1;
  c.hidden = hidden();
  c.normalize = normalize;
  c.slot_inputs = parse_slot_inputs(slot_inputs);
  c.phi_init = parse_phi_init(phi_init);
  c.bias = bias;
  return c;
}

L2NormModel::L2NormModel(const ModelSpec& spec, Generator& gen) : spec_(spec) {
  moe_ = register_module("moe", std::make_shared<SoftMoE>(spec.config(), gen));
}

Variable L2NormModel::layer_output(const Variable& x) { return moe_->forward(x); }

Variable L2NormModel::forward(const Variable& x) { return summation_head(layer_output(x)); }

// y: [B, m, d] -> [B]
Variable summation_head(const Variable& y) {
  MOELAB_CHECK(y.rank() == 3, "l2norm::summation_head", "needs [B, m, d], got ", y.shape());
  return sum(reshape(y, {y.size(0), y.size(1) * y.size(2)}), 1);
}

Batch draw_batch(std::int64_t batch, std::int64_t input_dim, std::int64_t d, double variance, Generator& gen) {
  MOELAB_CHECK(batch >= 1 && d >= 1 && input_dim % d == 0 && variance > 0, "l2norm::draw_batch",
               "needs batch >= 1, d dividing input_dim and variance > 0, got batch ", batch, ", input_dim ",
               input_dim, ", d ", d, ", variance ", variance);
  const Tensor flat = normal({batch, input_dim}, 0.0, std::sqrt(variance), gen);  // [B, k]
  const std::vector<float> v = flat.to_vector<float>();
  std::vector<float> norms(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) {
    double s = 0;
    for (std::int64_t j = 0; j < input_dim; ++j) {
      const double e = v[static_cast<std::size_t>(b * input_dim + j)];
      s += e * e;
    }
    norms[static_cast<std::size_t>(b)] = static_cast<float>(std::sqrt(s));
  }
  return {flat.reshape({batch, input_dim / d, d}), from_vector(norms, {batch})};
}

double expected_norm(std::int64_t k, double variance) {
  // E chi_k = sqrt(2) Gamma((k+1)/2) / Gamma(k/2), in logs to stay finite for large k
  const double kk = static_cast<double>(k);
  return std::sqrt(variance) * std::sqrt(2.0) * std::exp(std::lgamma((kk + 1) / 2) - std::lgamma(kk / 2));
}

double constant_predictor_loss(std::int64_t k, double variance) {
  const double mean = expected_norm(k, variance);
  return variance * static_cast<double>(k) - mean * mean;  // E||x||^2 - (E||x||)^2
}

std::vector<double> train(L2NormModel& model, const TrainOptions& o, Generator& data_gen,
                          const std::function<void(std::int64_t, double)>& on_step) {
  MOELAB_CHECK(o.steps >= 1 && o.batch >= 1 && o.lr > 0, "l2norm::train", "needs steps, batch >= 1 and lr > 0");
  Adam opt(model.parameters(), AdamOptions{.lr = o.lr});  // PyTorch's defaults otherwise, no weight decay
  const ModelSpec& spec = model.spec();
  std::vector<double> losses;
  losses.reserve(static_cast<std::size_t>(o.steps));
  LoopHooks hooks;
  hooks.batch_loss = [&](std::int64_t) {
    const Batch b = draw_batch(o.batch, spec.input_dim, spec.d, o.variance, data_gen);
    const Device device = model.device();  // the samples are drawn on the host, then copied
    StepLoss s;
    s.loss = nn::mse_loss(model.forward(Variable(b.x.to(device))), Variable(b.y.to(device)));
    s.items = o.batch;
    return s;
  };
  hooks.on_step = [&](const LoopState& state, double loss) {
    losses.push_back(loss);
    if (on_step) on_step(state.step, loss);
  };
  hooks.summary = [&](const LoopState&) {
    char msg[128];
    std::snprintf(msg, sizeof msg, "final loss %.4f (mean of the last %g%% of the steps)",
                  tail_mean(losses, o.final_fraction), 100 * o.final_fraction);
    return std::string(msg);
  };
  train_loop(model, opt, LoopOptions{.steps = o.steps, .label = o.label, .loss_name = "mse"}, hooks);
  return losses;
}

double tail_mean(const std::vector<double>& values, double fraction) {
  if (values.empty()) return NAN;
  const std::size_t n = values.size();
  const std::size_t count =
      std::min(n, std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(n) - 1e-9))));
  double s = 0;
  for (std::size_t i = n - count; i < n; ++i) s += values[i];
  return s / static_cast<double>(count);
}

std::uint64_t name_hash(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace moelab::l2norm
