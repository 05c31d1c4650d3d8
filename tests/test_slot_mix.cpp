// tests/test_slot_mix.cpp — Soft MoE's mixing kernels (core/kernels/slot_mix.cpp): token order's
// slot_mix_{reduce, expand, dot} and slot order's slot_{dispatch, combine, dot}.
//
//   - reduce, expand and dot equal plain double loops over their formulas, float64 to 1e-12 and
//     float32 to 1e-5, for p = 1 (its own CPU branch) and p = 3, with n = 37 experts (not a
//     multiple of any vector width); dispatch, combine and slot_dot likewise, with d = 19 (two
//     full blocks of dot's eight lanes and a tail)
//   - they are adjoint as documented: <reduce(w, u), g> = <u, expand(w, g)> = <w, dot(u, g)>
//   - an empty summed axis gives zeros; an empty output an empty tensor
//   - the result does not depend on the thread count (bitwise, on a tensor above the parallel
//     threshold)
//   - wrong ranks, mismatched sizes and dtypes throw moelab::Error naming the op and the shapes
// Their gradients are gradchecked in tests/test_gradcheck.cpp; the GPU's parity in
// tests/test_cuda_slot_mix.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/factories.h"
#include "core/kernels.h"
#include "core/parallel.h"
#include "core/error.h"
#include "core/random.h"
#include "test_util.h"

using namespace moelab;
namespace k = moelab::kernels;

namespace {

using std::size_t;
size_t sz(std::int64_t v) { return static_cast<size_t>(v); }
std::vector<double> values(const Tensor& t) { return moelab::testing::to_doubles(t); }

// The three formulas as loops in double. w [B, m, n, p], u [B, m, f, n], v [B, f, n, p].
struct Sizes {
  std::int64_t B, m, n, p, f;
};
std::vector<double> naive_reduce(const Sizes& s, const std::vector<double>& w, const std::vector<double>& u) {
  std::vector<double> out(sz(s.B * s.f * s.n * s.p), 0.0);
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t c = 0; c < s.f; ++c)
      for (std::int64_t e = 0; e < s.n; ++e)
        for (std::int64_t j = 0; j < s.p; ++j)
          for (std::int64_t i = 0; i < s.m; ++i)
            out[sz(((b * s.f + c) * s.n + e) * s.p + j)] +=
                w[sz(((b * s.m + i) * s.n + e) * s.p + j)] * u[sz(((b * s.m + i) * s.f + c) * s.n + e)];
  return out;
}
std::vector<double> naive_expand(const Sizes& s, const std::vector<double>& w, const std::vector<double>& v) {
  std::vector<double> out(sz(s.B * s.m * s.f * s.n), 0.0);
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t c = 0; c < s.f; ++c)
        for (std::int64_t e = 0; e < s.n; ++e)
          for (std::int64_t j = 0; j < s.p; ++j)
            out[sz(((b * s.m + i) * s.f + c) * s.n + e)] +=
                w[sz(((b * s.m + i) * s.n + e) * s.p + j)] * v[sz(((b * s.f + c) * s.n + e) * s.p + j)];
  return out;
}
std::vector<double> naive_dot(const Sizes& s, const std::vector<double>& u, const std::vector<double>& v) {
  std::vector<double> out(sz(s.B * s.m * s.n * s.p), 0.0);
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t e = 0; e < s.n; ++e)
        for (std::int64_t j = 0; j < s.p; ++j)
          for (std::int64_t c = 0; c < s.f; ++c)
            out[sz(((b * s.m + i) * s.n + e) * s.p + j)] +=
                u[sz(((b * s.m + i) * s.f + c) * s.n + e)] * v[sz(((b * s.f + c) * s.n + e) * s.p + j)];
  return out;
}

void check_close(const Tensor& got, const std::vector<double>& want, double tol) {
  const std::vector<double> g = values(got);
  REQUIRE(g.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - want[i]) / (1.0 + std::abs(want[i])));
  CHECK(worst <= tol);
}

// Runs f, requires a moelab::Error whose message contains every one of `parts`.
template <class F>
void check_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL("no moelab::Error thrown; expected one mentioning '", parts.front(), "'");
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& part : parts) CHECK_MESSAGE(msg.find(part) != std::string::npos, msg, " lacks ", part);
  }
}

double inner(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = values(a), y = values(b);
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

}  // namespace

