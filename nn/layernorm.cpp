// nn/layernorm.cpp — LayerNorm on the fused autograd op.
#include "nn/layernorm.h"

#include <cmath>

#include "autograd/ops.h"
#include "core/factories.h"

namespace moelab {

LayerNorm::LayerNorm(std::int64_t dim, double eps, DType dtype) : dim_(dim), eps_(eps) {
  MOELAB_CHECK(dim >= 1, "LayerNorm", "dim must be >= 1, got ", dim);
  MOELAB_CHECK(std::isfinite(eps) && eps > 0.0, "LayerNorm", "eps must be finite and > 0, got ", eps);
  MOELAB_CHECK(dtype != DType::Int32, "LayerNorm", "needs a float dtype, got ", dtype);
  weight_ = register_parameter("weight", ones({dim}, dtype));
  bias_ = register_parameter("bias", zeros({dim}, dtype));
}

// x: [..., d] -> [..., d]
Variable LayerNorm::forward(const Variable& x) const {
  check_defined(x.data(), "LayerNorm", "x");
  MOELAB_CHECK(x.rank() >= 1 && x.size(-1) == dim_, "LayerNorm", "x must be [..., ", dim_, "], got ", x.shape());
  MOELAB_CHECK(x.dtype() == weight_.dtype(), "LayerNorm", "x is ", x.dtype(), " but the weight is ", weight_.dtype());
  return layernorm(x, weight_, bias_, eps_);
}

}  // namespace moelab
