// nn/mlp.h — the dense feed-forward sublayer: d -> f -> d, ReLU by default.
//
//   x: [..., d] -> h = act(x @ W_up^T (+ b_up)): [..., f] -> y = h @ W_down^T (+ b_down): [..., d]
//   act: relu (the papers' decoders), or gelu (exact, 0.5 x (1 + erf(x / sqrt 2)): the ViT's and
//   PyTorch's nn.GELU() default; autograd/ops_unary.h)
//   up.weight: [f, d], down.weight: [d, f] (Linear's [out, in] layout); biases optional, off by
//   default (the papers' decoders have none).
// Children are registered as "up" then "down", so parameters are named up.weight, down.weight
// (and up.bias, down.bias with biases), and "up" draws its initial values first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/random.h"
#include "nn/feed_forward.h"
#include "nn/linear.h"

namespace moelab {

enum class Activation { Relu, Gelu };
// "relu" or "gelu" -> Activation; anything else throws moelab::Error.
Activation parse_activation(const std::string& name);

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
