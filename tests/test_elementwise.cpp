// tests/test_elementwise.cpp — unary, binary (NumPy broadcasting), scalar ops, relu_backward.
//
// Every op of the list (core/kernels/elementwise_ops.h) is compared with a naive double-precision
// reference on random inputs from its domain, in float32 and float64, on a small tensor and on
// one large enough to run on several threads. Broadcasting is checked against a reference that
// indexes each operand through the full, unmerged shapes (so it shares no code with
// core/broadcast.h), on pairs where either or both sides repeat.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <set>
#include <string>

#include "core/broadcast.h"
#include "core/cpu/thread_count.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/kernels/elementwise_ops.h"
#include "core/parallel.h"
#include "tests/test_util.h"
#include "tests/unary_reference.h"

using namespace moelab;
using moelab::testing::max_error;
using moelab::testing::to_doubles;
using kernels::BinaryOp;
using kernels::OpDomain;
using kernels::UnaryOp;

namespace {

double tolerance(DType dtype) { return dtype == DType::Float32 ? 2e-6 : 1e-14; }

// The references name every op by hand, with no default: built with -Werror=switch, a new op of
// the list without its reference here does not compile.
// The references of tests/unary_reference.h (shared with the extremes test), in double.
double unary_ref(UnaryOp op, double x) { return moelab::testing::unary_reference<double>(op, x); }

double binary_ref(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Maximum: return std::max(a, b);
    case BinaryOp::Minimum: return std::min(a, b);
    case BinaryOp::Pow: return std::pow(a, b);
    case BinaryOp::Eq: return a == b ? 1 : 0;
    case BinaryOp::Ne: return a != b ? 1 : 0;
    case BinaryOp::Lt: return a < b ? 1 : 0;
    case BinaryOp::Le: return a <= b ? 1 : 0;
    case BinaryOp::Gt: return a > b ? 1 : 0;
    case BinaryOp::Ge: return a >= b ? 1 : 0;
  }
  return 0;
}

// Inputs in [0.5, 2.5) lie in every op's domain (core/kernels/elementwise_ops.h): the binary tests use them.
Tensor positive(const Shape& shape, Generator& gen, DType dtype) { return uniform(shape, 0.5, 2.5, gen, dtype); }

// Inputs from an op's domain: Real in [-4, 4), Positive in [0.5, 4), NonZero with magnitudes in
// [0.5, 4) and random signs.
Tensor draw(OpDomain domain, const Shape& shape, Generator& gen, DType dtype) {
  switch (domain) {
    case OpDomain::Real: return uniform(shape, -4, 4, gen, dtype);
    case OpDomain::Positive: return uniform(shape, 0.5, 4, gen, dtype);
    case OpDomain::NonZero: {
      std::vector<double> v = uniform(shape, 0.5, 4, gen, DType::Float64).to_vector<double>();
      for (double& x : v)
        if (gen.next_below(2) == 0) x = -x;
      return from_vector(v, shape).to(dtype);
    }
  }
  FAIL("unknown domain");
  return Tensor();
}

}  // namespace

TEST_CASE("unary ops match std:: in double precision") {
  Generator gen(1);
  // 70001 elements, 2.1 grains (core/cpu/thread_count.h): with 4 threads set, chunks on 2 threads.
  // At the default it split only on a machine with two cores or more.
  testing::ScopedThreads four(4);
  REQUIRE(cpu::element_threads(70001) > 1);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& shape : {Shape{3, 17}, Shape{70001}}) {  // the second runs on several threads
      for (const kernels::UnaryOpInfo& info : kernels::kUnaryOps) {
        const UnaryOp op = info.op;
        const Tensor x = draw(info.domain, shape, gen, dtype);
        Tensor y = kernels::unary(op, x);
        CHECK(y.shape() == x.shape());
        CHECK(y.dtype() == dtype);
        std::vector<double> want;
        for (double v : to_doubles(x)) want.push_back(unary_ref(op, v));
        INFO(kernels::op_name(op), " ", dtype, " ", shape);
        CHECK(max_error(y, want) <= tolerance(dtype));
      }
    }
  }
}

