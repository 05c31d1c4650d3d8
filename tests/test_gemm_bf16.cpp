// tests/test_gemm_bf16.cpp — the pairwise bf16 GEMM (core/cpu/gemm_bf16.h): packing, tiles and
// threads against the definition, the VDPBF16PS kernel against its emulation where the CPU has
// AVX512_BF16, and the CPU matmul's choice between it and widening.
//
// The definition, written here independently of the kernel's packing: element (i, j) of C is one
// chain over the pairs q = 0, 1, ... of k: acc = step(a(i, 2q+1), b(2q+1, j), acc), then
// acc = step(a(i, 2q), b(2q, j), acc), from 0, a missing partner (odd k) being 0; step is a float32
// FMA with subnormal inputs read as zero and a subnormal result flushed to zero (Intel's manual for
// VDPBF16PS). The emulated kernel must give it bitwise, for every shape, transposition and thread
// count. Against the widened float32 GEMM (products summed in order) the difference is float32
// rounding of two different chains of length k, each within k 2^-24 sum|a b|, plus the flushed
// subnormals (at most 2k FLT_MIN): the bound 2 (k 2^-24 sum|a b| + k FLT_MIN).
// The instruction's kernel is compared with the emulation to that same bound (not bitwise: an
// implementation may round its two steps differently from the manual's text; the test reports how
// many elements are bitwise equal). On a CPU without AVX512_BF16 it is not run, and the test says so.
// The AMX kernel (TDPBF16PS, 16 pairs an instruction, summed in an order of the hardware's own) is
// held to the same bound against the emulation where the CPU has AMX-BF16 (the inner dimension
// padded with zero pairs to a multiple of 16: bounds of k terms still hold, zeros adding nothing).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/bfloat16.h"
#include "core/cpu/gemm_bf16.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/parallel.h"
#include "core/random.h"

using namespace moelab;
using namespace moelab::cpu;

namespace {

struct Shape3 {
  std::int64_t m, k, n;
};

// Varied bf16 values: mostly in [-2, 2], some tiny (their products underflow to subnormals, which
// the instruction flushes), some subnormal themselves (read as zero), some zeros.
std::vector<std::uint16_t> random_bf16(std::int64_t count, std::uint64_t seed) {
  std::vector<std::uint16_t> v(static_cast<std::size_t>(count));
  std::uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(state >> 11) / 9007199254740992.0;  // [0, 1)
    float value = static_cast<float>(u * 4.0 - 2.0);
    const int kind = static_cast<int>((state >> 3) % 40);
    if (kind == 0) value *= 1e-20f;    // products near 1e-40: subnormal
    if (kind == 1) value *= 1e-39f;    // a subnormal input
    if (kind == 2) value = 0.0f;
    x = BFloat16::from_float(value).bits;
  }
  return v;
}

float to_float(std::uint16_t bits) {
  const std::uint32_t word = static_cast<std::uint32_t>(bits) << 16;
  float x;
  std::memcpy(&x, &word, sizeof(x));
  return x;
}
float zero_if_subnormal(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }
float step(float a, float b, float acc) {
  return zero_if_subnormal(std::fma(zero_if_subnormal(a), zero_if_subnormal(b), zero_if_subnormal(acc)));
}

// op(A)(i, p) for A stored [m, k] (or [k, m] when transposed); 0 past k.
float element(const std::vector<std::uint16_t>& x, std::int64_t rows, std::int64_t inner, bool trans, std::int64_t i,
              std::int64_t p) {
  if (p >= inner) return 0.0f;
  return to_float(trans ? x[static_cast<std::size_t>(p * rows + i)] : x[static_cast<std::size_t>(i * inner + p)]);
}

// The definition of the header, element by element.
std::vector<float> pairwise_reference(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b, Shape3 s,
                                      bool trans_a, bool trans_b) {
  std::vector<float> c(static_cast<std::size_t>(s.m * s.n));
  for (std::int64_t i = 0; i < s.m; ++i)
    for (std::int64_t j = 0; j < s.n; ++j) {
      float acc = 0.0f;
      for (std::int64_t p = 0; p < s.k; p += 2) {
        // op(B)(p, j) for B stored [k, n] (or [n, k] when transposed) is op(B)^T(j, p).
        acc = step(element(a, s.m, s.k, trans_a, i, p + 1), element(b, s.n, s.k, !trans_b, j, p + 1), acc);
        acc = step(element(a, s.m, s.k, trans_a, i, p), element(b, s.n, s.k, !trans_b, j, p), acc);
      }
      c[static_cast<std::size_t>(i * s.n + j)] = acc;
    }
  return c;
}

