// nn/vit/vit.h — a vision transformer (Dosovitskiy et al., "An Image is Worth 16x16 Words", 2021)
// whose chosen blocks carry a Soft MoE layer instead of the MLP, as the Soft MoE ViT of the
// implicit-bias paper (Chung et al., 2024, Section 4.4) and of Puigcerver et al. (2023).
//
//   images [B, C, H, W]
//   x = patch(images)                     [B, N, d]      N = (H/p)(W/p) patches (nn/vit/patch_embedding.h)
//   x = concat(cls, x) (pool = cls)       [B, 1 + N, d]  a learned class token in front
//   x = x + pos                           [B, T, d]      learned position embeddings, T = N (+ 1)
//   x = block_l(x), l = 0 .. depth-1      [B, T, d]      pre-norm encoder blocks (nn/vit/encoder_block.h);
//                                                        block l is a Soft MoE block when l is in moe_blocks
//   z = norm(x)                           [B, T, d]      a final LayerNorm
//   z = mean over tokens (pool = mean)    [B, d]         global average pooling,
//       or z[:, 0] (pool = cls)                          or the class token's row
//   logits = head(z)                      [B, classes]   Linear with a bias
//
// Defaults and readings of the papers:
// - moe_blocks: which blocks are Soft MoE. The Soft MoE ViT of both papers replaces the MLPs of the
//   last half of the blocks (6 of 12 in ViT-B/16); last_half_blocks(depth) gives that list, and
//   Astroformer-1's setting in the implicit-bias paper is "every block" (its 2 of 2).
// - Expert width: the experts' hidden width defaults to floor(mlp_hidden / experts), so that all n
//   experts together hold the parameters of one dense MLP whatever n is: the implicit-bias paper's
//   "constant total expert parameters" (its MNIST network does the same with floor(784 / n)).
// - The dense blocks' MLPs are ReLU by default, GELU with mlp_activation = gelu (the ViT's); the
//   Soft MoE experts have their own, expert_activation (relu by default; nn/activation.h).
// - Initial values: Linear layers as PyTorch's nn.Linear; the class token and the positions normal
//   with std 0.02 (timm's ViT uses a truncated normal of that std; we do not truncate).
// - LayerNorm eps 1e-6, the ViT's.
// - moe_residual: the residual around each Soft MoE layer, on by default (the ViT's); the
//   implicit-bias paper removed it in its Astroformer (nn/vit/encoder_block.h says why).
// Every Soft MoE layer can keep a subset of its experts for one forward (forward(images, subset)):
// the same rule in every layer, each layer choosing per image from its own routing weights
// (Algorithm 1), or each drawing its own random experts from the one generator, layer after layer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/module_list.h"
#include "nn/moe/soft_moe.h"
#include "nn/vit/encoder_block.h"
#include "nn/vit/patch_embedding.h"

namespace moelab {

enum class VitPooling { Mean, Cls };
// "mean" or "cls" -> VitPooling; anything else throws moelab::Error.
VitPooling parse_vit_pooling(const std::string& name);

struct VitConfig {
  std::int64_t channels = 1, height = 28, width = 28, patch = 7;  // images [B, C, H, W], p divides H and W
  std::int64_t dim = 64;          // d, the token width
  std::int64_t depth = 4;         // blocks
  std::int64_t heads = 4;         // d % heads == 0
  std::int64_t mlp_hidden = 256;  // the dense blocks' MLP width f
  Activation mlp_activation = Activation::Relu;  // the dense blocks' MLPs: relu, gelu (the ViT's) or swiglu
  std::int64_t classes = 10;
  VitPooling pool = VitPooling::Mean;
  double norm_eps = 1e-6;
  DType dtype = DType::Float32;

  std::vector<std::int64_t> moe_blocks;  // ascending block numbers that are Soft MoE (empty: a dense ViT)
  std::int64_t experts = 4;              // n in each Soft MoE block
  std::int64_t slots_per_expert = 1;     // p
  std::int64_t expert_hidden = 0;        // 0: floor(mlp_hidden / experts)
  Activation expert_activation = Activation::Relu;  // the Soft MoE experts' hidden activation
  bool moe_normalize = true;             // the Soft MoE layers' l2-normalised logits (nn/moe/soft_moe.h)
  bool moe_residual = true;              // x + moe(norm(x)) (the ViT's); false: moe(norm(x)) (the paper's
                                         // Astroformer, nn/vit/encoder_block.h)

  std::int64_t patches() const { return (height / patch) * (width / patch); }
  std::int64_t tokens() const { return patches() + (pool == VitPooling::Cls ? 1 : 0); }  // T
  std::int64_t expert_width() const { return expert_hidden > 0 ? expert_hidden : mlp_hidden / experts; }
  bool is_moe_block(std::int64_t block) const;
  SoftMoEConfig soft_moe() const;  // the config every Soft MoE block is built with
  // Throws moelab::Error naming the first bad field.
  void validate() const;
};

// The blocks depth/2 .. depth-1: the Soft MoE ViT's choice (the last half).
std::vector<std::int64_t> last_half_blocks(std::int64_t depth);

class Vit : public Module {
 public:
  // Initialised in this order: the child "patch", the parameters "cls" [1, 1, d] (pool = cls only)
  // and "pos" [1, T, d], the children "layers" (layers.0 ...), "norm", "head". (named_parameters()
  // lists the module's own cls and pos first, then the children's, as for every Module.)
  Vit(const VitConfig& config, Generator& gen);

  // images: [B, C, H, W] -> logits [B, classes], every expert of every Soft MoE block.
  Variable forward(const Variable& images);
  // The same with every Soft MoE block keeping `subset`'s experts (each block choosing its own).
  Variable forward(const Variable& images, const ExpertSubset& subset);

  const VitConfig& config() const { return config_; }
  // The Soft MoE layers, in block order (their last_mask() tells what the last forward kept).
  std::vector<SoftMoE*> moe_layers() const;
  EncoderBlock& block(std::int64_t l) const;

 private:
  Variable run(const Variable& images, const ExpertSubset* subset);
  VitConfig config_;
  std::shared_ptr<PatchEmbedding> patch_;
  Variable cls_, pos_;
  std::shared_ptr<ModuleList<EncoderBlock>> layers_;
  std::shared_ptr<LayerNorm> norm_;
  std::shared_ptr<Linear> head_;
};

}  // namespace moelab