TEST_CASE("slot_mix: reduce, expand and dot equal their formulas (p = 1 and p = 3, float64 and float32)") {
  for (std::int64_t p : {1, 3})
    for (DType dtype : {DType::Float64, DType::Float32}) {
      INFO("p = ", p, ", dtype ", dtype);
      const Sizes s{3, 4, 37, p, 5};
      Generator gen(static_cast<std::uint64_t>(10 + p));
      const Tensor w = uniform({s.B, s.m, s.n, s.p}, 0.0, 1.0, gen, dtype);
      const Tensor u = normal({s.B, s.m, s.f, s.n}, 0.0, 1.0, gen, dtype);
      const Tensor v = normal({s.B, s.f, s.n, s.p}, 0.0, 1.0, gen, dtype);
      const double tol = dtype == DType::Float64 ? 1e-12 : 1e-5;
      const Tensor r = k::slot_mix_reduce(w, u), e = k::slot_mix_expand(w, v), d = k::slot_mix_dot(u, v);
      CHECK(r.shape() == Shape{s.B, s.f, s.n, s.p});
      CHECK(e.shape() == Shape{s.B, s.m, s.f, s.n});
      CHECK(d.shape() == Shape{s.B, s.m, s.n, s.p});
      check_close(r, naive_reduce(s, values(w), values(u)), tol);
      check_close(e, naive_expand(s, values(w), values(v)), tol);
      check_close(d, naive_dot(s, values(u), values(v)), tol);
    }
}

TEST_CASE("slot_dispatch, slot_combine, slot_dot equal their formulas (float64 and float32)") {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    INFO("dtype ", dtype);
    const std::int64_t B = 3, m = 4, S = 10, d = 19;
    Generator gen(12);
    const Tensor w = uniform({B, m, S}, 0.0, 1.0, gen, dtype), x = normal({B, m, d}, 0.0, 1.0, gen, dtype);
    const Tensor y = normal({S, B, d}, 0.0, 1.0, gen, dtype);
    const std::vector<double> wv = values(w), xv = values(x), yv = values(y);
    std::vector<double> dispatch(sz(S * B * d), 0.0), combine(sz(B * m * d), 0.0), dot(sz(B * m * S), 0.0);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t s = 0; s < S; ++s)
          for (std::int64_t c = 0; c < d; ++c) {
            const double wt = wv[sz((b * m + i) * S + s)], xt = xv[sz((b * m + i) * d + c)], yt = yv[sz((s * B + b) * d + c)];
            dispatch[sz((s * B + b) * d + c)] += wt * xt;
            combine[sz((b * m + i) * d + c)] += wt * yt;
            dot[sz((b * m + i) * S + s)] += xt * yt;
          }
    const double tol = dtype == DType::Float64 ? 1e-12 : 1e-5;
    const Tensor got_dispatch = k::slot_dispatch(w, x), got_combine = k::slot_combine(w, y), got_dot = k::slot_dot(x, y);
    CHECK(got_dispatch.shape() == Shape{S, B, d});
    CHECK(got_combine.shape() == Shape{B, m, d});
    CHECK(got_dot.shape() == Shape{B, m, S});
    check_close(got_dispatch, dispatch, tol);
    check_close(got_combine, combine, tol);
    check_close(got_dot, dot, tol);
  }
}

TEST_CASE("slot_mix: the three kernels are each other's adjoints") {
  Generator gen(3);
  const std::int64_t B = 2, m = 3, n = 5, p = 2, f = 4;
  const Tensor w = normal({B, m, n, p}, 0.0, 1.0, gen, DType::Float64);
  const Tensor u = normal({B, m, f, n}, 0.0, 1.0, gen, DType::Float64);
  const Tensor g = normal({B, f, n, p}, 0.0, 1.0, gen, DType::Float64);
  // <reduce(w, u), g> is linear in u and in w: its gradients are expand(w, g) and dot(u, g).
  const double a = inner(k::slot_mix_reduce(w, u), g);
  CHECK(a == doctest::Approx(inner(u, k::slot_mix_expand(w, g))).epsilon(1e-12));
  CHECK(a == doctest::Approx(inner(w, k::slot_mix_dot(u, g))).epsilon(1e-12));
  // <dispatch(w, x), g2> = <x, combine(w, g2)> = <w, slot_dot(x, g2)>
  const Tensor w3 = normal({B, m, 7}, 0.0, 1.0, gen, DType::Float64), x = normal({B, m, 9}, 0.0, 1.0, gen, DType::Float64);
  const Tensor g2 = normal({7, B, 9}, 0.0, 1.0, gen, DType::Float64);
  const double a2 = inner(k::slot_dispatch(w3, x), g2);
  CHECK(a2 == doctest::Approx(inner(x, k::slot_combine(w3, g2))).epsilon(1e-12));
  CHECK(a2 == doctest::Approx(inner(w3, k::slot_dot(x, g2))).epsilon(1e-12));
}