TEST_CASE("sqrt is std::sqrt bit for bit: correctly rounded, no approximation instruction") {
  // Eigen's default (EIGEN_FAST_MATH=1) computed float sqrt as an rsqrt estimate plus one Newton
  // step: bits the ISA leaves to the vendor (an AMD and an Intel CPU differed on 38% of inputs),
  // and denormals flushed to 0. The build sets EIGEN_FAST_MATH=0 (CMakeLists.txt); this sweep holds
  // it there, in float32 and float64, on the vector body and the scalar tail alike.
  std::vector<float> f;
  for (float v : {0.0f, -0.0f, 1.0f, 2.0f, 0.5f, 3.0f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::quiet_NaN(), -1.0f,
                  -std::numeric_limits<float>::denorm_min()})
    f.push_back(v);
  for (int e = -149; e <= 127; ++e) f.push_back(std::ldexp(1.0f, e));        // every power of two
  for (int i = 1; i < 4096; i += 7) f.push_back(std::ldexp(static_cast<float>(i), -149));  // denormals
  std::uint32_t state = 12345;
  for (int i = 0; i < 20000; ++i) {  // random bit patterns of positive floats, NaN and inf included
    state = state * 1664525u + 1013904223u;
    const std::uint32_t bits = state >> 1;
    float v;
    std::memcpy(&v, &bits, sizeof v);
    f.push_back(v);
  }
  const std::int64_t n = static_cast<std::int64_t>(f.size());
  const std::vector<float> got = kernels::unary(UnaryOp::Sqrt, from_vector(f, {n})).to_vector<float>();
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float want = std::sqrt(f[static_cast<std::size_t>(i)]);
    std::uint32_t a, b;
    std::memcpy(&a, &got[static_cast<std::size_t>(i)], 4);
    std::memcpy(&b, &want, 4);
    if (a != b && !(std::isnan(want) && std::isnan(got[static_cast<std::size_t>(i)]))) ++differ;
  }
  CHECK_MESSAGE(differ == 0, differ, " of ", n, " float32 square roots differ from std::sqrt");
  std::vector<double> d;
  for (float v : f) d.push_back(static_cast<double>(v) * 1.000000123);
  for (int e = -1074; e <= 1023; e += 3) d.push_back(std::ldexp(1.0, e));
  const std::int64_t m = static_cast<std::int64_t>(d.size());
  const std::vector<double> got_d = kernels::unary(UnaryOp::Sqrt, from_vector(d, {m})).to_vector<double>();
  std::int64_t differ_d = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    const double want = std::sqrt(d[static_cast<std::size_t>(i)]), have = got_d[static_cast<std::size_t>(i)];
    if (std::memcmp(&want, &have, 8) != 0 && !(std::isnan(want) && std::isnan(have))) ++differ_d;
  }
  CHECK_MESSAGE(differ_d == 0, differ_d, " of ", m, " float64 square roots differ from std::sqrt");
}

TEST_CASE("sigmoid, exp and relu at the extremes") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor x = from_vector(std::vector<double>{-1000, -30, 0, 30, 1000}, {5}).to(dtype);
    std::vector<double> s = to_doubles(kernels::unary(UnaryOp::Sigmoid, x));
    CHECK(s[0] == 0.0);
    CHECK(s[2] == 0.5);
    CHECK(s[4] == 1.0);
    CHECK(s[1] == doctest::Approx(1.0 / (1.0 + std::exp(30.0))).epsilon(1e-6));
    for (double v : s) CHECK(std::isfinite(v));
    std::vector<double> e = to_doubles(kernels::unary(UnaryOp::Exp, x));
    CHECK(e[0] == 0.0);
    CHECK(std::isinf(e[4]));
    std::vector<double> r = to_doubles(kernels::unary(UnaryOp::Relu, x));
    CHECK(r == std::vector<double>{0, 0, 0, 30, 1000});
  }
}

