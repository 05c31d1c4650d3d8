// nn/activation.cpp — relu, gelu and swiglu on an up-projection's output (see activation.h).
#include "nn/activation.h"

#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "core/error.h"

namespace moelab {

Activation parse_activation(const std::string& name) {
  if (name == "relu") return Activation::Relu;
  if (name == "gelu") return Activation::Gelu;
  if (name == "swiglu") return Activation::Swiglu;
  throw Error("activation must be relu, gelu or swiglu, got '" + name + "'");
}

std::string activation_name(Activation activation) {
  switch (activation) {
    case Activation::Relu: return "relu";
    case Activation::Gelu: return "gelu";
    case Activation::Swiglu: return "swiglu";
  }
  return "?";
}

bool is_gated(Activation activation) { return activation == Activation::Swiglu; }

std::int64_t up_width(Activation activation, std::int64_t hidden) {
  return is_gated(activation) ? 2 * hidden : hidden;
}

// u: [..., F, ...] -> [..., f, ...]
Variable activate(Activation activation, const Variable& u, int axis) {
  switch (activation) {
    case Activation::Relu: return relu(u);
    case Activation::Gelu: return gelu(u);
    case Activation::Swiglu: {
      const std::int64_t width = u.size(axis);
      MOELAB_CHECK(width % 2 == 0, "swiglu", "the up-projection must be 2f wide (gate, then linear), got ", width,
                   " along axis ", axis, " of ", u.shape());
      const Variable gate = narrow(u, axis, 0, width / 2);          // Mixtral's w1 x
      const Variable linear = narrow(u, axis, width / 2, width / 2);  // Mixtral's w3 x
      return gate * sigmoid(gate) * linear;                          // silu(w1 x) * w3 x
    }
  }
  throw Error("activate: unknown activation");
}

}  // namespace moelab
