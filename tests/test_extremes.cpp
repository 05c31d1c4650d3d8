// tests/test_extremes.cpp — every unary op of the op table, and exp, log, sigmoid, tanh, softmax,
// log-softmax and cross-entropy in detail, at the ends of the floating-point range, in float32 and
// float64, exactly as IEEE arithmetic says.
//
// The table walk (check_every_unary_op_at_the_extremes) needs no line per op: each op of
// core/kernels/elementwise_ops.h is checked against its long-double reference
// (tests/unary_reference.h) at the edges of every domain.
//
// The CPU kernels evaluate these on whole vectors (Eigen's SIMD approximations, whose range
// handling differs between SSE, AVX2 and AVX-512: core/cpu/exact_math.h), and the single elements
// at the unaligned ends of an array through one lane of the same code. Every input below therefore
// appears at every position modulo 16 of a long array, so each one goes through the vector code of
// whatever instruction set this binary was built for, and through the scalar code too. Expected values:
// exactly std::exp / std::log in the same precision outside the vector code's exact range (0 on
// underflow, inf on overflow, subnormals where IEEE has them, NaN in, NaN out), and within a few
// ulps inside it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cpu/exact_math.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/kernels/elementwise_ops.h"
#include "tests/test_util.h"
#include "tests/unary_reference.h"

using namespace moelab;
using moelab::testing::to_doubles;
using kernels::UnaryOp;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// values repeated to `copies * values.size()` elements; with values.size() odd, every value
// lands at every offset modulo 16 (the widest vector) once copies >= 16.
std::vector<double> spread(const std::vector<double>& values, int copies = 17) {
  std::vector<double> out;
  for (int c = 0; c < copies; ++c) out.insert(out.end(), values.begin(), values.end());
  return out;
}

template <class T>
bool same(T got, T want) {
  return (std::isnan(got) && std::isnan(want)) || (got == want && std::signbit(got) == std::signbit(want));
}

// Every element of f applied elementwise by the kernel equals `want(v)` bitwise when `exact(v)`,
// and is within `ulps` relative error otherwise.
template <class T, class Want, class Exact>
void check_unary(UnaryOp op, const std::vector<double>& values, Want want, Exact exact, double rel) {
  const std::vector<double> xs = spread(values);
  const DType dtype = sizeof(T) == 4 ? DType::Float32 : DType::Float64;
  Tensor x = from_vector(xs, {static_cast<std::int64_t>(xs.size())}).to(dtype);
  const std::vector<double> got = to_doubles(kernels::unary(op, x));
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const T v = static_cast<T>(xs[i]);
    const T w = want(v), g = static_cast<T>(got[i]);
    INFO(std::string(kernels::op_name(op)), " ", std::string(dtype_name(dtype)), " x = ", double(v), " at ", i, ": got ", double(g), ", want ", double(w));
    if (exact(v)) CHECK(same(g, w));
    else CHECK(std::abs(double(g) - double(w)) <= rel * std::abs(double(w)));
  }
}