TEST_CASE("binary ops: same shape, scalar tensor and trailing-axes broadcasting") {
  Generator gen(2);
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {
      {{4, 6}, {4, 6}},          // same shape
      {{4, 6}, {}},              // 0-d scalar
      {{4, 6}, {1, 1}},          // one element, any shape
      {{4, 6}, {6}},             // bias [d] on [N, d]
      {{3, 5, 6}, {5, 6}},       // [T, d] on [B, T, d]
      {{3, 5, 6}, {6}},          // [d] on [B, T, d]
      {{600, 130}, {130}},       // trailing, large enough for several threads
      {{70000}, {70000}},        // same shape, several threads
      {{70000}, {1}},            // scalar, several threads
  };
  // The last three are 2.1-2.4 grains (core/cpu/thread_count.h), on 2 threads with 4 set. The first
  // 300 x 130 and 40000 fell below two grains, so they ran on one thread and tested no split.
  testing::ScopedThreads four(4);
  REQUIRE(cpu::element_threads(600 * 130) > 1);
  REQUIRE(cpu::element_threads(70000) > 1);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Case& c : cases) {
      Tensor a = positive(c.a, gen, dtype), b = positive(c.b, gen, dtype);
      std::vector<double> av = to_doubles(a), bv = to_doubles(b);
      for (const kernels::BinaryOpInfo& info : kernels::kBinaryOps) {
        const BinaryOp op = info.op;
        Tensor out = kernels::binary(op, a, b);
        CHECK(out.shape() == c.a);
        std::vector<double> want(av.size());
        for (std::size_t i = 0; i < av.size(); ++i) want[i] = binary_ref(op, av[i], bv[i % bv.size()]);
        INFO(kernels::op_name(op), " ", dtype, " a ", c.a, " b ", c.b);
        CHECK(max_error(out, want) <= tolerance(dtype));
      }
    }
  }
}

namespace {

// out = a op b by NumPy's rule, one output element at a time: unravel the flat index over the
// broadcast shape, then read each operand at that index (0 along its size-1 and missing axes).
std::vector<double> broadcast_ref(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& out) {
  const std::vector<double> av = to_doubles(a), bv = to_doubles(b);
  const int rank = out.rank();
  auto offset = [&](const Shape& s, const std::vector<std::int64_t>& index) {
    std::int64_t off = 0;
    for (int i = 0; i < s.rank(); ++i) {
      const std::int64_t at = s[i] == 1 ? 0 : index[static_cast<std::size_t>(i + rank - s.rank())];
      off = off * s[i] + at;
    }
    return static_cast<std::size_t>(off);
  };
  std::vector<double> want(static_cast<std::size_t>(out.numel()));
  std::vector<std::int64_t> index(static_cast<std::size_t>(rank));
  for (std::int64_t flat = 0; flat < out.numel(); ++flat) {
    std::int64_t rest = flat;
    for (int i = rank - 1; i >= 0; --i) {
      index[static_cast<std::size_t>(i)] = rest % out[i];
      rest /= out[i];
    }
    want[static_cast<std::size_t>(flat)] = binary_ref(op, av[offset(a.shape(), index)], bv[offset(b.shape(), index)]);
  }
  return want;
}

}  // namespace

