// core/kernels/optim.cpp — checks and dispatch for the fused, in-place optimizer updates.
//
// adam_update and sgd_update change param and their state buffers in place, one pass over memory
// (the formulas, PyTorch 1.13's, are in core/cpu/optim.cpp). The checks here:
//   - param is a defined float tensor; grad and every buffer used have exactly its shape, dtype
//     and device (no broadcasting: an optimizer state is per element);
//   - no two of them share storage (an update reading a buffer it is writing through another
//     handle would silently compute garbage);
//   - hyperparameters are finite and in PyTorch's ranges: lr >= 0, eps >= 0, 0 <= beta < 1,
//     weight_decay >= 0, step >= 1; momentum >= 0, nesterov needs momentum > 0 and dampening 0.
// Empty tensors are fine (nothing to do).
#include <cmath>

#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {
namespace {

void check_state(const Tensor& param, const Tensor& t, const char* op, const char* what) {
  check_defined(t, op, what);
  check_same_device(param, t, op);
  MOELAB_CHECK(t.dtype() == param.dtype(), op, what, " is ", t.dtype(), " but param is ", param.dtype());
  MOELAB_CHECK(t.shape() == param.shape(), op, what, " has shape ", t.shape(), " but param has shape ",
               param.shape());
}

void check_distinct(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name, const char* op) {
  MOELAB_CHECK(!a.shares_storage_with(b), op, a_name, " and ", b_name, " share storage; each must be its own tensor");
}

void check_range(double value, bool ok, const char* op, const char* what, const char* rule) {
  MOELAB_CHECK(std::isfinite(value) && ok, op, what, " must be finite and ", rule, ", got ", value);
}

}  // namespace

void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamHyper& h) {
  const char* op = "adam_update";
  check_floating(param, op, "param");
  check_state(param, grad, op, "grad");
  check_state(param, exp_avg, op, "exp_avg");
  check_state(param, exp_avg_sq, op, "exp_avg_sq");
  check_distinct(param, "param", grad, "grad", op);
  check_distinct(param, "param", exp_avg, "exp_avg", op);
  check_distinct(param, "param", exp_avg_sq, "exp_avg_sq", op);
  check_distinct(grad, "grad", exp_avg, "exp_avg", op);
  check_distinct(grad, "grad", exp_avg_sq, "exp_avg_sq", op);
  check_distinct(exp_avg, "exp_avg", exp_avg_sq, "exp_avg_sq", op);
  check_range(h.lr, h.lr >= 0, op, "lr", ">= 0");
  check_range(h.beta1, h.beta1 >= 0 && h.beta1 < 1, op, "beta1", "in [0, 1)");
  check_range(h.beta2, h.beta2 >= 0 && h.beta2 < 1, op, "beta2", "in [0, 1)");
  check_range(h.eps, h.eps >= 0, op, "eps", ">= 0");
  check_range(h.weight_decay, h.weight_decay >= 0, op, "weight_decay", ">= 0");
  MOELAB_CHECK(h.step >= 1, op, "step counts this update too, so it must be >= 1, got ", h.step);
  if (param.numel() == 0) return;
  backend(param.device()).adam_update(param, grad, exp_avg, exp_avg_sq, h);
}

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdHyper& h) {
  const char* op = "sgd_update";
  check_floating(param, op, "param");
  check_state(param, grad, op, "grad");
  check_distinct(param, "param", grad, "grad", op);
  check_range(h.lr, h.lr >= 0, op, "lr", ">= 0");
  check_range(h.momentum, h.momentum >= 0, op, "momentum", ">= 0");
  check_range(h.dampening, true, op, "dampening", "a number");
  check_range(h.weight_decay, h.weight_decay >= 0, op, "weight_decay", ">= 0");
  MOELAB_CHECK(!h.nesterov || (h.momentum > 0 && h.dampening == 0), op,
               "nesterov momentum needs momentum > 0 and dampening == 0, got momentum ", h.momentum, ", dampening ",
               h.dampening);
  if (h.momentum != 0) {
    check_state(param, momentum_buffer, op, "momentum_buffer");
    check_distinct(param, "param", momentum_buffer, "momentum_buffer", op);
    check_distinct(grad, "grad", momentum_buffer, "momentum_buffer", op);
  }
  if (param.numel() == 0) return;
  backend(param.device()).sgd_update(param, grad, momentum_buffer, h);
}

}  // namespace moelab::kernels
