// nn/mlp.h — the dense ReLU feed-forward sublayer: d -> f -> d.
//
//   x: [..., d] -> h = relu(x @ W_up^T (+ b_up)): [..., f] -> y = h @ W_down^T (+ b_down): [..., d]
//   up.weight: [f, d], down.weight: [d, f] (Linear's [out, in] layout); biases optional, off by
//   default (the papers' decoders have none).
// Children are registered as "up" then "down", so parameters are named up.weight, down.weight
// (and up.bias, down.bias with biases), and "up" draws its initial values first.
#pragma once

#include <cstdint>
#include <memory>

#include "core/random.h"
#include "nn/feed_forward.h"
#include "nn/linear.h"

namespace moelab {

class MLP : public FeedForward {
 public:
  MLP(std::int64_t dim, std::int64_t hidden, Generator& gen, bool bias = false, DType dtype = DType::Float32);

  // x: [..., d] -> [..., d]
  Variable forward(const Variable& x) override;

  const Linear& up() const { return *up_; }
  const Linear& down() const { return *down_; }

 private:
  std::shared_ptr<Linear> up_, down_;
};

}  // namespace moelab