TEST_CASE("binary ops broadcast the NumPy way: either side, both sides, size-1 axes anywhere, rank differences") {
  Generator gen(6);
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {
      {{4, 6}, {4, 1}, {4, 6}},                  // one value per row (a gate, a norm)
      {{4, 1}, {4, 6}, {4, 6}},                  // the same on the left
      {{4, 1}, {1, 6}, {4, 6}},                  // both sides repeat: an outer-product shape
      {{1, 6}, {4, 1}, {4, 6}},
      {{4, 6}, {1, 6}, {4, 6}},                  // a leading 1 (not the trailing form: b has rank 2)
      {{2, 1, 5}, {3, 5}, {2, 3, 5}},            // [B, 1, d] with [T, d]
      {{3, 5}, {2, 1, 5}, {2, 3, 5}},
      {{5, 1, 7}, {5, 3, 7}, {5, 3, 7}},         // a size-1 axis in the middle
      {{2, 3, 1, 5}, {3, 4, 1}, {2, 3, 4, 5}},   // rank difference and 1s on both sides
      {{2, 1, 1, 3}, {1, 4, 5, 1}, {2, 4, 5, 3}},
      {{6}, {2, 1, 6}, {2, 1, 6}},               // the smaller operand on the left
      {{}, {2, 3}, {2, 3}},                      // 0-d scalar on the left
      {{1}, {2, 3}, {2, 3}},
      {{2, 3}, {1, 1, 1}, {1, 2, 3}},            // one element of higher rank adds leading axes
      {{1, 1}, {1}, {1, 1}},                     // one element on both sides
      {{2, 1, 2, 1, 2, 1, 2, 1, 2}, {1, 2, 1, 2, 1, 2, 1, 2, 1}, {2, 2, 2, 2, 2, 2, 2, 2, 2}},  // 9 axes alternate
      {{257, 1}, {1, 300}, {257, 300}},          // several threads; chunks end inside rows
      {{40, 1, 130}, {1, 30, 130}, {40, 30, 130}},
  };
  // 257 x 300 and 40 x 30 x 130 are 2.4 and 4.8 grains (core/cpu/thread_count.h): split with 4 threads
  // set; at the default they split only on a machine with two cores or more.
  testing::ScopedThreads four(4);
  REQUIRE(cpu::element_threads(257 * 300) > 1);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Case& c : cases) {
      Tensor a = positive(c.a, gen, dtype), b = positive(c.b, gen, dtype);
      for (const kernels::BinaryOpInfo& info : kernels::kBinaryOps) {
        const BinaryOp op = info.op;
        INFO(kernels::op_name(op), " ", dtype, " a ", c.a, " b ", c.b);
        Tensor out = kernels::binary(op, a, b);
        REQUIRE(out.shape() == c.out);
        CHECK(out.dtype() == dtype);
        CHECK(max_error(out, broadcast_ref(op, a, b, c.out)) <= tolerance(dtype));
      }
    }
  }
}

TEST_CASE("broadcasting to an empty shape gives an empty result") {
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {{{3, 0, 4}, {1, 4}, {3, 0, 4}}, {{2, 1}, {2, 0}, {2, 0}}, {{0, 3}, {1, 3}, {0, 3}},
                        {{1}, {0}, {0}},           {{0, 1}, {1, 5}, {0, 5}}, {{}, {0, 2}, {0, 2}}};
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Case& c : cases) {
      INFO("a ", c.a, " b ", c.b);
      CHECK(kernels::binary(BinaryOp::Mul, zeros(c.a, dtype), ones(c.b, dtype)).shape() == c.out);
      CHECK(kernels::binary(BinaryOp::Sub, ones(c.b, dtype), zeros(c.a, dtype)).shape() == c.out);
    }
}

TEST_CASE("the general broadcast agrees bit for bit with the fast forms where both apply") {
  Generator gen(7);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Tensor a = positive({300, 70}, gen, dtype), row = positive({70}, gen, dtype), one = positive({1}, gen, dtype);
    for (const kernels::BinaryOpInfo& info : kernels::kBinaryOps) {
      const BinaryOp op = info.op;
      INFO(kernels::op_name(op), " ", dtype);
      // [1, 70] and [1, 1] are not a's trailing axes (a leading 1), so they take the strided path.
      CHECK(kernels::binary(op, a, row.reshape({1, 70})).to(DType::Float64).to_vector<double>() ==
            kernels::binary(op, a, row).to(DType::Float64).to_vector<double>());
      CHECK(kernels::binary(op, a, one.reshape({1, 1, 1})).reshape({300, 70}).to(DType::Float64).to_vector<double>() ==
            kernels::binary(op, a, one).to(DType::Float64).to_vector<double>());
    }
  }
}

