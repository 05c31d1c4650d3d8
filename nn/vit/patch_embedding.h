// nn/vit/patch_embedding.h — a vision transformer's first layer: an image cut into square
// patches, each patch flattened and mapped to one token by a Linear layer.
//
//   images: [B, C, H, W] --view--> [B, C, H/p, p, W/p, p]
//           --permute {0, 2, 4, 1, 3, 5}--> [B, H/p, W/p, C, p, p]      patch (i, j), then its pixels
//           --view--> [B, N, C*p*p]                                      N = (H/p) * (W/p), row-major
//           --Linear(C*p*p, d) with bias--> tokens [B, N, d]
// Token n = i * (W/p) + j is the patch whose top-left pixel is (i*p, j*p); inside it the C*p*p
// values are ordered channel, row, column. That is exactly PyTorch's Conv2d(C, d, kernel_size=p,
// stride=p) followed by flatten(2).transpose(1, 2), the ViT's patch embedding: our weight [d, C*p*p]
// is the convolution's weight [d, C, p, p] viewed flat (tests/test_vit.cpp checks it against a
// PyTorch fixture). A convolution with stride = kernel is a reshape and one GEMM, so no convolution
// kernel is needed, and any image and patch size works as long as p divides H and W.
#pragma once

#include <cstdint>
#include <memory>

#include "core/random.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace moelab {

class PatchEmbedding : public Module {
 public:
  // Registers the child "proj": Linear(channels * patch^2, dim) with a bias (PyTorch's init).
  PatchEmbedding(std::int64_t channels, std::int64_t height, std::int64_t width, std::int64_t patch,
                 std::int64_t dim, Generator& gen, DType dtype = DType::Float32);

  // images: [B, C, H, W] -> tokens [B, N, d]
  Variable forward(const Variable& images) const;

  std::int64_t patches() const { return (height_ / patch_) * (width_ / patch_); }  // N
  std::int64_t patch_values() const { return channels_ * patch_ * patch_; }        // C * p * p
  const Linear& proj() const { return *proj_; }

 private:
  std::int64_t channels_, height_, width_, patch_, dim_;
  std::shared_ptr<Linear> proj_;
};

}  // namespace moelab
