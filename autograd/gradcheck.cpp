// autograd/gradcheck.cpp — analytic vs central-difference gradients (see gradcheck.h).
#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "autograd/no_grad.h"
#include "core/factories.h"

namespace moelab {
namespace {

// L = sum(f(x) * r), evaluated without recording a graph.
double projected_value(const GradcheckFunction& f, const std::vector<Tensor>& xs, const std::vector<double>& r) {
  NoGradGuard no_grad;
  std::vector<Variable> vars;
  for (const Tensor& x : xs) vars.emplace_back(x);
  const Variable out = f(vars);
  const std::vector<double> y = out.data().to_vector<double>();
  double total = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) total += y[i] * r[i];
  return total;
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFunction& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  for (const Tensor& x : inputs) {
    check_dtype(x, DType::Float64, "gradcheck", "every input");
    MOELAB_CHECK(x.device().is_cpu(), "gradcheck", "inputs must be on the CPU, got ", x.device());
  }

  // Analytic: backward seeded with r is the gradient of sum(f(x) * r).
  std::vector<Variable> leaves;
  for (const Tensor& x : inputs) leaves.emplace_back(x.clone(), true);
  const Variable out = f(leaves);
  check_dtype(out.data(), DType::Float64, "gradcheck", "the output of f");
  Generator gen(options.seed);
  const Tensor r = normal(out.shape(), 0.0, 1.0, gen, DType::Float64);
  if (out.requires_grad()) out.backward(r);
  const std::vector<double> r_values = r.to_vector<double>();

  GradcheckResult result;
  result.ok = true;
  double worst_ratio = -1.0;  // error / tolerance of the worst element
  std::ostringstream worst;
  std::int64_t failures = 0, checked = 0;

  std::vector<Tensor> work;
  for (const Tensor& x : inputs) work.push_back(x.clone());
  for (std::size_t i = 0; i < work.size(); ++i) {
    const Tensor& g = leaves[i].grad();
    const std::vector<double> analytic =
        g.defined() ? g.to_vector<double>() : std::vector<double>(static_cast<std::size_t>(work[i].numel()), 0.0);
    double* p = work[i].data<double>();
    for (std::int64_t k = 0; k < work[i].numel(); ++k) {
      const double saved = p[k];
      p[k] = saved + options.eps;
      const double plus = projected_value(f, work, r_values);
      p[k] = saved - options.eps;
      const double minus = projected_value(f, work, r_values);
      p[k] = saved;
      const double numeric = (plus - minus) / (2.0 * options.eps);
      const double a = analytic[static_cast<std::size_t>(k)];
      const double error = std::abs(a - numeric);
      const double scale = std::max(std::abs(a), std::abs(numeric));
      const double tolerance = options.atol + options.rtol * std::abs(numeric);
      ++checked;
      result.max_abs_error = std::max(result.max_abs_error, error);
      if (scale > 0) result.max_rel_error = std::max(result.max_rel_error, error / scale);
      const bool bad = !(error <= tolerance);  // also catches NaN
      if (bad) {
        ++failures;
        result.ok = false;
      }
      const double ratio = std::isnan(error) ? INFINITY : error / tolerance;
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        worst.str("");
        worst << "input " << i << " " << work[i].shape() << ", element " << k << ": analytic " << a << " vs numeric "
              << numeric << " (abs error " << error << ", tolerance " << tolerance << ")";
      }
    }
  }

  std::ostringstream report;
  report.precision(6);
  report << "gradcheck " << (result.ok ? "passed" : "FAILED") << ": " << failures << " of " << checked
         << " elements outside atol " << options.atol << " + rtol " << options.rtol << " * |numeric|; max abs error "
         << result.max_abs_error << ", max rel error " << result.max_rel_error;
  if (checked > 0) report << "; worst: " << worst.str();
  result.report = report.str();
  return result;
}

}  // namespace moelab
