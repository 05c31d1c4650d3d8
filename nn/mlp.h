// nn/mlp.h — the dense feed-forward sublayer: d -> f -> d, ReLU by default.
//
//   x: [..., d] -> u = x @ W_up^T (+ b_up): [..., F] -> h = act(u): [..., f]
//               -> y = h @ W_down^T (+ b_down): [..., d]
//   act: relu (the papers' decoders), gelu (exact: the ViT's and PyTorch's nn.GELU() default) or
//   swiglu (silu(gate) * linear, F = 2f: LLaMA's and Mixtral's FFN); nn/activation.h.
//   up.weight: [F, d] (for swiglu the gate's f rows, then the linear one's), down.weight: [d, f]
//   (Linear's [out, in] layout); biases optional, off by default (the papers' decoders have none).
// Children are registered as "up" then "down", so parameters are named up.weight, down.weight
// (and up.bias, down.bias with biases), and "up" draws its initial values first.
#pragma once

#include <cstdint>
#include <memory>

#include "core/random.h"
#include "nn/activation.h"
#include "nn/feed_forward.h"
#include "nn/linear.h"

namespace moelab {

class MLP : public FeedForward {
 public:
  MLP(std::int64_t dim, std::int64_t hidden, Generator& gen, bool bias = false, DType dtype = DType::Float32,
      Activation activation = Activation::Relu);

  // x: [..., d] -> [..., d]
  Variable forward(const Variable& x) override;

  const Linear& up() const { return *up_; }
  const Linear& down() const { return *down_; }
  Activation activation() const { return activation_; }

 private:
  std::shared_ptr<Linear> up_, down_;
  Activation activation_ = Activation::Relu;
};

}  // namespace moelab