// The float32 GEMM on the widened operands (kernels::matmul on float32 tensors), and the bound.
std::vector<float> widened_product(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b, Shape3 s,
                                   bool trans_a, bool trans_b) {
  std::vector<float> af(a.size()), bf(b.size());
  for (std::size_t i = 0; i < a.size(); ++i) af[i] = to_float(a[i]);
  for (std::size_t i = 0; i < b.size(); ++i) bf[i] = to_float(b[i]);
  const Tensor ta = from_vector(af, trans_a ? moelab::Shape{s.k, s.m} : moelab::Shape{s.m, s.k});
  const Tensor tb = from_vector(bf, trans_b ? moelab::Shape{s.n, s.k} : moelab::Shape{s.k, s.n});
  return kernels::matmul(ta, tb, trans_a, trans_b).to_vector<float>();
}

double bound(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b, Shape3 s, bool trans_a,
             bool trans_b, std::int64_t i, std::int64_t j) {
  double sum_abs = 0.0;
  for (std::int64_t p = 0; p < s.k; ++p)
    sum_abs += std::abs(double(element(a, s.m, s.k, trans_a, i, p)) * element(b, s.n, s.k, !trans_b, j, p));
  const double k = static_cast<double>(s.k);
  return 2.0 * (k * std::ldexp(1.0, -24) * sum_abs + k * std::numeric_limits<float>::min());
}

bool bitwise_equal(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

std::vector<float> run(Bf16DotKernel kernel, const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b,
                       Shape3 s, bool trans_a, bool trans_b) {
  std::vector<float> c(static_cast<std::size_t>(s.m * s.n), std::numeric_limits<float>::quiet_NaN());
  gemm_bf16(kernel, a.data(), b.data(), c.data(), s.m, s.k, s.n, trans_a, trans_b);
  return c;
}

// Full and edge tiles, odd k, one and several 128-pair blocks (k 300 and 513 > 256).
// For AMX: 32-row panels whole and not ({64, 64, 64} and {70, 32, 96} read A in place; k 300's
// second block of 22 pairs is padded to 32; {33, 64, 32} one row past a panel).
const std::vector<Shape3> kShapes{{1, 1, 1},    {13, 7, 33}, {12, 256, 32}, {25, 257, 65}, {40, 300, 70},
                                  {5, 513, 9},  {24, 2, 64}, {64, 64, 64},  {70, 32, 96},  {33, 64, 32}};

// Calls check(s, trans_a, trans_b, a, b) for every shape of kShapes and transposition, with fresh
// random operands from `seed` on.
template <class Check>
void for_every_case(std::uint64_t seed, Check&& check) {
  for (const Shape3 s : kShapes)
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true}) {
        CAPTURE(s.m);
        CAPTURE(s.k);
        CAPTURE(s.n);
        CAPTURE(trans_a);
        CAPTURE(trans_b);
        const auto a = random_bf16(s.m * s.k, seed++), b = random_bf16(s.k * s.n, seed++);
        check(s, trans_a, trans_b, a, b);
      }
}

// A kernel with an instruction against the emulated chain on every case from `seed` on: each
// element within the bound, and how many of them are bitwise equal (equal, elements).
std::pair<std::int64_t, std::int64_t> against_emulation(Bf16DotKernel kernel, std::uint64_t seed) {
  std::int64_t elements = 0, equal = 0;
  for_every_case(seed, [&](Shape3 s, bool trans_a, bool trans_b, const std::vector<std::uint16_t>& a,
                           const std::vector<std::uint16_t>& b) {
    const std::vector<float> native = run(kernel, a, b, s, trans_a, trans_b);
    const std::vector<float> emulated = run(Bf16DotKernel::Emulated, a, b, s, trans_a, trans_b);
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j) {
        const auto at = static_cast<std::size_t>(i * s.n + j);
        CHECK(std::abs(double(native[at]) - emulated[at]) <= bound(a, b, s, trans_a, trans_b, i, j));
        ++elements;
        equal += std::memcmp(&native[at], &emulated[at], sizeof(float)) == 0;
      }
  });
  return {equal, elements};
}

}  // namespace

