// nn/optim/step_hooks.h — code that must run after every optimizer step, registered by the module
// that needs it, so that no training loop can forget to call it.
//
// Some state follows training outside the gradient: aux-loss-free balancing nudges its expert bias
// toward an even load after each step (nn/moe/aux_free_router.h). Training loops used to call
// routers_after_optimizer_step(model) after opt.step(); a loop that forgot it trained a router that
// silently stopped balancing. Now the module attaches a hook to one of its parameters, and
// Optimizer::step() (nn/optim/optimizer.h) runs, after its update, every hook attached to a
// parameter it holds, each once, in registration order:
//
//   class MyRouter : public Router {
//     MyRouter(...) { weight_ = register_parameter("weight", ...);
//                     step_hook_ = StepHook(weight_, [this] { after_optimizer_step(); }); }
//     StepHook step_hook_;  // unregisters when the module goes away
//   };
//
// A hook belongs to the parameter's autograd node, so every handle to the parameter (the module's,
// the optimizer's copy) finds it; a parameter without one (requires_grad off, i.e. frozen) cannot
// carry a hook (moelab::Error), and an optimizer that does not hold the parameter never runs it.
// Hooks run on the thread that calls step(); registering and running are safe from several threads.
#pragma once

#include <functional>
#include <vector>

#include "autograd/variable.h"

namespace moelab {

class StepHook {
 public:
  StepHook() = default;  // none
  // Attaches fn to `parameter` (a leaf that requires a gradient, else moelab::Error).
  StepHook(const Variable& parameter, std::function<void()> fn);
  ~StepHook();
  StepHook(StepHook&& other) noexcept;
  StepHook& operator=(StepHook&& other) noexcept;
  StepHook(const StepHook&) = delete;
  StepHook& operator=(const StepHook&) = delete;

  bool active() const { return id_ >= 0; }

 private:
  void release();
  long id_ = -1;
};

// Runs every hook attached to any of `params`, each once, in registration order (Optimizer::step
// calls it after updating). The number of hooks run.
int run_step_hooks(const std::vector<Variable>& params);

}  // namespace moelab
