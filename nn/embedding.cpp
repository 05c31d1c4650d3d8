// nn/embedding.cpp — token ids to vectors by a row gather (autograd embedding op).
#include "nn/embedding.h"

#include "autograd/ops.h"
#include "core/factories.h"

namespace moelab {

Embedding::Embedding(std::int64_t num_embeddings, std::int64_t dim, Generator& gen, DType dtype)
    : vocab_(num_embeddings), dim_(dim) {
  MOELAB_CHECK(num_embeddings >= 1 && dim >= 1, "Embedding", "sizes must be >= 1, got ", num_embeddings, " x ", dim);
  MOELAB_CHECK(dtype != DType::Int32, "Embedding", "needs a float dtype, got ", dtype);
  weight_ = register_parameter("weight", normal({num_embeddings, dim}, 0.0, 1.0, gen, dtype));
}

// ids: [...] int32 in [0, V) -> [..., d]
Variable Embedding::forward(const Tensor& ids) const {
  check_dtype(ids, DType::Int32, "Embedding", "ids");
  return embedding(weight_, ids);  // checks the id range, naming moelab::embedding
}

}  // namespace moelab
