// autograd/ops_softmax.cpp — softmax (over any axis) and log-softmax (over the last), each a
// forward/backward kernel pair.
//
// Both backward formulas need only the forward output y, which the grad_fn keeps:
//   softmax:      dx = y * (g - sum(g * y))       (the Jacobian diag(y) - y y^T applied to g)
//   log_softmax:  dx = g - exp(y) * sum(g)        (exp(y) is the softmax)
// with sums over the softmax's axis. Entries masked with -inf before a softmax have y = 0, hence get
// exactly zero gradient.
#include "autograd/ops_softmax.h"

#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {

Variable softmax(const Variable& x, int axis) {
  Tensor y = kernels::softmax(x.data(), axis);
  return record("softmax", y, {x}, [y, axis](const std::vector<Variable>&, const Tensor& g) {
    return std::vector<Tensor>{kernels::softmax_backward(y, g, axis)};
  });
}

Variable log_softmax(const Variable& x) {
  Tensor y = kernels::log_softmax(x.data());
  return record("log_softmax", y, {x}, [y](const std::vector<Variable>&, const Tensor& g) {
    return std::vector<Tensor>{kernels::log_softmax_backward(y, g)};
  });
}

}  // namespace moelab