TEST_CASE("gemm_bf16, emulated: the pairwise chain bitwise, every shape and transposition") {
  for_every_case(1, [](Shape3 s, bool trans_a, bool trans_b, const std::vector<std::uint16_t>& a,
                       const std::vector<std::uint16_t>& b) {
    const std::vector<float> got = run(Bf16DotKernel::Emulated, a, b, s, trans_a, trans_b);
    CHECK(bitwise_equal(got, pairwise_reference(a, b, s, trans_a, trans_b)));
    // Against the widened float32 product: float32 rounding apart, and not bitwise the same
    // computation (the test would not notice a kernel that widened instead).
    const std::vector<float> widened = widened_product(a, b, s, trans_a, trans_b);
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j) {
        const auto at = static_cast<std::size_t>(i * s.n + j);
        CHECK(std::abs(double(got[at]) - widened[at]) <= bound(a, b, s, trans_a, trans_b, i, j));
      }
  });
}

TEST_CASE("gemm_bf16_strided and a B packed once (gemm_bf16_packed): gemm_bf16's bits on blocks and column prefixes") {
  // Both kernels where the CPU has the instruction; each product is a block of larger matrices
  // (rows lda, ldb, ldc apart), and the packed B serves a product of every column count up to n.
  std::vector<Bf16DotKernel> kernels{Bf16DotKernel::Emulated};
  if (cpu_has_avx512_bf16()) kernels.push_back(Bf16DotKernel::Avx512Bf16);
  if (cpu_has_amx_bf16()) kernels.push_back(Bf16DotKernel::Amx);
  for (const Bf16DotKernel kernel : kernels)
    for_every_case(300, [&](Shape3 s, bool trans_a, bool trans_b, const std::vector<std::uint16_t>& a,
                            const std::vector<std::uint16_t>& b) {
      const std::vector<float> whole = run(kernel, a, b, s, trans_a, trans_b);
      // The operands inside wider matrices: 3 more elements a row, garbage there.
      const std::int64_t a_rows = trans_a ? s.k : s.m, a_cols = trans_a ? s.m : s.k;
      const std::int64_t b_rows = trans_b ? s.n : s.k, b_cols = trans_b ? s.k : s.n;
      const std::int64_t lda = a_cols + 3, ldb = b_cols + 3, ldc = s.n + 3;
      std::vector<std::uint16_t> wide_a(static_cast<std::size_t>(a_rows * lda), 0x7FC0), wide_b(static_cast<std::size_t>(b_rows * ldb), 0x7FC0);
      for (std::int64_t r = 0; r < a_rows; ++r)
        for (std::int64_t c = 0; c < a_cols; ++c) wide_a[static_cast<std::size_t>(r * lda + c)] = a[static_cast<std::size_t>(r * a_cols + c)];
      for (std::int64_t r = 0; r < b_rows; ++r)
        for (std::int64_t c = 0; c < b_cols; ++c) wide_b[static_cast<std::size_t>(r * ldb + c)] = b[static_cast<std::size_t>(r * b_cols + c)];
      const auto block_of = [&](const std::vector<float>& c, std::int64_t n) {
        std::vector<float> out;
        for (std::int64_t i = 0; i < s.m; ++i)
          for (std::int64_t j = 0; j < n; ++j) out.push_back(c[static_cast<std::size_t>(i * ldc + j)]);
        return out;
      };
      const auto prefix_of = [&](std::int64_t n) {
        std::vector<float> out;
        for (std::int64_t i = 0; i < s.m; ++i)
          for (std::int64_t j = 0; j < n; ++j) out.push_back(whole[static_cast<std::size_t>(i * s.n + j)]);
        return out;
      };
      std::vector<float> c(static_cast<std::size_t>(s.m * ldc), std::numeric_limits<float>::quiet_NaN());
      gemm_bf16_strided(kernel, wide_a.data(), lda, wide_b.data(), ldb, c.data(), ldc, s.m, s.k, s.n, trans_a, trans_b);
      CHECK(bitwise_equal(block_of(c, s.n), whole));
      Bf16PackedB packed;
      pack_bf16_b(kernel, wide_b.data(), ldb, s.k, s.n, trans_b, packed);
      for (const std::int64_t n : {s.n, (s.n + 1) / 2, std::int64_t{1}}) {
        CAPTURE(n);
        std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
        gemm_bf16_packed(kernel, wide_a.data(), lda, packed, n, c.data(), ldc, s.m, trans_a);
        CHECK(bitwise_equal(block_of(c, n), prefix_of(n)));
      }
    });
}

