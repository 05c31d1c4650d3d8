// autograd/ops_mask.cpp — causal masking. The output is the input where kept and a constant where
// masked, so the gradient is g where kept and 0 where masked: the same mask applied to g, with 0.
#include "autograd/ops_mask.h"

#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {

// scores: [..., T, S] -> [..., T, S]
Variable causal_mask(const Variable& scores, double fill) {
  return record("causal_mask", kernels::causal_mask(scores.data(), fill), {scores},
                [](const std::vector<Variable>&, const Tensor& g) {
                  return std::vector<Tensor>{kernels::causal_mask(g, 0.0)};
                });
}

}  // namespace moelab
