// nn/vit/patch_embedding.cpp — patches as a view, a permute and one Linear; see the header.
#include "nn/vit/patch_embedding.h"

#include "autograd/ops.h"

namespace moelab {

PatchEmbedding::PatchEmbedding(std::int64_t channels, std::int64_t height, std::int64_t width, std::int64_t patch,
                               std::int64_t dim, Generator& gen, DType dtype)
    : channels_(channels), height_(height), width_(width), patch_(patch), dim_(dim) {
  MOELAB_CHECK(channels >= 1 && height >= 1 && width >= 1 && dim >= 1, "PatchEmbedding",
               "channels, height, width and dim must be >= 1, got ", channels, ", ", height, ", ", width, ", ", dim);
  MOELAB_CHECK(patch >= 1 && height % patch == 0 && width % patch == 0, "PatchEmbedding", "the patch size ", patch,
               " must be >= 1 and divide the image's height ", height, " and width ", width);
  proj_ = register_module("proj", std::make_shared<Linear>(patch_values(), dim, gen, /*bias=*/true, dtype));
}

// images: [B, C, H, W] -> [B, N, d]
Variable PatchEmbedding::forward(const Variable& images) const {
  check_defined(images.data(), "PatchEmbedding", "images");
  MOELAB_CHECK(images.rank() == 4 && images.size(0) >= 1 && images.size(1) == channels_ &&
                   images.size(2) == height_ && images.size(3) == width_,
               "PatchEmbedding", "images must be [B, ", channels_, ", ", height_, ", ", width_, "] with B >= 1, got ",
               images.shape());
  const std::int64_t B = images.size(0), p = patch_, hp = height_ / p, wp = width_ / p;
  Variable grid = reshape(images, {B, channels_, hp, p, wp, p});  // a view
  Variable patches = permute(grid, {0, 2, 4, 1, 3, 5});          // [B, H/p, W/p, C, p, p]
  return proj_->forward(reshape(patches, {B, hp * wp, patch_values()}));
}

}  // namespace moelab