TEST_CASE("slot_mix: empty sums give zeros, empty outputs empty tensors") {
  Generator gen(4);
  const Tensor w0 = normal({2, 0, 3, 1}, 0.0, 1.0, gen), u0 = normal({2, 0, 4, 3}, 0.0, 1.0, gen);
  const Tensor r = k::slot_mix_reduce(w0, u0);  // m = 0: nothing to sum
  CHECK(r.shape() == Shape{2, 4, 3, 1});
  for (double x : values(r)) CHECK(x == 0.0);
  const Tensor wp = normal({2, 3, 3, 0}, 0.0, 1.0, gen), vp = normal({2, 4, 3, 0}, 0.0, 1.0, gen);
  const Tensor e = k::slot_mix_expand(wp, vp);  // p = 0
  CHECK(e.shape() == Shape{2, 3, 4, 3});
  for (double x : values(e)) CHECK(x == 0.0);
  const Tensor uf = normal({2, 3, 0, 3}, 0.0, 1.0, gen), vf = normal({2, 0, 3, 2}, 0.0, 1.0, gen);
  const Tensor d = k::slot_mix_dot(uf, vf);  // f = 0
  CHECK(d.shape() == Shape{2, 3, 3, 2});
  for (double x : values(d)) CHECK(x == 0.0);
  CHECK(k::slot_mix_reduce(normal({0, 3, 3, 1}, 0.0, 1.0, gen), normal({0, 3, 4, 3}, 0.0, 1.0, gen)).numel() == 0);
}

TEST_CASE("slot_mix: one thread and two give the same bits") {
  Generator gen(5);
  // 64 x 4 x 6 x 128 = 196,608 elements of u: above the parallel threshold.
  const std::int64_t B = 64, m = 4, n = 128, p = 1, f = 6;
  const Tensor w = uniform({B, m, n, p}, 0.0, 1.0, gen), u = normal({B, m, f, n}, 0.0, 1.0, gen);
  const Tensor v = normal({B, f, n, p}, 0.0, 1.0, gen);
  const int before = num_threads();
  set_num_threads(1);
  const std::vector<double> r1 = values(k::slot_mix_reduce(w, u)), e1 = values(k::slot_mix_expand(w, v)),
                            d1 = values(k::slot_mix_dot(u, v));
  set_num_threads(2);
  CHECK(values(k::slot_mix_reduce(w, u)) == r1);
  CHECK(values(k::slot_mix_expand(w, v)) == e1);
  CHECK(values(k::slot_mix_dot(u, v)) == d1);
  // Slot order at the MNIST model's n = 8: [8, 64, 196] slot rows.
  const Tensor w3 = uniform({B, m, 8}, 0.0, 1.0, gen), x = normal({B, m, 196}, 0.0, 1.0, gen);
  const Tensor y = normal({8, B, 196}, 0.0, 1.0, gen);
  set_num_threads(1);
  const std::vector<double> s1 = values(k::slot_dispatch(w3, x)), c1 = values(k::slot_combine(w3, y)),
                            t1 = values(k::slot_dot(x, y));
  set_num_threads(2);
  CHECK(values(k::slot_dispatch(w3, x)) == s1);
  CHECK(values(k::slot_combine(w3, y)) == c1);
  CHECK(values(k::slot_dot(x, y)) == t1);
  set_num_threads(before);
}

TEST_CASE("slot_mix: bad ranks, sizes and dtypes throw moelab::Error") {
  Generator gen(6);
  const Tensor w = normal({2, 3, 4, 1}, 0.0, 1.0, gen), u = normal({2, 3, 5, 4}, 0.0, 1.0, gen);
  const Tensor v = normal({2, 5, 4, 1}, 0.0, 1.0, gen);
  check_error([&] { k::slot_mix_reduce(w, normal({2, 3, 5, 3}, 0.0, 1.0, gen)); },
                               {"slot_mix_reduce", "[2, 3, 4, 1]", "[2, 3, 5, 3]"});
  check_error([&] { k::slot_mix_expand(w, normal({2, 5, 4, 2}, 0.0, 1.0, gen)); },
                               {"slot_mix_expand", "[2, 5, 4, 2]"});
  check_error([&] { k::slot_mix_dot(u, normal({2, 6, 4, 1}, 0.0, 1.0, gen)); },
                               {"slot_mix_dot", "[2, 6, 4, 1]"});
  check_error([&] { k::slot_mix_dot(normal({2, 3, 5}, 0.0, 1.0, gen), v); }, {"slot_mix_dot", "rank 4"});
  check_error([&] { k::slot_mix_reduce(w.to(DType::Float64), u); }, {"slot_mix_reduce", "float"});
  const Tensor w3 = normal({2, 3, 4}, 0.0, 1.0, gen), x = normal({2, 3, 5}, 0.0, 1.0, gen);
  check_error([&] { k::slot_dispatch(w3, normal({2, 4, 5}, 0.0, 1.0, gen)); }, {"slot_dispatch", "[2, 3, 4]", "[2, 4, 5]"});
  check_error([&] { k::slot_combine(w3, normal({4, 3, 5}, 0.0, 1.0, gen)); }, {"slot_combine", "[4, 3, 5]"});
  check_error([&] { k::slot_dot(x, normal({4, 2, 6}, 0.0, 1.0, gen)); }, {"slot_dot", "[4, 2, 6]"});
  check_error([&] { k::slot_dot(x, normal({4, 2, 5, 1}, 0.0, 1.0, gen)); }, {"slot_dot", "rank 3"});
}
