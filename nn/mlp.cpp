// nn/mlp.cpp — down(act(up(x))), act relu, gelu or swiglu (nn/activation.h).
#include "nn/mlp.h"

#include "autograd/ops.h"

namespace moelab {

MLP::MLP(std::int64_t dim, std::int64_t hidden, Generator& gen, bool bias, DType dtype, Activation activation)
    : activation_(activation) {
  MOELAB_CHECK(dim >= 1 && hidden >= 1, "MLP", "sizes must be >= 1, got d ", dim, ", f ", hidden);
  up_ = register_module("up", std::make_shared<Linear>(dim, up_width(activation, hidden), gen, bias, dtype));
  down_ = register_module("down", std::make_shared<Linear>(hidden, dim, gen, bias, dtype));
}

// x: [..., d] -> [..., f] -> [..., d]
Variable MLP::forward(const Variable& x) {
  check_defined(x.data(), "MLP", "x");
  MOELAB_CHECK(x.rank() >= 1 && x.size(-1) == up_->in_features(), "MLP", "x must be [..., ", up_->in_features(),
               "], got ", x.shape());
  return down_->forward(activate(activation_, up_->forward(x)));  // [..., F] -> [..., f] -> [..., d]
}

}  // namespace moelab
