// nn/activation.h — the hidden activation of a feed-forward sublayer (a dense MLP or an expert).
//
// A feed-forward sublayer is up-projection, activation, down-projection:
//   u = x @ W_up (+ b_up)       [..., F]
//   h = act(u)                   [..., f]
//   y = h @ W_down (+ b_down)    [..., d]
// Three activations, by name (parse_activation):
//   relu     h = max(u, 0)                          F = f   (the papers' decoders, Soft MoE's MNIST MLPs)
//   gelu     h = 0.5 u (1 + erf(u / sqrt 2))        F = f   (exact GELU: ViT, PyTorch's nn.GELU())
//   swiglu   h = silu(u_gate) * u_lin               F = 2f  (Shazeer, "GLU Variants Improve
//            silu(a) = a * sigmoid(a)                       Transformer", 2020; Mixtral, DeepSeek,
//            u_gate = u[..., :f], u_lin = u[..., f:]        Qwen and OLMoE experts)
// SwiGLU's two input projections (Mixtral's w1, the gate, and w3, the linear one) are stored as
// one up-projection of width 2f, gate columns first: one matrix product instead of two, and the
// same grouped kernels for experts (nn/moe/expert_bank.h). A SwiGLU sublayer of hidden width f
// therefore has 3 d f weights where relu and gelu have 2 d f: compare models at equal parameters
// by narrowing f (LLaMA's f = 2/3 of 4d), not at equal f.
//
//   Activation a = parse_activation("swiglu");
//   Variable h = activate(a, u);      // u: [T, 2f] -> [T, f]
//   Variable h = activate(a, u, 1);   // u: [B, 2f, E, p] -> [B, f, E, p] (the halves along axis 1)
#pragma once

#include <cstdint>
#include <string>

#include "autograd/variable.h"

namespace moelab {

enum class Activation { Relu, Gelu, Swiglu };

// "relu", "gelu" or "swiglu" -> Activation; anything else throws moelab::Error listing them.
Activation parse_activation(const std::string& name);
// The name parse_activation takes.
std::string activation_name(Activation activation);
// Whether the activation multiplies two projections (swiglu): the up-projection is then 2f wide.
bool is_gated(Activation activation);
// F, the up-projection's width, for hidden width f: 2f for gated activations, f otherwise.
std::int64_t up_width(Activation activation, std::int64_t hidden);

// u: [..., F, ...] -> h: [..., f, ...] along `axis` (F = up_width(activation, f)). Differentiable:
// composed of autograd ops (relu; gelu; narrow, sigmoid and products for swiglu).
Variable activate(Activation activation, const Variable& u, int axis = -1);

}  // namespace moelab
