// tests/module_gradcheck.h — the doctest forms of the module gradchecks, shared by
// tests/test_nn_gradcheck.cpp and tests/test_vit.cpp. (tests/parameter_gradcheck.h stays free of
// doctest: examples/custom_router.cpp includes it through tests/router_contract.h.)
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "autograd/gradcheck.h"
#include "nn/module.h"
#include "tests/parameter_gradcheck.h"

namespace moelab::testing {

// Every parameter of m gradchecked (and every one reached), and f's gradient with respect to its
// one input x.
inline void check_module(Module& m, const std::function<Variable()>& f) {
  std::int64_t checked = 0;
  const std::string report = check_parameters(m, f, checked);
  CHECK_MESSAGE(report.empty(), report);
  CHECK(checked == m.num_parameters());
}

inline void check_input(const GradcheckFunction& f, const Tensor& x) {
  const GradcheckResult r = gradcheck(f, {x});
  CHECK_MESSAGE(r.ok, r.report);
}

}  // namespace moelab::testing
