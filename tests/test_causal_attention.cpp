// tests/test_causal_attention.cpp — the fused causal attention kernel (core/cpu/attention.cpp)
// against the ops it replaces, composed: the heads permuted from [B, T, H, hd] to [B*H, T, hd],
// p = softmax(causal_mask(scale * q @ k^T, -inf)), y = p @ v permuted back, and the backward
// dp = dy @ v^T, ds = scale * softmax_backward(p, dp), dq = ds @ k, dk = ds^T @ q, dv = p^T @ dy.
// Shapes cover one block of query rows and several (blocks are 24 rows), S > T (queries after a
// cache), T == 1, one head and several, and the benchmark model's attention; float32 and float64.
// Also: masked weights exactly 0, results independent of the thread count, and the argument checks.
// bfloat16 q, k, v, dy (the bf16 policy's operands): the composed ops on the same bf16 operands,
// where the two products of two bf16 operands (q k^T, dy v^T) are bf16 products and the four that
// read p or ds float32 products on the bf16 values, with the float32 case's tolerance: both sides
// multiply the same values exactly and sum in float32.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
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

// [B, L, H, hd] -> [B*H, L, hd] and back
Tensor heads(const Tensor& x) {
  return k::permute(x, {0, 2, 1, 3}).reshape({x.size(0) * x.size(2), x.size(1), x.size(3)});
}
Tensor unheads(const Tensor& x, std::int64_t batch) {
  return k::permute(x.reshape({batch, x.size(0) / batch, x.size(1), x.size(2)}), {0, 2, 1, 3});
}

Composed composed(const Tensor& q4, const Tensor& key4, const Tensor& v4, double scale, const Tensor& dy4,
                  bool causal = true) {
  const std::int64_t b = q4.size(0);
  const Tensor q = heads(q4), key = heads(key4), v = heads(v4), dy = heads(dy4);
  Composed c;
  const Tensor scores = k::mul(k::matmul(q, key, false, true), scale);
  c.p = k::softmax(causal ? k::causal_mask(scores, -std::numeric_limits<double>::infinity()) : scores);
  c.y = unheads(k::matmul(c.p, v), b);
  const Tensor ds = k::mul(k::softmax_backward(c.p, k::matmul(dy, v, false, true)), scale);
  c.dq = unheads(k::matmul(ds, key), b);
  c.dk = unheads(k::matmul(ds, q, true, false), b);
  c.dv = unheads(k::matmul(c.p, dy, true, false), b);
  c.p = c.p.reshape({b, q4.size(2), q4.size(1), key4.size(1)});
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

const std::vector<std::array<std::int64_t, 5>> kShapes = {  // B, T, S, H, hd
    {3, 5, 5, 1, 4}, {2, 30, 30, 2, 8}, {2, 7, 31, 3, 6}, {1, 1, 9, 2, 2}, {1, 50, 50, 1, 3}, {1, 64, 64, 2, 32}};

}  // namespace

// The kernel, forward and backward, against the composed ops on random q, k, v, dy of one shape
// (B, T, S, H, hd) at `scale`; returns the kernel's forward for further checks.
k::AttentionResult check_against_composed(Generator& gen, DType dtype, const std::array<std::int64_t, 5>& shape,
                                          double scale) {
  const auto [b, t, s, h, hd] = shape;
  INFO(dtype, " B ", b, " T ", t, " S ", s, " H ", h, " hd ", hd, " scale ", scale);
  const double tol = dtype == DType::Float32 ? 2e-6 : 1e-13;
  const Tensor q = normal({b, t, h, hd}, 0, 1, gen, dtype), key = normal({b, s, h, hd}, 0, 1, gen, dtype);
  const Tensor v = normal({b, s, h, hd}, 0, 1, gen, dtype), dy = normal({b, t, h, hd}, 0, 1, gen, dtype);
  const k::AttentionResult r = k::causal_attention(q, key, v, scale);
  const k::AttentionGrads g = k::causal_attention_backward(q, key, v, scale, r.p, dy);
  const Composed c = composed(q, key, v, scale, dy);
  CHECK(error(r.p, c.p) < tol);
  CHECK(error(r.y, c.y) < tol);
  CHECK(error(g.dq, c.dq) < tol);
  CHECK(error(g.dk, c.dk) < tol);
  CHECK(error(g.dv, c.dv) < tol);
  return r;
}