template <class T>
void check_exp_log_sigmoid_tanh() {
  const bool f32 = sizeof(T) == 4;
  // exp: every kind of extreme; inside (-87, 88) / (-708, 709) the vector code's accuracy.
  const std::vector<double> exp_inputs{-kInf, -1e6, -1000, -760, -745.2, -740, -708.5, -200, -104, -103.9, -100, -88.5,
                                       -87.5, -50, -1, 0, 1, 50, 88.5, 88.8, 100, 708.5, 709.5, 709.9, 710, 1000, kInf, kNaN,
                                       -0.0};
  const T exp_lo = f32 ? T(-87) : T(-708), exp_hi = f32 ? T(88) : T(709);
  check_unary<T>(
      UnaryOp::Exp, exp_inputs, [](T v) { return std::exp(v); },
      [&](T v) { return !(v >= exp_lo && v <= exp_hi) || v == T(0); }, f32 ? 4e-7 : 1e-15);

  // The cases the issue named, spelled out.
  const std::vector<double> e = to_doubles(kernels::unary(UnaryOp::Exp, from_vector(spread({-1000, 1000, -kInf, kInf}), {68}).to(
                                                                             f32 ? DType::Float32 : DType::Float64)));
  for (std::size_t i = 0; i < e.size(); i += 4) {
    CHECK(e[i] == 0.0);
    CHECK(!std::signbit(e[i]));
    CHECK(e[i + 1] == kInf);
    CHECK(e[i + 2] == 0.0);
    CHECK(e[i + 3] == kInf);
  }

  // log: zero, negatives, subnormals, the largest finite, infinity, NaN.
  const double tiny = f32 ? double(std::numeric_limits<float>::denorm_min()) : std::numeric_limits<double>::denorm_min();
  const double smallest_normal = f32 ? double(std::numeric_limits<float>::min()) : std::numeric_limits<double>::min();
  const double largest = f32 ? double(std::numeric_limits<float>::max()) : std::numeric_limits<double>::max();
  const std::vector<double> log_inputs{0.0, -0.0, -1, -kInf, tiny, 1000 * tiny, smallest_normal / 2, smallest_normal, 1e-30,
                                       0.5, 1, 2, 1e30, largest, kInf, kNaN, 3};
  check_unary<T>(
      UnaryOp::Log, log_inputs, [](T v) { return std::log(v); },
      [&](T v) { return !(v >= T(smallest_normal) && v <= T(largest)) || v == T(1); }, f32 ? 4e-7 : 1e-15);

  // sigmoid = 1 / (1 + exp(-x)) saturates to exactly 0 and 1; NaN stays NaN. Where it does not
  // saturate (double at -200: 1.4e-87) it is within the accuracy of exp.
  const std::vector<double> sig_inputs{-kInf, -1e6, -1000, -200, 0, 200, 1000, 1e6, kInf, kNaN, 40, -40};
  check_unary<T>(
      UnaryOp::Sigmoid, sig_inputs, [](T v) { return T(1) / (T(1) + std::exp(-v)); },
      [&](T v) { return std::isnan(v) || v == 0 || v >= 40 || v < -exp_hi; }, f32 ? 4e-7 : 1e-15);
  const std::vector<double> s = to_doubles(kernels::unary(
      UnaryOp::Sigmoid, from_vector(spread({-1000, 1000, -kInf, kInf}), {68}).to(f32 ? DType::Float32 : DType::Float64)));
  for (std::size_t i = 0; i < s.size(); i += 4) {
    CHECK(s[i] == 0.0);
    CHECK(s[i + 1] == 1.0);
    CHECK(s[i + 2] == 0.0);
    CHECK(s[i + 3] == 1.0);
  }

  // tanh saturates to exactly -1 and 1.
  const std::vector<double> tanh_inputs{-kInf, -1e6, -1000, -30, 0, 30, 1000, 1e6, kInf, kNaN, 0.5};
  check_unary<T>(
      UnaryOp::Tanh, tanh_inputs, [](T v) { return std::isnan(v) || std::abs(v) < 1 ? std::tanh(v) : std::copysign(T(1), v); },
      [](T v) { return std::abs(v) > 1 || std::isnan(v) || v == 0; }, f32 ? 4e-7 : 1e-15);
}

}  // namespace

