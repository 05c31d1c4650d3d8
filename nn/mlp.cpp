// nn/mlp.cpp — down(relu(up(x))).
#include "nn/mlp.h"

#include "autograd/ops.h"
#include "autograd/ops_unary.h"

namespace moelab {

MLP::MLP(std::int64_t dim, std::int64_t hidden, Generator& gen, bool bias, DType dtype) {
  MOELAB_CHECK(dim >= 1 && hidden >= 1, "MLP", "sizes must be >= 1, got d ", dim, ", f ", hidden);
  up_ = register_module("up", std::make_shared<Linear>(dim, hidden, gen, bias, dtype));
  down_ = register_module("down", std::make_shared<Linear>(hidden, dim, gen, bias, dtype));
}

// x: [..., d] -> [..., f] -> [..., d]
Variable MLP::forward(const Variable& x) {
  check_defined(x.data(), "MLP", "x");
  MOELAB_CHECK(x.rank() >= 1 && x.size(-1) == up_->in_features(), "MLP", "x must be [..., ", up_->in_features(),
               "], got ", x.shape());
  return down_->forward(relu(up_->forward(x)));
}

}  // namespace moelab
