// nn/linear.cpp — y = x @ W^T + b as one GEMM over the flattened leading axes.
#include "nn/linear.h"

#include <cmath>

#include "autograd/ops.h"
#include "core/factories.h"

namespace moelab {

Linear::Linear(std::int64_t in_features, std::int64_t out_features, Generator& gen, bool bias, DType dtype)
    : in_(in_features), out_(out_features) {
  MOELAB_CHECK(in_features >= 1 && out_features >= 1, "Linear", "sizes must be >= 1, got in ", in_features, ", out ",
               out_features);
  MOELAB_CHECK(dtype != DType::Int32, "Linear", "needs a float dtype, got ", dtype);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight_ = register_parameter("weight", uniform({out_features, in_features}, -bound, bound, gen, dtype));
  if (bias) bias_ = register_parameter("bias", uniform({out_features}, -bound, bound, gen, dtype));
}

// x: [..., in] -> [..., out]
Variable Linear::forward(const Variable& x) const {
  check_defined(x.data(), "Linear", "x");
  MOELAB_CHECK(x.rank() >= 1 && x.size(-1) == in_, "Linear", "x must be [..., ", in_, "] for a Linear(", in_, " -> ",
               out_, "), got ", x.shape());
  MOELAB_CHECK(x.dtype() == weight_.dtype(), "Linear", "x is ", x.dtype(), " but the weight is ", weight_.dtype());
  // x: [..., in] -> [N, in] (a view) -> [N, out] -> [..., out]
  const bool flat = x.rank() == 2;
  Variable y = matmul(flat ? x : reshape(x, {-1, in_}), weight_, false, /*trans_b=*/true);
  if (bias_.defined()) y = y + bias_;
  if (flat) return y;
  std::vector<std::int64_t> sizes = x.shape().sizes();
  sizes.back() = out_;
  return reshape(y, Shape(std::move(sizes)));
}

}  // namespace moelab
