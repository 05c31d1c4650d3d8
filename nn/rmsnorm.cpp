// nn/rmsnorm.cpp — RMSNorm on the fused autograd op.
#include "nn/rmsnorm.h"

#include <cmath>

#include "autograd/ops.h"
#include "core/factories.h"

namespace moelab {

RMSNorm::RMSNorm(std::int64_t dim, double eps, DType dtype) : dim_(dim), eps_(eps) {
  MOELAB_CHECK(dim >= 1, "RMSNorm", "dim must be >= 1, got ", dim);
  MOELAB_CHECK(std::isfinite(eps) && eps > 0.0, "RMSNorm", "eps must be finite and > 0, got ", eps);
  MOELAB_CHECK(dtype != DType::Int32, "RMSNorm", "needs a float dtype, got ", dtype);
  weight_ = register_parameter("weight", ones({dim}, dtype));
}

// x: [..., d] -> [..., d]
Variable RMSNorm::forward(const Variable& x) const {
  check_defined(x.data(), "RMSNorm", "x");
  MOELAB_CHECK(x.rank() >= 1 && x.size(-1) == dim_, "RMSNorm", "x must be [..., ", dim_, "], got ", x.shape());
  MOELAB_CHECK(x.dtype() == weight_.dtype(), "RMSNorm", "x is ", x.dtype(), " but the weight is ", weight_.dtype());
  return rmsnorm(x, weight_, eps_);
}

}  // namespace moelab
