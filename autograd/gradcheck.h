// autograd/gradcheck.h — checking an op's analytic gradient against finite differences.
//
// For a function f of some float64 CPU tensors, gradcheck compares
//   analytic: the gradient backward() computes for L(x) = sum(f(x) * r), r a fixed random tensor
//             of f(x)'s shape (seeded), i.e. backward seeded with r; a random projection r checks
//             every output element at once, with weights that cannot cancel by accident;
//   numeric:  central differences (L(x + eps e_k) - L(x - eps e_k)) / (2 eps) for every element k
//             of every input, evaluated in float64 without recording a graph.
// An element passes when |analytic - numeric| <= atol + rtol * |numeric|. Central differences
// are exact to O(eps^2) for smooth functions, so inputs must stay away from kinks (ReLU at 0,
// ties in max/top-k); the tests build their inputs that way.
//
//   GradcheckResult r = gradcheck([](const std::vector<Variable>& v) { return tanh(v[0]); }, {x});
//   CHECK_MESSAGE(r.ok, r.report);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/variable.h"

namespace moelab {

struct GradcheckOptions {
  double eps = 1e-6;         // finite-difference step
  double atol = 1e-6;        // absolute tolerance
  double rtol = 1e-5;        // relative tolerance (to |numeric|)
  std::uint64_t seed = 1234; // for the projection r
};

struct GradcheckResult {
  bool ok = false;
  double max_abs_error = 0.0;  // over all elements of all inputs
  double max_rel_error = 0.0;  // |a - n| / max(|a|, |n|), 0 where both are 0
  std::string report;          // the worst element (input, element, analytic vs numeric) and a summary
};

using GradcheckFunction = std::function<Variable(const std::vector<Variable>&)>;

// inputs: float64 CPU tensors; f receives them as leaves that require grad (and must not modify
// them). f may capture anything else it needs (index tensors, constants).
GradcheckResult gradcheck(const GradcheckFunction& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace moelab