TEST_CASE("broadcast_shape and broadcast_plan: the header's examples") {
  CHECK(broadcast_shape({2, 1, 5}, {3, 5}) == Shape{2, 3, 5});
  CHECK(broadcast_shape({}, {}) == Shape{});
  CHECK(broadcast_shape({0}, {1}) == Shape{0});
  CHECK_FALSE(broadcast_shape({2, 3}, {3, 2}).has_value());
  CHECK_FALSE(broadcast_shape({0}, {2}).has_value());
  BroadcastPlan p = broadcast_plan({4, 1, 6}, {5, 6});  // a: [B, 1, d], b: [T, d]
  CHECK(p.sizes == std::vector<std::int64_t>{4, 5, 6});
  CHECK(p.a_strides == std::vector<std::int64_t>{6, 0, 1});
  CHECK(p.b_strides == std::vector<std::int64_t>{0, 6, 1});
  p = broadcast_plan({7, 3}, {7, 1});  // a column
  CHECK(p.sizes == std::vector<std::int64_t>{7, 3});
  CHECK(p.a_strides == std::vector<std::int64_t>{3, 1});
  CHECK(p.b_strides == std::vector<std::int64_t>{1, 0});
  p = broadcast_plan({4, 5, 6}, {1, 6});  // leading axes merge
  CHECK(p.sizes == std::vector<std::int64_t>{20, 6});
  CHECK(p.a_strides == std::vector<std::int64_t>{6, 1});
  CHECK(p.b_strides == std::vector<std::int64_t>{0, 1});
  p = broadcast_plan({1, 1}, {1});
  CHECK(p.sizes == std::vector<std::int64_t>{1});
  CHECK(p.a_strides == std::vector<std::int64_t>{0});
}

TEST_CASE("binary ops with a plain number on either side") {
  Generator gen(3);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& shape : {Shape{2, 3, 4}, Shape{50000}}) {
      Tensor x = positive(shape, gen, dtype);
      std::vector<double> xv = to_doubles(x);
      for (const kernels::BinaryOpInfo& info : kernels::kBinaryOps) {
        const BinaryOp op = info.op;
        const double s = 1.75;
        std::vector<double> right(xv.size()), left(xv.size());
        for (std::size_t i = 0; i < xv.size(); ++i) {
          right[i] = binary_ref(op, xv[i], s);
          left[i] = binary_ref(op, s, xv[i]);
        }
        INFO(kernels::op_name(op), " ", dtype, " ", shape);
        CHECK(max_error(kernels::binary_scalar(op, x, s), right) <= tolerance(dtype));
        CHECK(max_error(kernels::scalar_binary(op, s, x), left) <= tolerance(dtype));
      }
    }
  }
  // The order matters: 1 - x and x - 1 differ.
  Tensor x = from_vector(std::vector<double>{0.25, 4.0}, {2});
  CHECK(kernels::scalar_binary(BinaryOp::Sub, 1.0, x).to_vector<double>() == std::vector<double>{0.75, -3.0});
  CHECK(kernels::scalar_binary(BinaryOp::Div, 1.0, x).to_vector<double>() == std::vector<double>{4.0, 0.25});
  CHECK(kernels::binary_scalar(BinaryOp::Pow, x, 0.5).to_vector<double>() == std::vector<double>{0.5, 2.0});
}

TEST_CASE("maximum and minimum propagate NaN; relu keeps it") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = from_vector(std::vector<double>{nan, 1.0, 2.0}, {3});
  Tensor b = from_vector(std::vector<double>{0.0, nan, 3.0}, {3});
  for (BinaryOp op : {BinaryOp::Maximum, BinaryOp::Minimum}) {
    std::vector<double> v = kernels::binary(op, a, b).to_vector<double>();
    CHECK(std::isnan(v[0]));
    CHECK(std::isnan(v[1]));
    CHECK(v[2] == (op == BinaryOp::Maximum ? 3.0 : 2.0));
  }
  CHECK(std::isnan(kernels::unary(UnaryOp::Relu, a).to_vector<double>()[0]));
}

