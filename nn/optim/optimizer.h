// nn/optim/optimizer.h — the interface every optimizer implements (SGD, Adam, AdamW).
//
// An optimizer updates parameters in place from their accumulated gradients:
//   loss.backward();  optimizer.step();  optimizer.zero_grad();
// step() runs the optimizer's update() and then every step hook its parameters carry
// (nn/optim/step_hooks.h), so state that follows each step (a router's balancing bias) needs no
// call of its own in the training loop. An optimizer written elsewhere overrides update().
// Parameters come in groups that share hyperparameters (PyTorch's param_groups), e.g. one group
// with weight decay for matrices and one without for norms and biases. Each group keeps the
// learning rate it was built with as `base_lr`; a schedule (nn/optim/schedule.h) sets the
// current `lr` of every group to base_lr * factor(step) before each step.
//
// Checkpoints save and restore an optimizer through state_tensors(): every per-parameter buffer
// as a named tensor, "<buffer>.<i>" where i is the parameter's position in the flat order of all
// groups (group 0's params, then group 1's, ...), e.g. "exp_avg.3"; plus steps_taken().
// Per-parameter counters are 0-d float64 tensors (Adam's "step.3": updates of parameter 3, which
// lag steps_taken() for a parameter that had no gradient on some steps, as in PyTorch).
// Restoring them and the parameters resumes training bitwise identically.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace moelab {

struct ParamGroup {
  std::vector<Variable> params;
  double lr = 1e-3;            // current learning rate (schedules write it)
  double base_lr = -1;         // the learning rate the group was built with (< 0: copied from lr)
  double weight_decay = 0.0;   // meaning depends on the optimizer (L2 for SGD/Adam, decoupled for AdamW)
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<ParamGroup> groups);
  virtual ~Optimizer() = default;

  // One update of every parameter that has a gradient (parameters without one are skipped), then
  // the step hooks of the parameters (nn/optim/step_hooks.h: a module's code that must follow every
  // step, such as aux-loss-free balancing's bias update).
  void step();
  // Drops every parameter's gradient.
  void zero_grad();

  std::vector<ParamGroup>& groups() { return groups_; }
  const std::vector<ParamGroup>& groups() const { return groups_; }
  // Every group's lr := base_lr * factor.
  void set_lr_factor(double factor);
  // All parameters in flat order (group 0, then group 1, ...): index i names state "<buffer>.i".
  std::vector<Variable> flat_params() const;

  std::int64_t steps_taken() const { return steps_taken_; }
  void set_steps_taken(std::int64_t steps) { steps_taken_ = steps; }
  // Per-parameter buffers for checkpoints ("<buffer>.<i>"); buffers not created yet are omitted.
  virtual std::vector<std::pair<std::string, Tensor>> state_tensors() const = 0;
  // Restores what state_tensors() returned; checks names, shapes and dtypes and throws
  // moelab::Error saying exactly what does not match.
  virtual void load_state_tensors(const std::vector<std::pair<std::string, Tensor>>& state) = 0;

 protected:
  // The update itself: what each optimizer implements (step() runs it, then the hooks).
  virtual void update() = 0;

  std::vector<ParamGroup> groups_;
  std::int64_t steps_taken_ = 0;
};

}  // namespace moelab
