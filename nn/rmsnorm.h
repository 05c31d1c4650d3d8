// nn/rmsnorm.h — root-mean-square normalisation with a learned scale (Zhang & Sennrich, 2019).
//
//   x: [..., d] -> y: [..., d],  y = x / sqrt(mean(x^2 over d) + eps) * weight,  weight: [d] = ones
// The fused kernel pair (core/kernels.h rmsnorm / rmsnorm_backward) does each row in one pass.
// No bias and no mean subtraction: the norm Mistral-style decoders use. Its initialisation is
// fixed (ones), so it takes no Generator.
#pragma once

#include <cstdint>

#include "nn/module.h"

namespace moelab {

class RMSNorm : public Module {
 public:
  // Registers "weight" [dim] = ones.
  explicit RMSNorm(std::int64_t dim, double eps = 1e-5, DType dtype = DType::Float32);

  // x: [..., dim] -> [..., dim]
  Variable forward(const Variable& x) const;

  const Variable& weight() const { return weight_; }
  std::int64_t dim() const { return dim_; }
  double eps() const { return eps_; }

 private:
  std::int64_t dim_;
  double eps_;
  Variable weight_;
};

}  // namespace moelab
