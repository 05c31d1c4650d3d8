// tests/test_cuda_tensor_cores.cpp — the grouped expert products on the tensor cores
// (cuda/mma_tile_gemm.cuh): TF32 and 3xTF32 for float32 operands (core/backend.h's
// CudaFloat32Products), bf16 operands always. Checked against float64 references computed here,
// not against the CPU kernels, because the tensor cores round differently:
//
//   1. Exact sums. Operands that are small integers (exact in bf16 and TF32) with sums below 2^24:
//      every product and partial sum is exact, so each kind must give the reference bit for bit.
//      This is the test of the layout: a wrong row, column, group, k offset, edge or zeroed row
//      changes a value. Sizes cut the 128 x 128 tile and the 16-deep k-step in every way (groups of
//      1 row to several tiles, empty groups, rows past offsets[E], in and out not multiples of 16).
//   2. Accuracy on random operands (N(0, 1)). The tensor cores accumulate in float32, maybe
//      truncating (NVIDIA does not document the adder's rounding; published measurements on
//      earlier tensor cores found round-toward-zero), so the bound is a worst case over k float32
//      additions: |got - ref| <= (k + 8) 2^-23 sum_k |a b| per element, with ref the float64 sum of
//      the operands as the kind sees them (TF32-rounded for TF32, bf16 for bf16, as given for
//      3xTF32). That bound alone cannot tell TF32 from float32, so the kinds are also compared with
//      each other on the float32 operands: TF32's largest error must be at least 16 times
//      3xTF32's and the CUDA-core float32 kernel's (TF32 rounds each operand to 11 significant
//      bits, about 2^-12 relative; 3xTF32 keeps about 2^-22), so a kind that silently ran as
//      another fails.
//   3. Determinism: every result twice, bit for bit.
// Without a GPU this program is skipped (tests/cuda_test_main.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/random.h"
#include "cuda_parity.h"

using namespace moelab;
using namespace moelab::testing;
namespace k = moelab::kernels;

