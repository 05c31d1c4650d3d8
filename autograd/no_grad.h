// autograd/no_grad.h — switching graph recording off (evaluation, optimizer updates).
//
// While a NoGradGuard is alive on a thread, differentiable ops compute their values but record no
// Node: the results are plain Variables with requires_grad() == false, and no memory is kept for
// a backward pass. Guards nest; each restores the state it found. The flag is thread_local, so a
// guard on one thread never affects another.
//
//   {
//     NoGradGuard no_grad;
//     Variable logits = model.forward(x);   // no graph
//   }
#pragma once

namespace moelab {

// Whether ops currently record graph nodes (true unless a NoGradGuard is alive on this thread).
bool grad_enabled();

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace moelab
