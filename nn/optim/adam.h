// nn/optim/adam.h — Adam (Kingma & Ba 2015) and AdamW (Loshchilov & Hutter 2019).
//
// PyTorch 1.13's torch.optim.Adam / AdamW (amsgrad off), per parameter p with gradient g, group
// lr and weight_decay wd, and t = the number of updates of this parameter including this one:
//   Adam  (L2 decay):        g = g + wd * p
//   AdamW (decoupled decay): p = p * (1 - lr * wd)
//   m = beta1 * m + (1 - beta1) * g                 (exp_avg, starts at 0)
//   v = beta2 * v + (1 - beta2) * g^2               (exp_avg_sq, starts at 0)
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// computed by the fused kernel kernels::adam_update (core/cpu/optim.cpp), in the parameter's
// dtype with PyTorch's rounding. Parameters without a gradient are skipped: their m, v and t stay
// as they were (t counts per parameter, as PyTorch's state['step'] does).
//
// Defaults are PyTorch's: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0 for Adam and
// 0.01 for AdamW. Groups built by hand carry their own lr and weight_decay (ParamGroup's default
// weight_decay is 0, so write it for AdamW groups that should decay).
//
// State, for each parameter updated at least once: "exp_avg.<i>", "exp_avg_sq.<i>" (the
// parameter's shape and dtype) and "step.<i>" (t as a 0-d float64 tensor).
//
//   AdamW opt(model.parameters(), {.lr = 3e-4});                   // weight_decay 0.01
//   AdamW opt({ParamGroup{.params = matrices, .lr = 3e-4, .weight_decay = 0.1},
//              ParamGroup{.params = norms, .lr = 3e-4}});           // no decay on norms
#pragma once

#include <optional>

#include "nn/optim/optimizer.h"

namespace moelab {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // Used by the one-group constructors only; unset: 0 for Adam, 0.01 for AdamW.
  std::optional<double> weight_decay = std::nullopt;
};

class Adam : public Optimizer {
 public:
  // Each group carries its lr and weight decay; `options` gives betas and eps (its lr and
  // weight_decay are not used).
  explicit Adam(std::vector<ParamGroup> groups, AdamOptions options = {});
  // One group with options.lr and options.weight_decay (default 0).
  Adam(std::vector<Variable> params, AdamOptions options = {});

  std::vector<std::pair<std::string, Tensor>> state_tensors() const override;
  void load_state_tensors(const std::vector<std::pair<std::string, Tensor>>& state) override;

  const AdamOptions& options() const { return options_; }
  bool decoupled() const { return decoupled_; }

 protected:
  Adam(std::vector<ParamGroup> groups, AdamOptions options, bool decoupled);
  void update() override;

 private:
  const char* name() const { return decoupled_ ? "AdamW" : "Adam"; }

  AdamOptions options_;
  bool decoupled_;
  // Per flat parameter; undefined (and step 0) until its first update.
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  std::vector<std::int64_t> step_;
};

class AdamW final : public Adam {
 public:
  explicit AdamW(std::vector<ParamGroup> groups, AdamOptions options = {});
  // One group with options.lr and options.weight_decay (default 0.01).
  AdamW(std::vector<Variable> params, AdamOptions options = {});
};

}  // namespace moelab