namespace {

// Sets core/backend.h's float32 product mode for a scope, then back to full float32.
struct Float32ProductsScope {
  explicit Float32ProductsScope(CudaFloat32Products mode) { set_cuda_float32_products(mode); }
  ~Float32ProductsScope() { set_cuda_float32_products(CudaFloat32Products::Float32); }
  Float32ProductsScope(const Float32ProductsScope&) = delete;
  Float32ProductsScope& operator=(const Float32ProductsScope&) = delete;
};

enum class Kind { Float32, TF32, TF32x3, BF16 };

std::string name(Kind kind) {  // (a std::string: doctest prints a const char* as a pointer)
  switch (kind) {
    case Kind::Float32: return "float32 (CUDA cores)";
    case Kind::TF32: return "TF32";
    case Kind::TF32x3: return "3xTF32";
    case Kind::BF16: return "bf16";
  }
  return "?";
}

// A float32 value as TF32 (__float_to_tf32: 10 mantissa bits, to nearest, ties away from zero;
// the value is finite here).
float to_tf32(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  bits = (bits + 0x1000u) & ~0x1FFFu;
  float rounded = 0;
  std::memcpy(&rounded, &bits, sizeof rounded);
  return rounded;
}

// The operands as `kind` multiplies them, as doubles.
std::vector<double> as_seen(const Tensor& t, Kind kind) {
  if (kind == Kind::BF16) return host_values(t.to(DType::BFloat16).to(DType::Float32));
  std::vector<double> values = host_values(t);
  if (kind == Kind::TF32)
    for (double& v : values) v = to_tf32(static_cast<float>(v));
  return values;
}

// A grouped product on the GPU in `kind`; float32 result on the host.
// forward: grouped_matmul(a, b, offsets, trans_w); otherwise grouped_matmul_weight_grad(a, b, offsets, groups).
Tensor on_tensor_cores(Kind kind, bool forward, bool trans_w, const Tensor& a, const Tensor& b,
                       const Tensor& offsets, std::int64_t groups) {
  const CudaFloat32Products mode = kind == Kind::TF32     ? CudaFloat32Products::TF32
                                   : kind == Kind::TF32x3 ? CudaFloat32Products::TF32x3
                                                          : CudaFloat32Products::Float32;
  const Float32ProductsScope scope(mode);
  Tensor ga = on_gpu(a), gb = on_gpu(b);
  if (kind == Kind::BF16) {
    ga = ga.to(DType::BFloat16);
    gb = gb.to(DType::BFloat16);
  }
  const Tensor goff = on_gpu(offsets);
  const auto run = [&] {
    return forward ? k::grouped_matmul(ga, gb, goff, trans_w) : k::grouped_matmul_weight_grad(ga, gb, goff, groups);
  };
  const Tensor first = on_host(run()), second = on_host(run());
  CHECK(first.dtype() == DType::Float32);
  CHECK(same_bits(first, second));  // determinism
  return first;
}

// The float64 reference of a grouped product and, per element, sum_k |a b| (for the bound).
struct Reference {
  std::vector<double> value, magnitude;
  std::int64_t k_max = 0;  // the longest sum
};

// forward: out[r] = x[r] @ op(w[e]) for r in group e, 0 past offsets[E]; x [n, in], w [E, in, out]
// or [E, out, in]. weight grad: dw[e] = x_e^T dy_e; x [n, in], dy [n, out].
Reference reference(bool forward, bool trans_w, const std::vector<double>& a, const std::vector<double>& b,
                    const std::vector<std::int32_t>& offsets, std::int64_t n, std::int64_t in, std::int64_t out) {
  const std::int64_t groups = static_cast<std::int64_t>(offsets.size()) - 1;
  Reference ref;
  if (forward) {
    ref.value.assign(static_cast<std::size_t>(n * out), 0.0);
    ref.magnitude.assign(ref.value.size(), 0.0);
    ref.k_max = in;
    for (std::int64_t e = 0; e < groups; ++e)
      for (std::int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
        for (std::int64_t j = 0; j < out; ++j) {
          double sum = 0, mag = 0;
          for (std::int64_t i = 0; i < in; ++i) {
            const double wv = trans_w ? b[(e * out + j) * in + i] : b[(e * in + i) * out + j];
            sum += a[r * in + i] * wv;
            mag += std::abs(a[r * in + i] * wv);
          }
          ref.value[r * out + j] = sum;
          ref.magnitude[r * out + j] = mag;
        }
  } else {
    ref.value.assign(static_cast<std::size_t>(groups * in * out), 0.0);
    ref.magnitude.assign(ref.value.size(), 0.0);
    for (std::int64_t e = 0; e < groups; ++e) {
      ref.k_max = std::max<std::int64_t>(ref.k_max, offsets[e + 1] - offsets[e]);
      for (std::int64_t i = 0; i < in; ++i)
        for (std::int64_t j = 0; j < out; ++j) {
          double sum = 0, mag = 0;
          for (std::int64_t r = offsets[e]; r < offsets[e + 1]; ++r) {
            sum += a[r * in + i] * b[r * out + j];
            mag += std::abs(a[r * in + i] * b[r * out + j]);
          }
          ref.value[(e * in + i) * out + j] = sum;
          ref.magnitude[(e * in + i) * out + j] = mag;
        }
    }
  }
  return ref;
}

// max over elements of |got - ref| / (sum_k |a b| + tiny), and whether every element is within
// (k + 8) 2^-23 of its sum_k |a b| (exact zeros where the reference's magnitude is 0).
struct Errors {
  double largest = 0;
  bool within_bound = true;
};
Errors errors(const Tensor& got, const Reference& ref) {
  const std::vector<double> values = host_values(got);
  REQUIRE(values.size() == ref.value.size());
  Errors result;
  const double bound = static_cast<double>(ref.k_max + 8) * std::ldexp(1.0, -23);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double error = std::abs(values[i] - ref.value[i]);
    if (ref.magnitude[i] == 0) {
      if (values[i] != 0) result.within_bound = false;
      continue;
    }
    result.largest = std::max(result.largest, error / ref.magnitude[i]);
    if (error > bound * ref.magnitude[i]) result.within_bound = false;
  }
  return result;
}

// One grouped problem: operands, offsets, sizes.
struct Problem {
  Tensor a, b, offsets;
  std::vector<std::int32_t> offset_values;
  std::int64_t n, in, out, groups;
  bool forward, trans_w;
};

Problem make_problem(bool forward, bool trans_w, std::int64_t n, std::int64_t in, std::int64_t out,
                     const std::vector<std::int32_t>& offsets, bool integers, Generator& gen) {
  const std::int64_t groups = static_cast<std::int64_t>(offsets.size()) - 1;
  const auto draw = [&](const Shape& shape) { return integers ? randint(shape, -2, 3, gen).to(DType::Float32) : randn(shape, gen); };
  Problem p{draw({n, in}), Tensor(), from_vector(offsets, {groups + 1}), offsets, n, in, out, groups, forward, trans_w};
  p.b = forward ? (trans_w ? draw({groups, out, in}) : draw({groups, in, out})) : draw({n, out});
  return p;
}

Reference reference_for(const Problem& p, Kind kind) {
  return reference(p.forward, p.trans_w, as_seen(p.a, kind), as_seen(p.b, kind), p.offset_values, p.n, p.in, p.out);
}

std::string what(const Problem& p) {
  return p.forward ? (p.trans_w ? "forward, w transposed" : "forward") : "weight gradient";
}

// The problems of both tests: every product the MoE layers use (forward with w as stored and
// transposed: the backward's dx; the weight gradient), on sizes that cut the tiles every way.
std::vector<Problem> problems(bool integers, Generator& gen) {
  std::vector<Problem> all;
  // 700 rows in 5 groups: 1 row, 129, none, 257, 303, and 10 rows past offsets[E].
  const std::vector<std::int32_t> ragged{0, 1, 130, 130, 387, 690};
  // Narrow and odd widths: a partial k-step (37 = 2 x 16 + 5) and a partial column fragment (45).
  const std::vector<std::int32_t> small{0, 20, 20, 61, 64};
  for (const bool forward : {true, false})
    for (const bool trans_w : forward ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
      all.push_back(make_problem(forward, trans_w, 700, 200, 300, ragged, integers, gen));
      all.push_back(make_problem(forward, trans_w, 70, 37, 45, small, integers, gen));
    }
  return all;
}

}  // namespace

