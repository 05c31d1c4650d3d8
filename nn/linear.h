// nn/linear.h — the affine layer y = x @ W^T + b.
//
//   x: [..., in] -> y: [..., out],  weight W: [out, in] (PyTorch's layout), bias b: [out] (optional)
// The leading axes are flattened into one N (a view), so the product is a single GEMM
// [N, in] @ [out, in]^T with the transpose done by the kernel's flag, never materialised.
// Initialisation follows PyTorch's nn.Linear default: W and b uniform in (-1/sqrt(in), 1/sqrt(in)),
// the weight drawn first, then the bias, in row-major order from the given Generator.
#pragma once

#include <cstdint>

#include "core/random.h"
#include "nn/module.h"

namespace moelab {

class Linear : public Module {
 public:
  // Registers "weight" [out, in] and, when bias, "bias" [out].
  Linear(std::int64_t in_features, std::int64_t out_features, Generator& gen, bool bias = true,
         DType dtype = DType::Float32);

  // x: [..., in] -> [..., out]
  Variable forward(const Variable& x) const;

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }  // undefined when built without a bias
  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }

 private:
  std::int64_t in_, out_;
  Variable weight_, bias_;
};

}  // namespace moelab