TEST_CASE("gemm_bf16, emulated: differs from the in-order float32 sum where rounding says it must") {
  // A kernel that widened and summed in order would pass the bound above: on inputs spread over
  // many magnitudes the pairwise chain must differ from the in-order float32 sum somewhere.
  const Shape3 s{8, 64, 8};
  std::vector<std::uint16_t> a(static_cast<std::size_t>(s.m * s.k)), b(static_cast<std::size_t>(s.k * s.n));
  for (std::size_t i = 0; i < a.size(); ++i)
    a[i] = BFloat16::from_float(std::ldexp(1.0f + static_cast<float>(i % 7) / 8.0f, static_cast<int>(i % 23) - 11)).bits;
  for (std::size_t i = 0; i < b.size(); ++i)
    b[i] = BFloat16::from_float((i % 2 ? -1.0f : 1.0f) * (1.0f + static_cast<float>(i % 5) / 4.0f)).bits;
  const std::vector<float> pairwise = run(Bf16DotKernel::Emulated, a, b, s, false, false);
  const std::vector<float> widened = widened_product(a, b, s, false, false);
  CHECK_FALSE(bitwise_equal(pairwise, widened));
}

TEST_CASE("gemm_bf16: no bit depends on the thread count") {
  const Shape3 s{200, 300, 100};  // 12 MFLOP: several threads when allowed
  const auto a = random_bf16(s.m * s.k, 91), b = random_bf16(s.k * s.n, 92);
  const int before = num_threads();
  set_num_threads(1);
  const std::vector<float> one = run(Bf16DotKernel::Emulated, a, b, s, false, true);
  set_num_threads(4);
  const std::vector<float> four = run(Bf16DotKernel::Emulated, a, b, s, false, true);
  set_num_threads(before);
  CHECK(bitwise_equal(one, four));
  CHECK(bitwise_equal(one, pairwise_reference(a, b, s, false, true)));
  if (cpu_has_amx_bf16()) {  // each thread configures its own tiles; a transposed A packs per thread
    for (const bool trans_a : {false, true}) {
      CAPTURE(trans_a);
      set_num_threads(1);
      const std::vector<float> amx_one = run(Bf16DotKernel::Amx, a, b, s, trans_a, true);
      set_num_threads(4);
      const std::vector<float> amx_four = run(Bf16DotKernel::Amx, a, b, s, trans_a, true);
      set_num_threads(before);
      CHECK(bitwise_equal(amx_one, amx_four));
    }
  }
}

TEST_CASE("gemm_bf16: the VDPBF16PS kernel against the emulation, where the CPU has AVX512_BF16") {
  if (!cpu_has_avx512_bf16()) {
    MESSAGE("this CPU has no AVX512_BF16: the VDPBF16PS kernel is not run here (the emulation is tested above)");
    CHECK_THROWS_AS(run(Bf16DotKernel::Avx512Bf16, {1}, {1}, Shape3{1, 1, 1}, false, false), Error);
    return;
  }
  const auto [equal, elements] = against_emulation(Bf16DotKernel::Avx512Bf16, 100);
  MESSAGE("VDPBF16PS kernel: " << equal << " of " << elements << " elements bitwise equal to the emulated chain");
}