// Every op of the op table at the ends of the range, against its reference in long double rounded
// to T: NaN where the reference is NaN, the same infinity where it overflows, the same zero sign
// where it is zero, and within 8 ulps elsewhere (a few ulps of the vector code, e.g. sin at 1e3).
// The inputs: +-1e3 (exp and friends overflow there), +-inf, NaN, +-0, the smallest subnormal and
// normal, the largest finite value, +-1 and +-0.5: the edges of the Real, Positive and NonZero
// domains and what lies outside them (log(-1) is NaN); +-10, +-30, +-100, where a naive
// softplus or mish already overflows or underflows, and the subnormal edge (half and twice the
// smallest normal). A new op in the table is covered here with
// no line of its own: its reference (tests/unary_reference.h) is required by the build.
template <class T>
void check_every_unary_op_at_the_extremes() {
  using L = long double;
  using limits = std::numeric_limits<T>;
  const std::vector<double> inputs{1e3,  -1e3, kInf, -kInf, kNaN, 0.0, -0.0, double(limits::denorm_min()),
                                   -double(limits::denorm_min()), double(limits::min()), -double(limits::min()),
                                   double(limits::max()), -double(limits::max()), 1, -1, 0.5, -0.5,
                                   // where a naive formula loses it before the ends: exp(x) of
                                   // softplus/mish overflows in float32 past 88, sigmoid(-x) and
                                   // exp(-x) go subnormal; and the subnormal edge itself
                                   10, -10, 30, -30, 100, -100, double(limits::min()) / 2,
                                   -double(limits::min()) / 2, double(limits::min()) * 2};
  const std::vector<double> xs = spread(inputs);
  const DType dtype = sizeof(T) == 4 ? DType::Float32 : DType::Float64;
  const Tensor x = from_vector(xs, {static_cast<std::int64_t>(xs.size())}).to(dtype);
  for (const kernels::UnaryOpInfo& info : kernels::kUnaryOps) {
    const std::vector<double> got = to_doubles(kernels::unary(info.op, x));
    for (std::size_t i = 0; i < inputs.size(); ++i) {  // the first copy; the others must equal it
      const T v = static_cast<T>(xs[i]);
      const T want = static_cast<T>(moelab::testing::unary_reference<L>(info.op, static_cast<L>(v)));
      const T g = static_cast<T>(got[i]);
      INFO(std::string(info.name), " ", std::string(dtype_name(dtype)), " x = ", double(v), ": got ", double(g), ", want ",
           double(want));
      if (std::isnan(want) || std::isinf(want) || want == T(0))
        CHECK(same(g, want));
      else if (std::abs(want) < limits::min())
        // A subnormal result has no relative precision to keep: within the smallest normal (sigmoid
        // at -100 in float32 gives 0 where the reference is 3.8e-44: 1 / (1 + exp(100)) with exp
        // overflowing, the convention of core/cpu/elementwise.cpp and cuda/elementwise.cu).
        CHECK(std::abs(double(g) - double(want)) <= double(limits::min()));
      else
        CHECK(std::abs(double(g) - double(want)) <= 8 * double(limits::epsilon()) * std::abs(double(want)));
      for (std::size_t c = i + inputs.size(); c < xs.size(); c += inputs.size()) {
        INFO("copy at ", c, " (another offset modulo the vector width) gave ", got[c]);
        CHECK(same(static_cast<T>(got[c]), g));
      }
    }
  }
}

TEST_CASE("every unary op of the op table at the extremes, against long double (float32)") {
  check_every_unary_op_at_the_extremes<float>();
}
TEST_CASE("every unary op of the op table at the extremes, against long double (float64)") {
  check_every_unary_op_at_the_extremes<double>();
}

TEST_CASE("exp, log, sigmoid and tanh are exact at the extremes (float32)") { check_exp_log_sigmoid_tanh<float>(); }
TEST_CASE("exp, log, sigmoid and tanh are exact at the extremes (float64)") { check_exp_log_sigmoid_tanh<double>(); }

TEST_CASE("softmax, log_softmax and cross-entropy underflow to exactly 0 at every position of a row") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (std::int64_t n : {5, 16, 37, 64, 131}) {
      // Row r has 1000 at position r % n and -1000 elsewhere: every position is the winner once,
      // the losers' exp(-2000) must be exactly 0 and the winner's softmax exactly 1.
      const std::int64_t rows = std::min<std::int64_t>(n, 17);
      std::vector<double> v(static_cast<std::size_t>(rows * n), -1000.0);
      std::vector<std::int32_t> winner(static_cast<std::size_t>(rows)), loser(static_cast<std::size_t>(rows));
      for (std::int64_t r = 0; r < rows; ++r) {
        v[static_cast<std::size_t>(r * n + r % n)] = 1000.0;
        winner[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(r % n);
        loser[static_cast<std::size_t>(r)] = static_cast<std::int32_t>((r + 1) % n);
      }
      Tensor x = from_vector(v, {rows, n}).to(dtype);
      const std::vector<double> y = to_doubles(kernels::softmax(x));
      const std::vector<double> ly = to_doubles(kernels::log_softmax(x));
      INFO(std::string(dtype_name(dtype)), " n = ", n);
      for (std::size_t i = 0; i < v.size(); ++i) {
        const bool win = v[i] > 0;
        CHECK(y[i] == (win ? 1.0 : 0.0));
        CHECK(ly[i] == (win ? 0.0 : -2000.0));
      }
      // Cross-entropy: the winner as target costs exactly 0 with a zero gradient; a loser as
      // target costs exactly 2000 with gradient -1 there, +1 at the winner, 0 elsewhere.
      for (bool target_wins : {true, false}) {
        Tensor t = from_vector(target_wins ? winner : loser, {rows});
        kernels::CrossEntropyResult ce = kernels::cross_entropy(x, t);
        CHECK(to_doubles(ce.loss)[0] == (target_wins ? 0.0 : 2000.0));
        const std::vector<double> d =
            to_doubles(kernels::cross_entropy_backward(x, t, ce.logsumexp, double(rows), ce.kept_count()));
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t j = 0; j < n; ++j) {
            const double want = target_wins ? 0.0 : j == r % n ? 1.0 : j == (r + 1) % n ? -1.0 : 0.0;
            CHECK(d[static_cast<std::size_t>(r * n + j)] == want);
          }
      }
    }
  }
}

