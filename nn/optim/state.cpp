// nn/optim/state.cpp — parsing and checking "<buffer>.<i>" optimizer state (see state.h).
#include "nn/optim/state.h"

#include <cmath>
#include <cstdint>
#include <sstream>

#include "core/error.h"
#include "core/factories.h"

namespace moelab::optim_state {
namespace {

// "exp_avg.12" -> ("exp_avg", 12); false unless the text after the last '.' is a plain decimal
// number (no sign, no leading zero unless it is "0", at most 9 digits).
bool split_name(const std::string& name, std::string& buffer, std::int64_t& index) {
  const std::size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == name.size()) return false;
  const std::string digits = name.substr(dot + 1);
  if (digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return false;
  for (char c : digits)
    if (c < '0' || c > '9') return false;
  buffer = name.substr(0, dot);
  index = std::stoll(digits);
  return true;
}

std::string expected_names(const std::vector<BufferSpec>& specs) {
  std::string out;
  for (std::size_t b = 0; b < specs.size(); ++b) out += (b ? ", " : "") + specs[b].name + ".<i>";
  return out;
}

}  // namespace

Tensor counter_tensor(std::int64_t value) {
  return from_vector(std::vector<double>{static_cast<double>(value)}, Shape{});
}

std::int64_t counter_value(const Tensor& counter) { return static_cast<std::int64_t>(counter.item<double>()); }

State read_state(const char* op, const NamedTensors& state, const std::vector<BufferSpec>& specs,
                 const std::vector<Variable>& params) {
  const std::size_t n = params.size();
  State out;
  out.buffers.assign(specs.size(), std::vector<Tensor>(n));
  std::vector<std::string> problems;
  std::vector<bool> bad(n, false);  // parameters with a rejected tensor
  auto problem = [&](auto&&... parts) {
    std::ostringstream s;
    (s << ... << parts);
    problems.push_back(s.str());
  };

  for (const auto& [name, tensor] : state) {
    std::string buffer;
    std::int64_t index = 0;
    if (!split_name(name, buffer, index)) {
      problem("'", name, "' is not a state name of the form <buffer>.<index>");
      continue;
    }
    std::size_t b = 0;
    while (b < specs.size() && specs[b].name != buffer) ++b;
    if (b == specs.size()) {
      problem("'", name, "' names unknown buffer '", buffer, "' (expected ", expected_names(specs), ")");
      continue;
    }
    if (index >= static_cast<std::int64_t>(n)) {
      problem("'", name, "' is for parameter ", index, " but the optimizer has ", n, " parameters");
      continue;
    }
    const std::size_t i = static_cast<std::size_t>(index);
    if (out.buffers[b][i].defined()) {
      problem("'", name, "' is given twice");
      continue;
    }
    if (!tensor.defined()) {
      problem("'", name, "' is an undefined tensor");
      bad[i] = true;
      continue;
    }
    const Tensor& p = params[i].data();
    if (specs[b].kind == BufferKind::Element) {
      if (tensor.shape() != p.shape() || tensor.dtype() != p.dtype()) {
        problem("'", name, "' is ", tensor.dtype(), " ", tensor.shape(), " but parameter ", i, " is ", p.dtype(), " ",
                p.shape());
        bad[i] = true;
        continue;
      }
    } else {
      if (tensor.shape() != Shape{} || tensor.dtype() != DType::Float64) {
        problem("'", name, "' must be a 0-d float64 counter, got ", tensor.dtype(), " ", tensor.shape());
        bad[i] = true;
        continue;
      }
      const double v = tensor.item<double>();
      if (!(std::isfinite(v) && v >= 1 && v == std::floor(v) && v <= 9.0e15)) {
        problem("'", name, "' must hold a whole number >= 1, got ", v);
        bad[i] = true;
        continue;
      }
    }
    out.buffers[b][i] = tensor.device() == p.device() ? tensor.clone() : tensor.to(p.device());
  }

  // A parameter has every buffer or none. Only report this for parameters whose present
  // buffers were all fine, so one bad tensor does not also show up as "missing".
  for (std::size_t i = 0; i < n; ++i) {
    std::string have, missing;
    for (std::size_t b = 0; b < specs.size(); ++b) {
      std::string& list = out.buffers[b][i].defined() ? have : missing;
      list += (list.empty() ? "" : ", ") + specs[b].name + "." + std::to_string(i);
    }
    if (!have.empty() && !missing.empty() && !bad[i])
      problem("parameter ", i, " has ", have, " but is missing ", missing);
  }

  if (!problems.empty()) {
    std::ostringstream s;
    s << "the state does not match this optimizer (" << n << " parameters; names " << expected_names(specs)
      << "): ";
    const std::size_t shown = std::min<std::size_t>(problems.size(), 10);
    for (std::size_t k = 0; k < shown; ++k) s << (k ? "; " : "") << problems[k];
    if (problems.size() > shown) s << "; and " << problems.size() - shown << " more";
    fail(op, s.str());
  }
  return out;
}

}  // namespace moelab::optim_state
