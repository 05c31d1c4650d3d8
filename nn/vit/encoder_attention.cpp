// nn/vit/encoder_attention.cpp — unmasked multi-head self-attention; see the header.
#include "nn/vit/encoder_attention.h"

#include <cmath>

#include "autograd/ops.h"

namespace moelab {

EncoderAttention::EncoderAttention(std::int64_t dim, std::int64_t heads, Generator& gen, DType dtype)
    : dim_(dim), heads_(heads) {
  MOELAB_CHECK(dim >= 1 && heads >= 1 && dim % heads == 0, "EncoderAttention",
               "d must be a positive multiple of heads, got d ", dim, ", heads ", heads);
  q_ = register_module("q", std::make_shared<Linear>(dim, dim, gen, true, dtype));
  k_ = register_module("k", std::make_shared<Linear>(dim, dim, gen, true, dtype));
  v_ = register_module("v", std::make_shared<Linear>(dim, dim, gen, true, dtype));
  o_ = register_module("o", std::make_shared<Linear>(dim, dim, gen, true, dtype));
}

// x: [B, T, d] -> [B, T, d]
Variable EncoderAttention::forward(const Variable& x) const {
  check_defined(x.data(), "EncoderAttention", "x");
  MOELAB_CHECK(x.rank() == 3 && x.size(2) == dim_ && x.size(0) >= 1 && x.size(1) >= 1, "EncoderAttention",
               "x must be [B, T, ", dim_, "] with B, T >= 1, got ", x.shape());
  const std::int64_t B = x.size(0), T = x.size(1), H = heads_, hd = dim_ / heads_;
  Variable q = reshape(q_->forward(x), {B, T, H, hd});  // views: the kernel reads each head in place
  Variable k = reshape(k_->forward(x), {B, T, H, hd});
  Variable v = reshape(v_->forward(x), {B, T, H, hd});
  Variable y = bidirectional_attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(hd)));
  return o_->forward(reshape(y, {B, T, dim_}));
}

}  // namespace moelab