// Not only at the extremes: an element's bits must not depend on where it sits in its array (Eigen
// computes the unaligned head and the tail one element at a time and the rest as vectors, and the
// two must agree on every input, not only on the extremes above). On an x86-64-v3 build with
// std::exp for the scalar elements, about 1 float in 55 gave another exp there (an exhaustive
// comparison: core/cpu/exact_math.h), and every case below failed in both precisions (exp, log
// and sigmoid: 41-299 of the 2,001 inputs; softmax rows of 10, 13 or 37).
template <class T>
void check_position_independent() {
  const DType dtype = sizeof(T) == 4 ? DType::Float32 : DType::Float64;
  std::mt19937 rng(20261203);
  std::uniform_real_distribution<double> wide(-30.0, 10.0), tiny(-1e-6, 1e-6), positive(1e-3, 1e3);
  std::vector<double> values;
  for (int i = 0; i < 1001; ++i) values.push_back(wide(rng));
  for (int i = 0; i < 500; ++i) values.push_back(tiny(rng));  // exp near 1: many of the differences
  for (int i = 0; i < 500; ++i) values.push_back(positive(rng));
  // All values in one long array (vector code but for the last few) against the same values 7 at a
  // time (the scalar code where a vector holds 8 or more; on SSE's 4 lanes, one vector and 3 scalars).
  const Tensor x = from_vector(values, {static_cast<std::int64_t>(values.size())}).to(dtype);
  for (const kernels::UnaryOpInfo& info : kernels::kUnaryOps) {
    const UnaryOp op = info.op;
    if (op != UnaryOp::Exp && op != UnaryOp::Log && op != UnaryOp::Sigmoid) continue;
    const Tensor y = kernels::unary(op, x);
    int differing = 0;
    for (std::size_t first = 0; first < values.size(); first += 7) {
      const std::size_t count = std::min<std::size_t>(7, values.size() - first);
      const std::vector<double> part(values.begin() + static_cast<std::ptrdiff_t>(first),
                                     values.begin() + static_cast<std::ptrdiff_t>(first + count));
      const Tensor y_part = kernels::unary(op, from_vector(part, {static_cast<std::int64_t>(count)}).to(dtype));
      for (std::size_t i = 0; i < count; ++i) differing += !same(y_part.data<T>()[i], y.data<T>()[first + i]);
    }
    INFO(std::string(dtype_name(dtype)), " ", std::string(info.name), ": ", differing,
         " elements differ between a long array and short ones");
    CHECK(differing == 0);
  }
  // Softmax and log-softmax of a batch of identical rows: every row the first row's bits, for row
  // lengths that put the rows at every alignment (n odd) and that are whole vectors (n = 16).
  for (std::int64_t n : {3, 10, 13, 16, 37}) {
    const std::int64_t rows = 17;
    std::vector<double> row(static_cast<std::size_t>(n)), batch;
    for (double& v : row) v = wide(rng) / 3;
    for (std::int64_t r = 0; r < rows; ++r) batch.insert(batch.end(), row.begin(), row.end());
    const Tensor xb = from_vector(batch, {rows, n}).to(dtype);
    for (const Tensor& y : {kernels::softmax(xb), kernels::log_softmax(xb)}) {
      const T* py = y.data<T>();
      int differing = 0;
      for (std::int64_t i = n; i < rows * n; ++i) differing += !same(py[i], py[i % n]);
      INFO(std::string(dtype_name(dtype)), " n = ", n, ": ", differing, " elements differ from row 0's");
      CHECK(differing == 0);
    }
  }
}

