// tests/parameter_gradcheck.h — gradcheck of a module's parameters by central differences.
//
// autograd's gradcheck differentiates with respect to Tensors it turns into fresh leaves; a
// module's parameters are its own leaves. check_parameters seeds backward with a fixed random r,
// so p.grad() = d sum(f() * r) / dp for every parameter p, then perturbs each element of p's
// storage in place (shared with the module) by +-eps and evaluates f without recording a graph.
// Used by tests/test_nn_gradcheck.cpp and tests/test_moe_layer.cpp. Parameters must be float64.
#pragma once

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/no_grad.h"
#include "core/factories.h"
#include "nn/module.h"

namespace moelab::testing {

// sum(out * r) on the host.
inline double projected(const Variable& out, const std::vector<double>& r) {
  const std::vector<double> y = out.data().to_vector<double>();
  double total = 0;
  for (std::size_t i = 0; i < y.size(); ++i) total += y[i] * r[i];
  return total;
}

// Every parameter of m: analytic d sum(f() * r)/dp against central differences. Returns a report
// of failures (empty when all pass) and counts the elements checked.
inline std::string check_parameters(Module& m, const std::function<Variable()>& f, std::int64_t& checked) {
  const double eps = 1e-6, atol = 1e-6, rtol = 1e-5;
  m.zero_grad();
  const Variable out = f();
  Generator gen(77);
  const Tensor r = normal(out.shape(), 0.0, 1.0, gen, DType::Float64);
  out.backward(r);
  const std::vector<double> rv = r.to_vector<double>();
  std::ostringstream failures;
  for (auto& [name, p] : m.named_parameters()) {
    const Tensor& g = p.grad();
    if (!g.defined()) {
      failures << name << ": no gradient reached it\n";
      continue;
    }
    const std::vector<double> analytic = g.to_vector<double>();
    double* w = p.data().data<double>();
    for (std::int64_t i = 0; i < p.numel(); ++i) {
      const double saved = w[i];
      double up, down;
      {
        NoGradGuard no_grad;
        w[i] = saved + eps;
        up = projected(f(), rv);
        w[i] = saved - eps;
        down = projected(f(), rv);
        w[i] = saved;
      }
      const double numeric = (up - down) / (2 * eps), a = analytic[static_cast<std::size_t>(i)];
      ++checked;
      if (!(std::abs(a - numeric) <= atol + rtol * std::abs(numeric)))
        failures << name << "[" << i << "]: analytic " << a << " numeric " << numeric << "\n";
    }
  }
  m.zero_grad();
  return failures.str();
}

}  // namespace moelab::testing