TEST_CASE("causal_attention equals softmax(causal_mask(scale q k^T)) v per head and its composed backward") {
  Generator gen(3);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const auto& shape : kShapes) {
      const auto [b, t, s, h, hd] = shape;
      INFO(dtype, " B ", b, " T ", t, " S ", s, " H ", h, " hd ", hd);
      const k::AttentionResult r = check_against_composed(gen, dtype, shape, 1.0 / std::sqrt(static_cast<double>(hd)));
      // Masked weights are exactly 0 (never exponentiated), visible ones positive, rows sum to 1.
      const auto p = r.p.to(DType::Float64).to_vector<double>();
      bool masked_zero = true, visible_positive = true, sums_to_one = true;
      for (std::int64_t row = 0; row < b * h * t; ++row) {
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

TEST_CASE("causal_attention shifts each row by its own max: sharp scores stay finite and exact") {
  // Scores of hundreds (scale 30): a row exponentiated against another row's max overflows to inf
  // or underflows to 0, so any mix-up of the rows' maxima or sums (the kernel computes them for a
  // group of rows at a time) fails here, where the random scores of the case above stay within
  // tolerance whichever max is subtracted.
  Generator gen(8);
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const auto& shape : kShapes) check_against_composed(gen, dtype, shape, 30.0);
}

TEST_CASE("attention on bfloat16 q, k, v equals the composed ops on the same operands, and gives float32") {
  Generator gen(5);
  const auto widened = [](const Tensor& x) { return x.to(DType::Float32); };
  for (const bool causal : {true, false})
    for (const auto& [b, t, s, h, hd] : kShapes) {
      INFO(std::string(causal ? "causal" : "bidirectional"), " B ", b, " T ", t, " S ", s, " H ", h, " hd ", hd);
      const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
      const auto bf16 = [&](Shape shape) { return normal(shape, 0, 1, gen).to(DType::BFloat16); };
      const Tensor q = bf16({b, t, h, hd}), key = bf16({b, s, h, hd}), v = bf16({b, s, h, hd}), dy = bf16({b, t, h, hd});
      const k::AttentionResult r = k::attention(q, key, v, scale, causal);
      REQUIRE(r.y.dtype() == DType::Float32);
      REQUIRE(r.p.dtype() == DType::Float32);
      const k::AttentionGrads g = k::attention_backward(q, key, v, scale, causal, r.p, dy);
      REQUIRE(g.dq.dtype() == DType::Float32);
      // The composed reference: bf16 products where both operands are bf16, float32 ones on p, ds.
      // (The heads are permuted in float32, whose copy is exact, then held as bf16 again.)
      const auto heads16 = [&](const Tensor& x) { return heads(widened(x)).to(DType::BFloat16); };
      const Tensor qh = heads16(q), kh = heads16(key), vh = heads16(v), gh = heads16(dy);
      const Tensor scores = k::mul(k::matmul(qh, kh, false, true), scale);
      const Tensor p = k::softmax(causal ? k::causal_mask(scores, -std::numeric_limits<double>::infinity()) : scores);
      const Tensor y = unheads(k::matmul(p, widened(vh)), b);
      const Tensor ds = k::mul(k::softmax_backward(p, k::matmul(gh, vh, false, true)), scale);
      const double tol = 2e-6;
      CHECK(error(r.p, p.reshape(r.p.shape())) < tol);
      CHECK(error(r.y, y) < tol);
      CHECK(error(g.dq, unheads(k::matmul(ds, widened(kh)), b)) < tol);
      CHECK(error(g.dk, unheads(k::matmul(ds, widened(qh), true, false), b)) < tol);
      CHECK(error(g.dv, unheads(k::matmul(p, widened(gh), true, false), b)) < tol);
    }
  // dy must be bf16 like q, p float32.
  const Tensor q = normal({1, 3, 1, 4}, 0, 1, gen).to(DType::BFloat16);
  const k::AttentionResult r = k::causal_attention(q, q, q, 0.5);
  CHECK_THROWS_AS(k::causal_attention_backward(q, q, q, 0.5, r.p, r.y), Error);
  CHECK_THROWS_AS(k::causal_attention_backward(q, q, q, 0.5, r.p.to(DType::BFloat16), q), Error);
}

TEST_CASE("causal_attention gives the same bits on 1 and 2 threads") {
  Generator gen(4);
  const Tensor q = normal({4, 40, 2, 16}, 0, 1, gen), key = normal({4, 40, 2, 16}, 0, 1, gen);
  const Tensor v = normal({4, 40, 2, 16}, 0, 1, gen), dy = normal({4, 40, 2, 16}, 0, 1, gen);
  const int before = num_threads();
  auto run = [&](int threads) {
    set_num_threads(threads);
    const k::AttentionResult r = k::causal_attention(q, key, v, 0.25);
    const k::AttentionGrads g = k::causal_attention_backward(q, key, v, 0.25, r.p, dy);
    return std::vector<Tensor>{r.y, r.p, g.dq, g.dk, g.dv};
  };
  const std::vector<Tensor> one = run(1), two = run(2);
  set_num_threads(before);
  for (std::size_t i = 0; i < one.size(); ++i) CHECK(same_bits(one[i], two[i]));
}

TEST_CASE("attention without the mask (bidirectional) equals softmax(scale q k^T) v and its composed backward") {
  Generator gen(6);
  // [B, T, S, H, hd]: T == S over one and several blocks, S > T, and S < T (allowed without the mask).
  const std::vector<std::array<std::int64_t, 5>> shapes = {
      {3, 5, 5, 1, 4}, {2, 30, 30, 2, 8}, {2, 7, 31, 3, 6}, {1, 50, 3, 2, 3}, {1, 1, 1, 1, 2}, {1, 64, 64, 2, 32}};
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const double tol = dtype == DType::Float32 ? 2e-6 : 1e-13;
    for (const auto& [b, t, s, h, hd] : shapes) {
      INFO(dtype, " B ", b, " T ", t, " S ", s, " H ", h, " hd ", hd);
      const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
      const Tensor q = normal({b, t, h, hd}, 0, 1, gen, dtype), key = normal({b, s, h, hd}, 0, 1, gen, dtype);
      const Tensor v = normal({b, s, h, hd}, 0, 1, gen, dtype), dy = normal({b, t, h, hd}, 0, 1, gen, dtype);
      const k::AttentionResult r = k::attention(q, key, v, scale, /*causal=*/false);
      const k::AttentionGrads g = k::attention_backward(q, key, v, scale, false, r.p, dy);
      const Composed c = composed(q, key, v, scale, dy, /*causal=*/false);
      CHECK(error(r.p, c.p) < tol);
      CHECK(error(r.y, c.y) < tol);
      CHECK(error(g.dq, c.dq) < tol);
      CHECK(error(g.dk, c.dk) < tol);
      CHECK(error(g.dv, c.dv) < tol);
      // Every weight is positive: nothing is masked.
      const auto p = r.p.to(DType::Float64).to_vector<double>();
      CHECK(std::all_of(p.begin(), p.end(), [](double w) { return w > 0.0; }));
    }
  }
  // The same bits on 1 and 2 threads, and the causal kernel is unchanged by the flag's default.
  const Tensor q = normal({4, 40, 2, 16}, 0, 1, gen), key = normal({4, 40, 2, 16}, 0, 1, gen);
  const Tensor v = normal({4, 40, 2, 16}, 0, 1, gen), dy = normal({4, 40, 2, 16}, 0, 1, gen);
  const int before = num_threads();
  auto run = [&](int threads) {
    set_num_threads(threads);
    const k::AttentionResult r = k::attention(q, key, v, 0.25, false);
    const k::AttentionGrads g = k::attention_backward(q, key, v, 0.25, false, r.p, dy);
    return std::vector<Tensor>{r.y, r.p, g.dq, g.dk, g.dv};
  };
  const std::vector<Tensor> one = run(1), two = run(2);
  set_num_threads(before);
  for (std::size_t i = 0; i < one.size(); ++i) CHECK(same_bits(one[i], two[i]));
  CHECK(same_bits(k::attention(q, key, v, 0.25, true).y, k::causal_attention(q, key, v, 0.25).y));
  CHECK_THROWS_AS(k::attention(q, normal({4, 0, 2, 16}, 0, 1, gen), normal({4, 0, 2, 16}, 0, 1, gen), 0.25, false),
                  Error);  // S = 0
}