TEST_CASE("exp, log, sigmoid, softmax and log_softmax give an input the same bits at every position (float32)") {
  check_position_independent<float>();
}
TEST_CASE("exp, log, sigmoid, softmax and log_softmax give an input the same bits at every position (float64)") {
  check_position_independent<double>();
}

// cpu::exp_shifted (whole vectors from the first element, then one partial vector) is exact_exp(x - shift)
// as Eigen evaluates it (scalar head to the first aligned address, vectors, scalar tail), bit for
// bit, at every length up to 40 and every start modulo 16, ordinary inputs and the extremes
// (-inf, -1000, a NaN); in place too.
template <class T>
void check_exp_shifted() {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-40.0, 1.0);
  std::vector<T> x(80);
  for (T& v : x) v = static_cast<T>(u(rng));
  x[5] = -std::numeric_limits<T>::infinity();
  x[23] = T(-1000);
  x[41] = std::numeric_limits<T>::quiet_NaN();
  const T shift = T(0.75);
  for (std::int64_t start = 0; start < 16; ++start)
    for (std::int64_t n = 0; n <= 40; ++n) {
      std::vector<T> got(static_cast<std::size_t>(n)), want(static_cast<std::size_t>(n));
      Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(want.data(), n) =
          cpu::exact_exp(Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x.data() + start, n) - shift);
      cpu::exp_shifted(x.data() + start, shift, got.data(), n);
      std::vector<T> in_place(x.begin() + start, x.begin() + start + n);
      cpu::exp_shifted(in_place.data(), shift, in_place.data(), n);
      int differing = 0;
      for (std::int64_t i = 0; i < n; ++i)
        differing += !same(got[static_cast<std::size_t>(i)], want[static_cast<std::size_t>(i)]) +
                     !same(in_place[static_cast<std::size_t>(i)], want[static_cast<std::size_t>(i)]);
      INFO("start ", start, " n ", n);
      CHECK(differing == 0);
    }
}

TEST_CASE("exp_shifted is exact_exp(x - shift) bit for bit (float32, float64)") {
  check_exp_shifted<float>();
  check_exp_shifted<double>();
}

// ExactExp's vector code is Eigen's float exp with a shorter last step where Eigen's is the generic
// pexp_float (SSE, AVX: core/cpu/exact_math.h's pexp_float_in_range), claimed to give Eigen's bits
// wherever ExactExp keeps them, [-87, 88]. Every 64th float of that range (35 million inputs, both
// ends and 0 included; a third of a second) against Eigen's own packet exp, in this binary's instruction set. A change
// to the copy, or an Eigen whose pexp_float differs from the copy, fails here.
TEST_CASE("float32 exp's vector code gives Eigen's pexp bits on [-87, 88]") {
  using Packet = Eigen::internal::packet_traits<float>::type;
  constexpr int lanes = Eigen::internal::packet_traits<float>::size;
  const auto bits_of = [](float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, sizeof(u));
    return u;
  };
  std::vector<float> in;
  for (const float end : {-87.0f, 88.0f})  // from 0 out to each end, every 64th float
    for (std::uint32_t u = 0;; u += 64) {
      float v;
      const std::uint32_t w = bits_of(end < 0 ? -0.0f : 0.0f) + u;
      std::memcpy(&v, &w, sizeof(v));
      if (std::abs(v) > std::abs(end)) break;
      in.push_back(v);
    }
  in.push_back(-87.0f);
  in.push_back(88.0f);
  while (in.size() % lanes) in.push_back(1.0f);
  const cpu::ExactExp<float> exact;
  std::int64_t differing = 0;
  float first_differing = 0;
  for (std::size_t i = 0; i < in.size(); i += lanes) {
    alignas(64) float got[lanes], want[lanes];
    const Packet x = Eigen::internal::ploadu<Packet>(in.data() + i);
    Eigen::internal::pstoreu(got, exact.packetOp(x));
    Eigen::internal::pstoreu(want, Eigen::internal::pexp(x));
    for (int j = 0; j < lanes; ++j)
      if (bits_of(got[j]) != bits_of(want[j]) && differing++ == 0) first_differing = in[i + j];
  }
  INFO(in.size(), " inputs; first differing: ", first_differing);
  CHECK(in.size() > 30000000);
  CHECK(differing == 0);
}
