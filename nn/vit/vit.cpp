// nn/vit/vit.cpp — the vision transformer with Soft MoE blocks; the shapes are in the header.
#include "nn/vit/vit.h"

#include <algorithm>

#include "autograd/ops.h"
#include "core/factories.h"

namespace moelab {

VitPooling parse_vit_pooling(const std::string& name) {
  if (name == "mean") return VitPooling::Mean;
  if (name == "cls") return VitPooling::Cls;
  throw Error("Vit: pool must be mean or cls, got '" + name + "'");
}

std::vector<std::int64_t> last_half_blocks(std::int64_t depth) {
  std::vector<std::int64_t> blocks;
  for (std::int64_t l = depth / 2; l < depth; ++l) blocks.push_back(l);
  return blocks;
}

bool VitConfig::is_moe_block(std::int64_t block) const {
  return std::find(moe_blocks.begin(), moe_blocks.end(), block) != moe_blocks.end();
}

SoftMoEConfig VitConfig::soft_moe() const {
  SoftMoEConfig c;
  c.d = dim;
  c.experts = experts;
  c.slots_per_expert = slots_per_expert;
  c.hidden = expert_width();
  c.normalize = moe_normalize;
  c.activation = expert_activation;
  c.dtype = dtype;
  return c;
}

void VitConfig::validate() const {
  MOELAB_CHECK(channels >= 1 && height >= 1 && width >= 1, "VitConfig", "channels, height and width must be >= 1, got ",
               channels, ", ", height, ", ", width);
  MOELAB_CHECK(patch >= 1 && height % patch == 0 && width % patch == 0, "VitConfig", "patch ", patch,
               " must be >= 1 and divide height ", height, " and width ", width);
  MOELAB_CHECK(dim >= 1 && heads >= 1 && dim % heads == 0, "VitConfig", "dim ", dim,
               " must be a positive multiple of heads ", heads);
  MOELAB_CHECK(depth >= 1 && mlp_hidden >= 1 && classes >= 1, "VitConfig",
               "depth, mlp_hidden and classes must be >= 1, got ", depth, ", ", mlp_hidden, ", ", classes);
  MOELAB_CHECK(norm_eps > 0, "VitConfig", "norm_eps must be > 0, got ", norm_eps);
  for (std::size_t i = 0; i < moe_blocks.size(); ++i) {
    MOELAB_CHECK(moe_blocks[i] >= 0 && moe_blocks[i] < depth, "VitConfig", "moe block ", moe_blocks[i],
                 " is not a block of a ", depth, "-block ViT");
    MOELAB_CHECK(i == 0 || moe_blocks[i] > moe_blocks[i - 1], "VitConfig",
                 "moe_blocks must be ascending without repeats");
  }
  if (!moe_blocks.empty()) {
    MOELAB_CHECK(experts >= 1 && slots_per_expert >= 1, "VitConfig", "experts and slots_per_expert must be >= 1, got ",
                 experts, ", ", slots_per_expert);
    MOELAB_CHECK(expert_width() >= 1, "VitConfig", "the experts' hidden width floor(", mlp_hidden, " / ", experts,
                 ") is 0: set expert_hidden or use fewer experts");
  }
}

Vit::Vit(const VitConfig& c, Generator& gen) : config_(c) {
  c.validate();
  patch_ = register_module("patch",
                           std::make_shared<PatchEmbedding>(c.channels, c.height, c.width, c.patch, c.dim, gen, c.dtype));
  if (c.pool == VitPooling::Cls) cls_ = register_parameter("cls", normal({1, 1, c.dim}, 0.0, 0.02, gen, c.dtype));
  pos_ = register_parameter("pos", normal({1, c.tokens(), c.dim}, 0.0, 0.02, gen, c.dtype));
  layers_ = register_module("layers", std::make_shared<ModuleList<EncoderBlock>>());
  for (std::int64_t l = 0; l < c.depth; ++l) {
    if (c.is_moe_block(l))
      layers_->push_back(std::make_shared<EncoderBlock>(c.dim, c.heads, c.soft_moe(), c.norm_eps, gen, c.moe_residual));
    else
      layers_->push_back(
          std::make_shared<EncoderBlock>(c.dim, c.heads, c.mlp_hidden, c.norm_eps, gen, c.dtype, c.mlp_activation));
  }
  norm_ = register_module("norm", std::make_shared<LayerNorm>(c.dim, c.norm_eps, c.dtype));
  head_ = register_module("head", std::make_shared<Linear>(c.dim, c.classes, gen, /*bias=*/true, c.dtype));
}

std::vector<SoftMoE*> Vit::moe_layers() const {
  std::vector<SoftMoE*> out;
  for (std::int64_t l = 0; l < layers_->size(); ++l)
    if ((*layers_)[l].is_moe()) out.push_back(&(*layers_)[l].moe());
  return out;
}

EncoderBlock& Vit::block(std::int64_t l) const { return (*layers_)[l]; }

Variable Vit::forward(const Variable& images) { return run(images, nullptr); }
Variable Vit::forward(const Variable& images, const ExpertSubset& subset) { return run(images, &subset); }

// images: [B, C, H, W] -> logits [B, classes]
Variable Vit::run(const Variable& images, const ExpertSubset* subset) {
  const VitConfig& c = config_;
  Variable x = patch_->forward(images);  // [B, N, d]
  const std::int64_t B = x.size(0);
  if (c.pool == VitPooling::Cls) {  // [1, 1, d] broadcast to [B, 1, d], in front of the patches
    Variable cls = cls_ + Variable(zeros({B, 1, c.dim}, x.dtype(), x.data().device()));
    x = concat({cls, x}, 1);  // [B, 1 + N, d]
  }
  x = x + pos_;  // [1, T, d] broadcast over the batch
  for (std::int64_t l = 0; l < layers_->size(); ++l) x = (*layers_)[l].forward(x, subset);
  Variable z = norm_->forward(x);  // [B, T, d]
  z = c.pool == VitPooling::Mean ? mean(z, 1) : reshape(narrow(z, 1, 0, 1), {B, c.dim});  // [B, d]
  return head_->forward(z);
}

}  // namespace moelab
