// nn/optim/adam.cpp — Adam's and AdamW's step and state (the formulas are in adam.h and
// core/cpu/optim.cpp; the two differ only in how weight decay enters).
#include "nn/optim/adam.h"

#include <cmath>

#include "core/factories.h"
#include "core/kernels.h"
#include "nn/optim/state.h"

namespace moelab {
namespace {

const std::vector<optim_state::BufferSpec>& adam_buffers() {
  static const std::vector<optim_state::BufferSpec> specs = {{"exp_avg", optim_state::BufferKind::Element},
                                                             {"exp_avg_sq", optim_state::BufferKind::Element},
                                                             {"step", optim_state::BufferKind::Counter}};
  return specs;
}

std::vector<ParamGroup> single_group(std::vector<Variable> params, const AdamOptions& options,
                                     double default_weight_decay) {
  ParamGroup g;
  g.params = std::move(params);
  g.lr = options.lr;
  g.weight_decay = options.weight_decay.value_or(default_weight_decay);
  return {std::move(g)};
}

}  // namespace

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options, bool decoupled)
    : Optimizer(std::move(groups)), options_(options), decoupled_(decoupled) {
  const char* op = name();
  MOELAB_CHECK(std::isfinite(options_.beta1) && options_.beta1 >= 0 && options_.beta1 < 1, op,
               "beta1 must be in [0, 1), got ", options_.beta1);
  MOELAB_CHECK(std::isfinite(options_.beta2) && options_.beta2 >= 0 && options_.beta2 < 1, op,
               "beta2 must be in [0, 1), got ", options_.beta2);
  MOELAB_CHECK(std::isfinite(options_.eps) && options_.eps >= 0, op, "eps must be finite and >= 0, got ",
               options_.eps);
  const std::size_t n = flat_params().size();
  exp_avg_.resize(n);
  exp_avg_sq_.resize(n);
  step_.assign(n, 0);
}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Adam(std::move(groups), options, false) {}

Adam::Adam(std::vector<Variable> params, AdamOptions options)
    : Adam(single_group(std::move(params), options, 0.0), options, false) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamOptions options) : Adam(std::move(groups), options, true) {}

AdamW::AdamW(std::vector<Variable> params, AdamOptions options)
    : Adam(single_group(std::move(params), options, 0.01), options, true) {}

void Adam::update() {
  std::size_t i = 0;
  for (ParamGroup& g : groups_) {
    for (Variable& p : g.params) {
      const std::size_t index = i++;
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      // New buffers are kept only once the update succeeded (adam_update checks its arguments).
      Tensor m = exp_avg_[index], v = exp_avg_sq_[index];
      if (!m.defined()) {
        m = zeros(p.shape(), p.dtype(), p.device());
        v = zeros(p.shape(), p.dtype(), p.device());
      }
      kernels::AdamHyper h;
      h.lr = g.lr;
      h.beta1 = options_.beta1;
      h.beta2 = options_.beta2;
      h.eps = options_.eps;
      h.weight_decay = g.weight_decay;
      h.decoupled = decoupled_;
      h.step = step_[index] + 1;
      kernels::adam_update(p.data(), grad, m, v, h);
      exp_avg_[index] = m;
      exp_avg_sq_[index] = v;
      step_[index] = h.step;
    }
  }
  ++steps_taken_;
}

std::vector<std::pair<std::string, Tensor>> Adam::state_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (std::size_t i = 0; i < step_.size(); ++i) {
    if (!exp_avg_[i].defined()) continue;
    const std::string index = std::to_string(i);
    out.emplace_back("exp_avg." + index, exp_avg_[i].clone());
    out.emplace_back("exp_avg_sq." + index, exp_avg_sq_[i].clone());
    out.emplace_back("step." + index, optim_state::counter_tensor(step_[i]));
  }
  return out;
}

void Adam::load_state_tensors(const std::vector<std::pair<std::string, Tensor>>& state) {
  const std::string op = std::string(name()) + "::load_state_tensors";
  optim_state::State s = optim_state::read_state(op.c_str(), state, adam_buffers(), flat_params());
  exp_avg_ = std::move(s.buffers[0]);
  exp_avg_sq_ = std::move(s.buffers[1]);
  for (std::size_t i = 0; i < step_.size(); ++i)
    step_[i] = s.buffers[2][i].defined() ? optim_state::counter_value(s.buffers[2][i]) : 0;
}

}  // namespace moelab
