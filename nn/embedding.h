// nn/embedding.h — a lookup table of learned vectors, one row per token id.
//
//   ids: [...] int32 in [0, V) -> [..., d],  out[..., :] = weight[ids[...], :],  weight: [V, d]
// Initialised N(0, 1) like PyTorch's nn.Embedding. The gradient scatter-adds dy rows into
// dweight in a fixed order (core/kernels.h embedding_backward), so it is deterministic.
#pragma once

#include <cstdint>

#include "core/random.h"
#include "nn/module.h"

namespace moelab {

class Embedding : public Module {
 public:
  // Registers "weight" [num_embeddings, dim].
  Embedding(std::int64_t num_embeddings, std::int64_t dim, Generator& gen, DType dtype = DType::Float32);

  // ids: [...] int32 -> [..., dim]
  Variable forward(const Tensor& ids) const;

  const Variable& weight() const { return weight_; }
  std::int64_t num_embeddings() const { return vocab_; }
  std::int64_t dim() const { return dim_; }

 private:
  std::int64_t vocab_, dim_;
  Variable weight_;
};

}  // namespace moelab
