// nn/layernorm.h — layer normalisation with a learned scale and shift (Ba et al., 2016).
//
//   x: [..., d] -> y: [..., d],  y = (x - mean) / sqrt(var + eps) * weight + bias   (biased variance)
//   weight: [d] = ones, bias: [d] = zeros, as PyTorch's nn.LayerNorm initialises them.
// The fused kernel pair (core/kernels.h layernorm / layernorm_backward) does each row in one pass.
// Its initialisation is fixed, so it takes no Generator.
#pragma once

#include <cstdint>

#include "nn/module.h"

namespace moelab {

class LayerNorm : public Module {
 public:
  // Registers "weight" [dim] = ones and "bias" [dim] = zeros.
  explicit LayerNorm(std::int64_t dim, double eps = 1e-5, DType dtype = DType::Float32);

  // x: [..., dim] -> [..., dim]
  Variable forward(const Variable& x) const;

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }
  std::int64_t dim() const { return dim_; }
  double eps() const { return eps_; }

 private:
  std::int64_t dim_;
  double eps_;
  Variable weight_, bias_;
};

}  // namespace moelab