TEST_CASE("gemm_bf16: the AMX kernel against the emulation, where the CPU has AMX-BF16") {
  if (!cpu_has_amx_bf16()) {
    MESSAGE("this CPU has no AMX-BF16 (or Linux did not grant the tiles): the AMX kernel is not run here");
    CHECK_THROWS_AS(run(Bf16DotKernel::Amx, {1}, {1}, Shape3{1, 1, 1}, false, false), Error);
    return;
  }
  const auto [equal, elements] = against_emulation(Bf16DotKernel::Amx, 200);
  MESSAGE("AMX kernel: " << equal << " of " << elements << " elements bitwise equal to the emulated chain");
  // The padding pairs must be zero in both operands, whatever an earlier product left in the
  // reused buffers: a product of NaNs over 32 pairs, then one of a single pair (padded to 16).
  const std::vector<std::uint16_t> nan_a(32 * 64, 0x7FC0), nan_b(64 * 32, 0x7FC0);
  run(Bf16DotKernel::Amx, nan_a, nan_b, Shape3{32, 64, 32}, false, false);
  run(Bf16DotKernel::Amx, nan_a, nan_b, Shape3{32, 64, 32}, true, false);
  const Shape3 one_pair{40, 2, 40};
  const auto a = random_bf16(one_pair.m * one_pair.k, 7), b = random_bf16(one_pair.k * one_pair.n, 8);
  for (const bool trans_a : {false, true}) {
    const std::vector<float> amx = run(Bf16DotKernel::Amx, a, b, one_pair, trans_a, false);
    CHECK(std::none_of(amx.begin(), amx.end(), [](float x) { return std::isnan(x); }));
    // A thread keeps its tiles configured between products; once released, the next product
    // configures them again (and gives the same bits).
    gemm_bf16_detail::amx_tiles_end();
    CHECK(bitwise_equal(run(Bf16DotKernel::Amx, a, b, one_pair, trans_a, false), amx));
  }
  // A last panel of 16 rows or fewer runs the block's top half: its rows get the bits the whole
  // block gives them (here rows 32..39 of a 40-row product, and of a 56-row one whose last panel
  // has 24 rows), for a row-major and a transposed A.
  for (const bool trans_a : {false, true}) {
    CAPTURE(trans_a);
    const Shape3 tall{56, 96, 40}, short_{40, 96, 40};
    const auto a56 = random_bf16(tall.m * tall.k, 31), b96 = random_bf16(tall.k * tall.n, 32);
    std::vector<std::uint16_t> a40(static_cast<std::size_t>(short_.m * short_.k));
    for (std::int64_t i = 0; i < short_.m; ++i)
      for (std::int64_t p = 0; p < short_.k; ++p) {
        const std::size_t from = static_cast<std::size_t>(trans_a ? p * tall.m + i : i * tall.k + p);
        a40[static_cast<std::size_t>(trans_a ? p * short_.m + i : i * short_.k + p)] = a56[from];
      }
    const std::vector<float> whole = run(Bf16DotKernel::Amx, a56, b96, tall, trans_a, false);
    const std::vector<float> top = run(Bf16DotKernel::Amx, a40, b96, short_, trans_a, false);
    CHECK(std::memcmp(whole.data(), top.data(), top.size() * sizeof(float)) == 0);
  }
  // A packed B belongs to the kernel it was packed for (AMX pads the pairs).
  Bf16PackedB packed;
  pack_bf16_b(Bf16DotKernel::Amx, std::vector<std::uint16_t>(4, 0).data(), 2, 2, 2, false, packed);
  float c[2];
  CHECK_THROWS_AS(gemm_bf16_packed(Bf16DotKernel::Emulated, std::vector<std::uint16_t>(2, 0).data(), 2, packed, 2, c, 2,
                                   1, false),
                  Error);
}

TEST_CASE("CPU matmul of bfloat16 operands: the CPU's bf16 instruction where it has one, else the widened float32 GEMM") {
  Generator gen(5);
  const Tensor a = normal({37, 70}, 0.0, 1.0, gen).to(DType::BFloat16);
  const Tensor b = normal({70, 45}, 0.0, 1.0, gen).to(DType::BFloat16);
  const std::vector<float> got = kernels::matmul(a, b).to_vector<float>();
  const std::vector<float> widened = kernels::matmul(a.to(DType::Float32), b.to(DType::Float32)).to_vector<float>();
  if (use_native_bf16_gemm()) {
    std::vector<float> native(got.size());
    gemm_bf16(native_bf16_kernel(), reinterpret_cast<const std::uint16_t*>(a.data<BFloat16>()),
              reinterpret_cast<const std::uint16_t*>(b.data<BFloat16>()), native.data(), 37, 70, 45, false, false);
    CHECK(bitwise_equal(got, native));
    // The default is the fastest kernel the CPU has (MOELAB_CPU_BF16 unset or native).
    const char* setting = std::getenv("MOELAB_CPU_BF16");
    if (!setting || std::string(setting) == "native")
      CHECK(native_bf16_kernel() == (cpu_has_amx_bf16() ? Bf16DotKernel::Amx : Bf16DotKernel::Avx512Bf16));
    MESSAGE("bfloat16 products run on the " << std::string(bf16_kernel_name(native_bf16_kernel())) << " kernel");
  } else {
    MESSAGE("bfloat16 products widen to the float32 GEMM here (no AVX512_BF16, MOELAB_CPU_ISA below avx512, or MOELAB_CPU_BF16=widen)");
    CHECK(bitwise_equal(got, widened));
  }
}

