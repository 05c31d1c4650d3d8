// tests/cuda_parity.h — running a kernel on the CPU and on the GPU and comparing, shared by
// tests/test_cuda_parity.cpp and tests/test_cuda_parity_2.cpp.
//
// check_parity(op, inputs, tol) calls op (any function of a list of tensors that returns a list
// of tensors, built from the public kernels of core/kernels.h) once on the CPU inputs and once on
// copies of them on Device::cuda(), and requires for every output:
//   - the CUDA result lives on the GPU and has the CPU result's shape and dtype;
//   - int32 results, and any result when tol == kExact, are bitwise equal to the CPU's;
//   - float results otherwise satisfy max |gpu - cpu| / (1 + |cpu|) <= tol (an absolute error
//     near 0, a relative one for large values; NaN must meet NaN, infinities must be equal);
// then calls op a second time on the same CUDA inputs and requires bitwise the same outputs as
// the first CUDA call (determinism: no atomics, no order that depends on thread timing).
// check_parity_f64 does the same after converting the float inputs to float64.
//
// Tolerances (float32: a few ulps of accumulated rounding; float64: the same idea at 1e-16):
//   kTol32 = 1e-5    elementwise maths, reductions, softmax, cross-entropy, norms, rope
//   kTolGemm32 = 1e-4  matrix products (float32 sums over K in another order; no TF32)
//   kTol64 = 1e-12   every float64 comparison
//   kExact           gathers, scatters (the GPU adds in the CPU's order), copies, casts, shape
//                    ops, masks, top-k, argsort, max, the optimizer updates (same IEEE ops)
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "core/backend.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/tensor.h"
#ifdef MOELAB_HAVE_CUDA
#include "cuda/context.h"
#endif

namespace moelab::testing {

using Tensors = std::vector<Tensor>;
using Op = std::function<Tensors(const Tensors&)>;

inline constexpr double kExact = -1.0;
inline constexpr double kTol32 = 1e-5;
inline constexpr double kTolGemm32 = 1e-4;
inline constexpr double kTol64 = 1e-12;

inline Tensor on_host(const Tensor& t) { return t.to(Device::cpu()); }
inline Tensor on_gpu(const Tensor& t) { return t.to(Device::cuda()); }

// Any tensor's values as doubles, read on the host (every float32 and int32 is exact in double).
inline std::vector<double> host_values(const Tensor& t) {
  const Tensor h = on_host(t);
  if (h.dtype() == DType::Float64) return h.to_vector<double>();
  if (h.dtype() == DType::Float32) {
    const std::vector<float> v = h.to_vector<float>();
    return std::vector<double>(v.begin(), v.end());
  }
  const std::vector<std::int32_t> v = h.to_vector<std::int32_t>();
  return std::vector<double>(v.begin(), v.end());
}

// Same dtype, shape and bytes.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ha = on_host(a), hb = on_host(b);
  return a.numel() == 0 || std::memcmp(ha.raw(), hb.raw(), ha.nbytes()) == 0;
}

// max |got - want| / (1 + |want|), NaN matching NaN and equal values (infinities too) exact.
inline double parity_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = host_values(got), w = host_values(want);
  REQUIRE(g.size() == w.size());
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]))) continue;
    const double err = std::abs(g[i] - w[i]) / (1.0 + std::abs(w[i]));
    worst = std::isfinite(err) ? std::max(worst, err) : std::numeric_limits<double>::infinity();
  }
  return worst;
}

inline Tensors to_gpu(const Tensors& xs) {
  Tensors out;
  for (const Tensor& x : xs) out.push_back(x.defined() ? on_gpu(x) : x);
  return out;
}

// Float inputs converted to float64 (int32 inputs unchanged).
inline Tensors to_f64(const Tensors& xs) {
  Tensors out;
  for (const Tensor& x : xs) out.push_back(x.defined() && is_floating(x.dtype()) ? x.to(DType::Float64) : x);
  return out;
}

// Compares one CUDA result with the CPU's (see the header for the rules).
inline void check_close(const Tensor& got, const Tensor& want, double tol) {
  REQUIRE(got.defined() == want.defined());
  if (!want.defined()) return;
  CHECK(got.device().is_cuda());
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.shape() == want.shape());
  if (tol == kExact || want.dtype() == DType::Int32) {
    CHECK(same_bits(got, want));
  } else {
    const double err = parity_error(got, want);
    INFO("max error ", err, " tolerance ", tol);
    CHECK(err <= tol);
  }
}

inline void check_parity(const Op& op, const Tensors& cpu_inputs, double tol) {
  REQUIRE(cuda_available());
  const Tensors want = op(cpu_inputs);
  const Tensors gpu_inputs = to_gpu(cpu_inputs);
  const Tensors got = op(gpu_inputs);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("output ", i);
    check_close(got[i], want[i], tol);
  }
  const Tensors again = op(gpu_inputs);
  REQUIRE(again.size() == got.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("determinism, output ", i);
    CHECK((!got[i].defined() || same_bits(again[i], got[i])));
  }
}

// float32 with tol32, then the same inputs in float64 with tol64 (kExact stays exact).
inline void check_parity_both(const Op& op, const Tensors& inputs, double tol32, double tol64 = kTol64) {
  {
    INFO("float32");
    check_parity(op, inputs, tol32);
  }
  {
    INFO("float64");
    check_parity(op, to_f64(inputs), tol32 == kExact ? kExact : tol64);
  }
}

// Runs body() with the specialised kernels and again with the general ones (MOELAB_CUDA_GENERIC,
// cuda/context.h), for ops that have both: a short-row softmax, a permute in 16-byte words.
inline void with_each_kernel_path(const std::function<void()>& body) {
#ifdef MOELAB_HAVE_CUDA
  struct Restore {
    bool before = cuda::generic_kernels();
    ~Restore() { cuda::set_generic_kernels(before); }
  } restore;
  for (bool generic : {false, true}) {
    const char* path = generic ? "general kernels" : "specialised kernels";
    INFO(path);
    cuda::set_generic_kernels(generic);
    body();
  }
#else
  body();
#endif
}

// Random inputs (drawn on the host, so both devices see the same values).
inline Tensor randn(const Shape& shape, Generator& gen) { return normal(shape, 0.0, 1.0, gen); }
inline Tensor randu(const Shape& shape, double low, double high, Generator& gen) {
  return uniform(shape, low, high, gen);
}
// Integers uniform in [low, high) as int32.
inline Tensor randint(const Shape& shape, std::int32_t low, std::int32_t high, Generator& gen) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(shape.numel()));
  for (std::int32_t& x : v) x = low + static_cast<std::int32_t>(gen.next_below(static_cast<std::uint32_t>(high - low)));
  return from_vector(v, shape);
}
// Float32 values on a coarse grid (multiples of 0.5 in [-2, 2]): many exact ties.
inline Tensor rand_ties(const Shape& shape, Generator& gen) {
  std::vector<float> v(static_cast<std::size_t>(shape.numel()));
  for (float& x : v) x = 0.5f * (static_cast<float>(gen.next_below(9)) - 4.0f);
  return from_vector(v, shape);
}

}  // namespace moelab::testing
