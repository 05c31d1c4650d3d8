// examples/trace_print.h — how examples/trace_step.cpp prints tensors and checks its stepped
// pieces: one line per tensor (name, shape, role, first values with 3 decimals; int32 tensors in
// full, rows separated by |), "matches X: yes|no" for a bitwise check against the layer's own
// result, "agrees with X: yes|no" for a value computed by hand in float64 against autograd's
// float32 (within 1e-5 relative). A failed check clears all_matched, and trace_step exits 1.
//
//   line("moe.x", xf, "the tokens flattened: B*T rows of d");
//   check_same("ExpertBank::forward", ys.data(), bank.forward(xs, offsets).data());
//   show("gates: dW_r", dw, {E, d}, "dlogits^T x");        // host values, shown x 1000
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/factories.h"
#include "core/tensor.h"

namespace moelab::trace {

// ---------------------------------------------------------------- printing
inline std::string num(double v) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  std::string s = buf;
  return s == "-0.000" ? "0.000" : s;
}

inline std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (int i = 0; i < s.rank(); ++i) out += (i ? ", " : "") + std::to_string(s.size(i, "trace_step"));
  return out + "]";
}

// The first `count` values of a float tensor (flattened), or every value of an int32 one with
// "|" between rows of its last axis.
inline std::string values(const Tensor& t, std::size_t count = 6) {
  std::string out;
  if (t.dtype() == DType::Int32) {
    const std::vector<std::int32_t> v = t.to(Device::cpu()).to_vector<std::int32_t>();
    const std::int64_t row = t.rank() >= 2 ? t.size(-1) : static_cast<std::int64_t>(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      out += (i == 0 ? "" : (static_cast<std::int64_t>(i) % row == 0 ? " | " : " ")) + std::to_string(v[i]);
    return out;
  }
  const std::vector<double> v = t.to(Device::cpu()).to(DType::Float64).to_vector<double>();
  for (std::size_t i = 0; i < v.size() && i < count; ++i) out += (i ? " " : "") + num(v[i]);
  if (v.size() > count) out += " ...";
  return out;
}

inline void line(const std::string& name, const Tensor& t, const std::string& role, std::size_t count = 6) {
  std::printf("%-27s %-13s %-46s %s\n", name.c_str(), shape_str(t.shape()).c_str(), role.c_str(),
              values(t, count).c_str());
}
inline void line(const std::string& name, const Variable& v, const std::string& role, std::size_t count = 6) {
  line(name, v.data(), role, count);
}
inline void section(const std::string& title) { std::printf("== %s\n", title.c_str()); }

// ---------------------------------------------------------------- checking
inline bool all_matched = true;  // false once any check fails: trace_step then exits 1

// Bitwise equality: the stepped pieces run the same kernels on the same inputs in the same order.
inline bool same_values(const Tensor& stepped, const Tensor& own) {
  bool same = stepped.shape() == own.shape() && stepped.dtype() == own.dtype();
  if (same) {
    const std::vector<double> a = stepped.to(Device::cpu()).to(DType::Float64).to_vector<double>();
    const std::vector<double> b = own.to(Device::cpu()).to(DType::Float64).to_vector<double>();
    for (std::size_t i = 0; i < a.size(); ++i) same = same && (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])));
  }
  return same;
}
inline void check_same(const std::string& what, const Tensor& stepped, const Tensor& own) {
  const bool same = same_values(stepped, own);
  std::printf("matches %s: %s\n", what.c_str(), same ? "yes" : "no");
  all_matched = all_matched && same;
}

// ---------------------------------------------------------------- values computed by hand
// A line of values computed by hand, shown x 1000 (gradients here are of order 1e-3), f unscaled.
inline void show(const std::string& name, std::vector<double> v, const Shape& shape, const std::string& role,
                 std::size_t count = 6, double scale = 1000.0) {
  for (double& x : v) x *= scale;
  line(name, from_vector(v, shape), role, count);
}
inline std::vector<double> host(const Tensor& t) { return t.to(Device::cpu()).to(DType::Float64).to_vector<double>(); }
inline std::vector<std::int32_t> host_ints(const Tensor& t) { return t.to(Device::cpu()).to_vector<std::int32_t>(); }

inline void check_close(const std::string& what, const std::vector<double>& by_hand, const std::vector<double>& a) {
  double largest = 0.0, diff = 0.0;
  for (double v : a) largest = std::max(largest, std::abs(v));
  for (std::size_t i = 0; i < a.size() && i < by_hand.size(); ++i) diff = std::max(diff, std::abs(a[i] - by_hand[i]));
  const bool close = a.size() == by_hand.size() && diff <= 1e-5 * std::max(largest, 1e-3);
  std::printf("agrees with %s: %s\n", what.c_str(), close ? "yes" : "no");
  all_matched = all_matched && close;
}
inline void check_close(const std::string& what, const std::vector<double>& by_hand, const Tensor& autograd) {
  check_close(what, by_hand, host(autograd));
}
// Block e of a [E, ...] tensor's values: the elements [e * block, (e + 1) * block).
inline std::vector<double> block_of(const Tensor& t, std::int64_t e) {
  const std::vector<double> all = host(t);
  const auto block = static_cast<std::ptrdiff_t>(all.size() / static_cast<std::size_t>(t.size(0)));
  return std::vector<double>(all.begin() + e * block, all.begin() + (e + 1) * block);
}

}  // namespace moelab::trace
