// nn/optim/sgd.h — stochastic gradient descent with momentum, dampening, Nesterov and L2 decay.
//
// PyTorch 1.13's torch.optim.SGD, per parameter p with gradient g (group lr and weight_decay wd):
//   d = g + wd * p
//   if momentum != 0:
//     buf = d                                   on the parameter's first update
//     buf = momentum * buf + (1 - dampening) * d  afterwards
//     d = nesterov ? d + momentum * buf : buf
//   p = p - lr * d
// computed by the fused kernel kernels::sgd_update (core/cpu/optim.cpp). Parameters without a
// gradient are skipped and keep their buffer untouched. Nesterov needs momentum > 0 and
// dampening 0, as in PyTorch.
//
// State: "momentum_buffer.<i>" for every parameter that has been updated with momentum != 0.
//
//   SGD sgd({ParamGroup{model.parameters(), /*lr=*/0.1}}, {.momentum = 0.9, .nesterov = true});
#pragma once

#include "nn/optim/optimizer.h"

namespace moelab {

struct SGDOptions {
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
};

class SGD final : public Optimizer {
 public:
  // Each group carries its lr and weight decay (L2: added to the gradient).
  explicit SGD(std::vector<ParamGroup> groups, SGDOptions options = {});
  // One group: every parameter with this lr and weight decay.
  SGD(std::vector<Variable> params, double lr, SGDOptions options = {}, double weight_decay = 0.0);

  std::vector<std::pair<std::string, Tensor>> state_tensors() const override;
  void load_state_tensors(const std::vector<std::pair<std::string, Tensor>>& state) override;

  const SGDOptions& options() const { return options_; }

 protected:
  void update() override;

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_buffer_;  // per flat parameter; undefined until its first update
};

}  // namespace moelab