TEST_CASE("CPU grouped products of bfloat16 operands: the CPU's bf16 instruction per group where it has one, else widened") {
  Generator gen(6);
  // 4 groups over 30 rows: 7, 0 (an empty group), 15, 5; rows 27..29 in no group (their output is 0).
  const Tensor offsets = from_vector(std::vector<std::int32_t>{0, 7, 7, 22, 27}, {5});
  const Tensor x = normal({30, 40}, 0.0, 1.0, gen).to(DType::BFloat16);
  const Tensor w = normal({4, 40, 33}, 0.0, 1.0, gen).to(DType::BFloat16);
  const Tensor wt = normal({4, 33, 40}, 0.0, 1.0, gen).to(DType::BFloat16);
  const Tensor dy = normal({30, 33}, 0.0, 1.0, gen).to(DType::BFloat16);
  const Tensor out = kernels::grouped_matmul(x, w, offsets);
  const Tensor out_t = kernels::grouped_matmul(x, wt, offsets, true);
  const Tensor dw = kernels::grouped_matmul_weight_grad(x, dy, offsets, 4);
  CHECK(out.dtype() == DType::Float32);
  CHECK(dw.dtype() == DType::Float32);
  const auto f32 = [](const Tensor& t) { return t.to(DType::Float32); };
  if (!use_native_bf16_gemm()) {
    CHECK(bitwise_equal(out.to_vector<float>(), kernels::grouped_matmul(f32(x), f32(w), offsets).to_vector<float>()));
    CHECK(bitwise_equal(out_t.to_vector<float>(),
                        kernels::grouped_matmul(f32(x), f32(wt), offsets, true).to_vector<float>()));
    CHECK(bitwise_equal(dw.to_vector<float>(),
                        kernels::grouped_matmul_weight_grad(f32(x), f32(dy), offsets, 4).to_vector<float>()));
    return;
  }
  // Natively: each group's rows (and each expert's gradient) are that group's gemm_bf16.
  const auto bits = [](const Tensor& t) { return reinterpret_cast<const std::uint16_t*>(t.data<BFloat16>()); };
  const std::vector<std::int64_t> starts{0, 7, 7, 22, 27};
  const std::vector<float> got = out.to_vector<float>(), got_t = out_t.to_vector<float>(), got_dw = dw.to_vector<float>();
  for (std::int64_t e = 0; e < 4; ++e) {
    const std::int64_t r0 = starts[e], rows = starts[e + 1] - r0;
    std::vector<float> expect(static_cast<std::size_t>(std::max<std::int64_t>(rows, 1) * 33));
    if (rows > 0) {
      gemm_bf16(native_bf16_kernel(), bits(x) + r0 * 40, bits(w) + e * 40 * 33, expect.data(), rows, 40, 33, false,
                false);
      CHECK(std::memcmp(expect.data(), got.data() + r0 * 33, rows * 33 * sizeof(float)) == 0);
      gemm_bf16(native_bf16_kernel(), bits(x) + r0 * 40, bits(wt) + e * 33 * 40, expect.data(), rows, 40, 33,
                false, true);
      CHECK(std::memcmp(expect.data(), got_t.data() + r0 * 33, rows * 33 * sizeof(float)) == 0);
    }
    std::vector<float> expect_dw(40 * 33, 0.0f);
    if (rows > 0)
      gemm_bf16(native_bf16_kernel(), bits(x) + r0 * 40, bits(dy) + r0 * 33, expect_dw.data(), 40, rows, 33, true,
                false);
    CHECK(std::memcmp(expect_dw.data(), got_dw.data() + e * 40 * 33, expect_dw.size() * sizeof(float)) == 0);
  }
  for (std::size_t i = 27 * 33; i < got.size(); ++i) CHECK(got[i] == 0.0f);
}