TEST_CASE("tensor-core grouped products: small-integer operands give the exact sums in every kind") {
  Generator gen(41);
  for (const Problem& p : problems(true, gen))
    for (const Kind kind : {Kind::TF32, Kind::TF32x3, Kind::BF16, Kind::Float32}) {
      INFO(name(kind), ", ", what(p), ", n = ", p.n, ", in = ", p.in, ", out = ", p.out);
      const Tensor got = on_tensor_cores(kind, p.forward, p.trans_w, p.a, p.b, p.offsets, p.groups);
      const Reference ref = reference_for(p, kind);
      const std::vector<double> values = host_values(got);
      REQUIRE(values.size() == ref.value.size());
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < values.size(); ++i) wrong += values[i] != ref.value[i];
      CHECK(wrong == 0);
    }
}

TEST_CASE("tensor-core grouped products: accuracy of each kind, and TF32 is not float32") {
  Generator gen(42);
  for (const Problem& p : problems(false, gen)) {
    INFO(what(p), ", n = ", p.n, ", in = ", p.in, ", out = ", p.out);
    const Reference exact = reference_for(p, Kind::Float32);  // the float32 operands as given
    Errors against_given[4];
    for (const Kind kind : {Kind::Float32, Kind::TF32, Kind::TF32x3, Kind::BF16}) {
      INFO(name(kind));
      const Tensor got = on_tensor_cores(kind, p.forward, p.trans_w, p.a, p.b, p.offsets, p.groups);
      // Within the float32 accumulation bound of the sum of the operands as this kind sees them.
      CHECK(errors(got, reference_for(p, kind)).within_bound);
      against_given[static_cast<int>(kind)] = errors(got, exact);
      MESSAGE(name(kind), ": largest error against the float32 operands' exact sum ",
              against_given[static_cast<int>(kind)].largest, " of sum |a b|");
    }
    const double tf32 = against_given[static_cast<int>(Kind::TF32)].largest;
    CHECK(tf32 > 16 * against_given[static_cast<int>(Kind::TF32x3)].largest);
    CHECK(tf32 > 16 * against_given[static_cast<int>(Kind::Float32)].largest);
    CHECK(against_given[static_cast<int>(Kind::TF32x3)].within_bound);  // float32 accuracy
  }
}
