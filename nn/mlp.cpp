// nn/mlp.cpp — down(act(up(x))), act relu or gelu.
#include "nn/mlp.h"

#include "autograd/ops.h"
#include "autograd/ops_unary.h"

namespace moelab {

Activation parse_activation(const std::string& name) {
  if (name == "relu") return Activation::Relu;
  if (name == "gelu") return Activation::Gelu;
  throw Error("MLP: activation must be relu or gelu, got '" + name + "'");
}

MLP::MLP(std::int64_t dim, std::int64_t hidden, Generator& gen, bool bias, DType dtype, Activation activation)
    : activation_(activation) {
  MOELAB_CHECK(dim >= 1 && hidden >= 1, "MLP", "sizes must be >= 1, got d ", dim, ", f ", hidden);
  up_ = register_module("up", std::make_shared<Linear>(dim, hidden, gen, bias, dtype));
  down_ = register_module("down", std::make_shared<Linear>(hidden, dim, gen, bias, dtype));
}

// x: [..., d] -> [..., f] -> [..., d]
Variable MLP::forward(const Variable& x) {
  check_defined(x.data(), "MLP", "x");
  MOELAB_CHECK(x.rank() >= 1 && x.size(-1) == up_->in_features(), "MLP", "x must be [..., ", up_->in_features(),
               "], got ", x.shape());
  const Variable h = up_->forward(x);
  return down_->forward(activation_ == Activation::Gelu ? gelu(h) : relu(h));
}

}  // namespace moelab