TEST_CASE("relu_backward passes the gradient where x > 0 only") {
  Generator gen(4);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& shape : {Shape{5, 7}, Shape{200, 200}}) {
      Tensor x = uniform(shape, -1, 1, gen, dtype);
      Tensor g = normal(shape, 0, 1, gen, dtype);
      std::vector<double> xv = to_doubles(x), gv = to_doubles(g), want(xv.size());
      for (std::size_t i = 0; i < xv.size(); ++i) want[i] = xv[i] > 0 ? gv[i] : 0.0;
      CHECK(max_error(kernels::relu_backward(x, g), want) == 0.0);
    }
  }
  Tensor x = from_vector(std::vector<float>{-1.0f, 0.0f, 2.0f}, {3});
  Tensor g = from_vector(std::vector<float>{5.0f, 6.0f, 7.0f}, {3});
  CHECK(kernels::relu_backward(x, g).to_vector<float>() == std::vector<float>{0.0f, 0.0f, 7.0f});  // 0 at x == 0
}

TEST_CASE("the list of ops: names, table order, and values outside the enum refused") {
  CHECK(std::string(kernels::op_name(UnaryOp::Sigmoid)) == "sigmoid");
  CHECK(std::string(kernels::op_name(UnaryOp::Reciprocal)) == "reciprocal");
  CHECK(std::string(kernels::op_name(BinaryOp::Maximum)) == "maximum");
  CHECK(std::string(kernels::op_name(BinaryOp::Pow)) == "pow");
  std::set<std::string> names;
  for (std::size_t i = 0; i < std::size(kernels::kUnaryOps); ++i) {
    CHECK(static_cast<std::size_t>(kernels::kUnaryOps[i].op) == i);
    CHECK(std::string(kernels::op_name(kernels::kUnaryOps[i].op)) == kernels::kUnaryOps[i].name);
    names.insert(kernels::kUnaryOps[i].name);
  }
  for (std::size_t i = 0; i < std::size(kernels::kBinaryOps); ++i) {
    CHECK(static_cast<std::size_t>(kernels::kBinaryOps[i].op) == i);
    CHECK(std::string(kernels::op_name(kernels::kBinaryOps[i].op)) == kernels::kBinaryOps[i].name);
    names.insert(kernels::kBinaryOps[i].name);
  }
  CHECK(names.size() == std::size(kernels::kUnaryOps) + std::size(kernels::kBinaryOps));  // no name twice
  CHECK(std::string(kernels::op_name(static_cast<UnaryOp>(99))) == "?");
  const Tensor x = ones({2});
  CHECK_THROWS_WITH_AS(kernels::unary(static_cast<UnaryOp>(99), x), doctest::Contains("not a unary op"), Error);
  CHECK_THROWS_WITH_AS(kernels::binary(static_cast<BinaryOp>(99), x, x), doctest::Contains("not a binary op"), Error);
  CHECK_THROWS_WITH_AS(kernels::binary_scalar(static_cast<BinaryOp>(-1), x, 1.0), doctest::Contains("not a binary op"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::scalar_binary(static_cast<BinaryOp>(99), 1.0, x), doctest::Contains("not a binary op"),
                       Error);
}

TEST_CASE("results do not depend on the thread count") {
  Generator gen(5);
  Tensor x = uniform({100003}, -3, 3, gen);
  Tensor bias = uniform({7}, -1, 1, gen);
  Tensor wide = uniform({100003 * 7}, -1, 1, gen).reshape({100003, 7});
  Tensor column = uniform({1001, 1}, 0.5, 2, gen), row = uniform({1, 3, 333}, -1, 1, gen);  // -> [1001, 3, 333]
  const int threads = num_threads();
  set_num_threads(1);
  std::vector<float> exp1 = kernels::unary(UnaryOp::Exp, x).to_vector<float>();
  std::vector<float> add1 = kernels::binary(BinaryOp::Add, wide, bias).to_vector<float>();
  std::vector<float> div1 = kernels::binary(BinaryOp::Div, row, column.reshape({1001, 1, 1})).to_vector<float>();
  set_num_threads(3);
  std::vector<float> exp3 = kernels::unary(UnaryOp::Exp, x).to_vector<float>();
  std::vector<float> add3 = kernels::binary(BinaryOp::Add, wide, bias).to_vector<float>();
  std::vector<float> div3 = kernels::binary(BinaryOp::Div, row, column.reshape({1001, 1, 1})).to_vector<float>();
  set_num_threads(threads);
  CHECK(exp1 == exp3);
  CHECK(add1 == add3);
  CHECK(div1 == div3);
}

TEST_CASE("empty tensors give empty results") {
  Tensor x = zeros({0, 3});
  CHECK(kernels::unary(UnaryOp::Exp, x).shape() == Shape{0, 3});
  CHECK(kernels::binary(BinaryOp::Add, x, zeros({3})).shape() == Shape{0, 3});
  CHECK(kernels::binary_scalar(BinaryOp::Mul, x, 2.0).shape() == Shape{0, 3});
  CHECK(kernels::relu_backward(x, x).shape() == Shape{0, 3});
}

TEST_CASE("elementwise ops reject bad arguments, naming the op") {
  Tensor a = ones({2, 3}), undefined;
  Tensor ints = arange(0, 6).reshape({2, 3});
  CHECK_THROWS_WITH_AS(kernels::unary(UnaryOp::Exp, ints), doctest::Contains("unary"), Error);
  CHECK_THROWS_WITH_AS(kernels::unary(UnaryOp::Exp, undefined), doctest::Contains("unary"), Error);
  // Shapes that do not broadcast: the message names the op and both shapes, on either side.
  CHECK_THROWS_WITH_AS(kernels::binary(BinaryOp::Add, a, ones({3, 2})),
                       "moelab::binary: add: a [2, 3] and b [3, 2] do not broadcast (aligned from the right, each pair "
                       "of axes must be equal or one of them 1)",
                       Error);
  CHECK_THROWS_WITH_AS(kernels::binary(BinaryOp::Add, a, ones({2})), doctest::Contains("a [2, 3] and b [2]"), Error);
  CHECK_THROWS_WITH_AS(kernels::binary(BinaryOp::Pow, ones({2}), a), doctest::Contains("pow: a [2] and b [2, 3]"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::binary(BinaryOp::Maximum, ones({4, 1, 3}), ones({2, 5, 1})),
                       doctest::Contains("maximum: a [4, 1, 3] and b [2, 5, 1]"), Error);
  CHECK_THROWS_WITH_AS(kernels::binary(BinaryOp::Div, ones({0, 3}), ones({2, 3})),
                       doctest::Contains("div: a [0, 3] and b [2, 3]"), Error);  // 0 pairs with 0 or 1 only
  CHECK_THROWS_WITH_AS(kernels::binary(BinaryOp::Add, a, ones({2, 3}, DType::Float64)), doctest::Contains("binary"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::binary(BinaryOp::Add, a, ints), doctest::Contains("binary"), Error);
  CHECK_THROWS_WITH_AS(kernels::binary(BinaryOp::Add, a, undefined), doctest::Contains("binary"), Error);
  CHECK_THROWS_WITH_AS(kernels::binary_scalar(BinaryOp::Add, ints, 1.0), doctest::Contains("binary_scalar"), Error);
  CHECK_THROWS_WITH_AS(kernels::scalar_binary(BinaryOp::Sub, 1.0, ints), doctest::Contains("scalar_binary"), Error);
  CHECK_THROWS_WITH_AS(kernels::relu_backward(a, ones({3, 2})), doctest::Contains("relu_backward"), Error);
  CHECK_THROWS_WITH_AS(kernels::relu_backward(a, ones({2, 3}, DType::Float64)), doctest::Contains("relu_backward"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::relu_backward(ints, ints), doctest::Contains("relu_backward"), Error);
}
