// tests/test_causal_attention.cpp — the fused causal attention kernel (core/cpu/attention.cpp)
// against the ops it replaces, composed: p = softmax(causal_mask(q @ k^T, -inf)), y = p @ v, and
// the backward dp = dy @ v^T, ds = softmax_backward(p, dp), dq = ds @ k, dk = ds^T @ q,
// dv = p^T @ dy. Shapes cover one block of query rows and several (blocks are 24 rows), S > T
// (queries after a cache), T == 1, and the benchmark model's heads; float32 and float64. Also:
// masked weights exactly 0, results independent of the thread count, and the argument checks.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/parallel.h"

using namespace moelab;
namespace k = moelab::kernels;

namespace {

struct Composed {
  Tensor y, p, dq, dk, dv;
};

Composed composed(const Tensor& q, const Tensor& key, const Tensor& v, const Tensor& dy) {
  Composed c;
  c.p = k::softmax(k::causal_mask(k::matmul(q, key, false, true), -std::numeric_limits<double>::infinity()));
  c.y = k::matmul(c.p, v);
  const Tensor ds = k::softmax_backward(c.p, k::matmul(dy, v, false, true));
  c.dq = k::matmul(ds, key);
  c.dk = k::matmul(ds, q, true, false);
  c.dv = k::matmul(c.p, dy, true, false);
  return c;
}

// max |got - want| / (1 + max |want|)
double error(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  const auto g = got.to(DType::Float64).to_vector<double>(), w = want.to(DType::Float64).to_vector<double>();
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < g.size(); ++i) err = std::max(err, std::abs(g[i] - w[i])), scale = std::max(scale, std::abs(w[i]));
  return err / (1 + scale);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.to(DType::Float64).to_vector<double>() == b.to(DType::Float64).to_vector<double>();
}

const std::vector<std::array<std::int64_t, 4>> kShapes = {  // N, T, S, hd
    {3, 5, 5, 4}, {2, 30, 30, 8}, {2, 7, 31, 6}, {1, 1, 9, 2}, {2, 50, 50, 3}, {8, 64, 64, 32}};

}  // namespace

TEST_CASE("causal_attention equals softmax(causal_mask(q k^T)) v and its composed backward") {
  Generator gen(3);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const double tol = dtype == DType::Float32 ? 2e-6 : 1e-13;
    for (const auto& [n, t, s, hd] : kShapes) {
      INFO(dtype, " N ", n, " T ", t, " S ", s, " hd ", hd);
      const Tensor q = normal({n, t, hd}, 0, 1, gen, dtype), key = normal({n, s, hd}, 0, 1, gen, dtype);
      const Tensor v = normal({n, s, hd}, 0, 1, gen, dtype), dy = normal({n, t, hd}, 0, 1, gen, dtype);
      const k::AttentionResult r = k::causal_attention(q, key, v);
      const k::AttentionGrads g = k::causal_attention_backward(q, key, v, r.p, dy);
      const Composed c = composed(q, key, v, dy);
      CHECK(error(r.p, c.p) < tol);
      CHECK(error(r.y, c.y) < tol);
      CHECK(error(g.dq, c.dq) < tol);
      CHECK(error(g.dk, c.dk) < tol);
      CHECK(error(g.dv, c.dv) < tol);
      // Masked weights are exactly 0 (never exponentiated), visible ones positive, rows sum to 1.
      const auto p = r.p.to(DType::Float64).to_vector<double>();
      bool masked_zero = true, visible_positive = true, sums_to_one = true;
      for (std::int64_t row = 0; row < n * t; ++row) {
        const std::int64_t i = row % t;
        double sum = 0;
        for (std::int64_t j = 0; j < s; ++j) {
          const double w = p[static_cast<std::size_t>(row * s + j)];
          if (j > i + s - t) masked_zero = masked_zero && w == 0.0;
          else visible_positive = visible_positive && w > 0.0;
          sum += w;
        }
        sums_to_one = sums_to_one && std::abs(sum - 1) < 1e-5;
      }
      CHECK(masked_zero);
      CHECK(visible_positive);
      CHECK(sums_to_one);
    }
  }
}

TEST_CASE("causal_attention gives the same bits on 1 and 2 threads") {
  Generator gen(4);
  const Tensor q = normal({8, 40, 16}, 0, 1, gen), key = normal({8, 40, 16}, 0, 1, gen);
  const Tensor v = normal({8, 40, 16}, 0, 1, gen), dy = normal({8, 40, 16}, 0, 1, gen);
  const int before = num_threads();
  auto run = [&](int threads) {
    set_num_threads(threads);
    const k::AttentionResult r = k::causal_attention(q, key, v);
    const k::AttentionGrads g = k::causal_attention_backward(q, key, v, r.p, dy);
    return std::vector<Tensor>{r.y, r.p, g.dq, g.dk, g.dv};
  };
  const std::vector<Tensor> one = run(1), two = run(2);
  set_num_threads(before);
  for (std::size_t i = 0; i < one.size(); ++i) CHECK(same_bits(one[i], two[i]));
}

TEST_CASE("causal_attention rejects S < T, mismatched shapes and dtypes") {
  Generator gen(5);
  const Tensor q = normal({2, 4, 3}, 0, 1, gen), kv = normal({2, 4, 3}, 0, 1, gen);
  CHECK_THROWS_AS(k::causal_attention(q, normal({2, 3, 3}, 0, 1, gen), normal({2, 3, 3}, 0, 1, gen)), Error);  // S < T
  CHECK_THROWS_AS(k::causal_attention(q, normal({2, 4, 2}, 0, 1, gen), kv), Error);                               // hd
  CHECK_THROWS_AS(k::causal_attention(q, kv, normal({1, 4, 3}, 0, 1, gen)), Error);                              // N
  CHECK_THROWS_AS(k::causal_attention(q, kv, kv.to(DType::Float64)), Error);
  CHECK_THROWS_AS(k::causal_attention(q.reshape({8, 3}), kv, kv), Error);
  const k::AttentionResult r = k::causal_attention(q, kv, kv);
  CHECK_THROWS_AS(k::causal_attention_backward(q, kv, kv, r.p, normal({2, 4, 2}, 0, 1, gen)), Error);
  CHECK_THROWS_AS(k::causal_attention_backward(q, kv, kv, r.y, q), Error);
}
