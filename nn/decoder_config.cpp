// nn/decoder_config.cpp — checking a DecoderConfig, and the default dense FFN factory.
#include "nn/decoder_config.h"

#include <cmath>

#include "core/error.h"
#include "nn/mlp.h"

namespace moelab {

void DecoderConfig::validate() const {
  MOELAB_CHECK(vocab >= 1, "DecoderConfig", "vocab must be >= 1, got ", vocab);
  MOELAB_CHECK(d >= 1, "DecoderConfig", "d must be >= 1, got ", d);
  MOELAB_CHECK(layers >= 1, "DecoderConfig", "layers must be >= 1, got ", layers);
  MOELAB_CHECK(heads >= 1 && d % heads == 0, "DecoderConfig", "heads must divide d = ", d, ", got ", heads);
  MOELAB_CHECK((d / heads) % 2 == 0, "DecoderConfig", "head_dim = d / heads must be even for RoPE, got ", d / heads);
  MOELAB_CHECK(ffn >= 0, "DecoderConfig", "ffn must be >= 0 (0 means ffn = d), got ", ffn);
  MOELAB_CHECK(std::isfinite(rope_theta) && rope_theta > 0.0, "DecoderConfig", "rope_theta must be > 0, got ",
               rope_theta);
  MOELAB_CHECK(std::isfinite(norm_eps) && norm_eps > 0.0, "DecoderConfig", "norm_eps must be > 0, got ", norm_eps);
  MOELAB_CHECK(max_seq >= 1, "DecoderConfig", "max_seq must be >= 1, got ", max_seq);
  MOELAB_CHECK(dtype != DType::Int32, "DecoderConfig", "dtype must be a float type, got ", dtype);
}

FeedForwardFactory dense_feed_forward() {
  return [](const DecoderConfig& c, std::int64_t, Generator& gen) -> std::shared_ptr<FeedForward> {
    return std::make_shared<MLP>(c.d, c.ffn_width(), gen, /*bias=*/false, c.dtype, c.ffn_activation);
  };
}

}  // namespace moelab