TEST_CASE("causal_attention rejects S < T, mismatched shapes, dtypes and a bad scale") {
  Generator gen(5);
  const Tensor q = normal({2, 4, 2, 3}, 0, 1, gen), kv = normal({2, 4, 2, 3}, 0, 1, gen);
  auto randn = [&](const Shape& shape) { return normal(shape, 0, 1, gen); };
  CHECK_THROWS_AS(k::causal_attention(q, randn({2, 3, 2, 3}), randn({2, 3, 2, 3}), 1.0), Error);  // S < T
  CHECK_THROWS_AS(k::causal_attention(q, randn({2, 4, 2, 2}), kv, 1.0), Error);                    // hd
  CHECK_THROWS_AS(k::causal_attention(q, randn({2, 4, 1, 3}), randn({2, 4, 1, 3}), 1.0), Error);  // H
  CHECK_THROWS_AS(k::causal_attention(q, kv, randn({1, 4, 2, 3}), 1.0), Error);                   // B
  CHECK_THROWS_AS(k::causal_attention(q, kv, kv.to(DType::Float64), 1.0), Error);
  CHECK_THROWS_AS(k::causal_attention(q.reshape({8, 2, 3}), kv, kv, 1.0), Error);
  CHECK_THROWS_AS(k::causal_attention(q, kv, kv, 0.0), Error);
  CHECK_THROWS_AS(k::causal_attention(q, kv, kv, std::numeric_limits<double>::infinity()), Error);
  const k::AttentionResult r = k::causal_attention(q, kv, kv, 1.0);
  CHECK(r.p.shape() == Shape{2, 2, 4, 4});
  CHECK_THROWS_AS(k::causal_attention_backward(q, kv, kv, 1.0, r.p, randn({2, 4, 2, 2})), Error);
  CHECK_THROWS_AS(k::causal_attention_backward(q, kv, kv, 1.0, r.y, q), Error);
}
