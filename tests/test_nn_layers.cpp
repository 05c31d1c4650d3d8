// tests/test_nn_layers.cpp — the nn layers: parameter names, shapes and initialisation; each
// forward against a naive double-precision loop (Linear, Embedding, RMSNorm, LayerNorm, MLP, and
// attention with RoPE); RoPE against an explicit rotation matrix; causality; attention with a KV
// cache equal to attention without; the sequence losses; bad inputs throwing moelab::Error that
// names the layer.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/nn.h"
#include "tests/test_util.h"

using namespace moelab;
using moelab::testing::max_error;
using moelab::testing::to_doubles;

namespace {

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, p] : m.named_parameters()) out.push_back(name);
  return out;
}

std::vector<double> values(const Variable& v) { return to_doubles(v.data()); }

// y[n, o] = sum_i x[n, i] * w[o, i]  (x: [N, in], w: [out, in])
std::vector<double> naive_linear(const std::vector<double>& x, const std::vector<double>& w, std::int64_t n,
                                 std::int64_t in, std::int64_t out) {
  std::vector<double> y(static_cast<std::size_t>(n * out), 0.0);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t i = 0; i < in; ++i)
        y[static_cast<std::size_t>(r * out + o)] +=
            x[static_cast<std::size_t>(r * in + i)] * w[static_cast<std::size_t>(o * in + i)];
  return y;
}

// Rotates pairs (2i, 2i+1) of each hd-vector at row (b, t, h) of x: [B, T, H, hd] by pos t * theta^(-2i/hd).
void naive_rope_inplace(std::vector<double>& x, std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t hd,
                        double theta) {
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t i = 0; i < hd / 2; ++i) {
          const double a = double(t) * std::pow(theta, -2.0 * double(i) / double(hd));
          const auto at = static_cast<std::size_t>(((b * T + t) * H + h) * hd + 2 * i);
          const double x0 = x[at], x1 = x[at + 1];
          x[at] = x0 * std::cos(a) - x1 * std::sin(a);
          x[at + 1] = x0 * std::sin(a) + x1 * std::cos(a);
        }
}

// Causal multi-head attention with RoPE, by loops. x: [B, T, d] -> [B, T, d].
std::vector<double> naive_attention(const Attention& attn, const std::vector<double>& x, std::int64_t B,
                                    std::int64_t T) {
  const std::int64_t d = attn.dim(), H = attn.heads(), hd = attn.head_dim();
  auto w = [&](const char* name) { return values(attn.parameter(std::string(name) + ".weight")); };
  std::vector<double> q = naive_linear(x, w("q"), B * T, d, d), k = naive_linear(x, w("k"), B * T, d, d),
                      v = naive_linear(x, w("v"), B * T, d, d);
  naive_rope_inplace(q, B, T, H, hd, attn.rope_theta());
  naive_rope_inplace(k, B, T, H, hd, attn.rope_theta());
  std::vector<double> y(x.size(), 0.0);
  auto at = [&](std::int64_t b, std::int64_t t, std::int64_t h, std::int64_t j) {
    return static_cast<std::size_t>((b * T + t) * d + h * hd + j);
  };
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t t = 0; t < T; ++t) {
        std::vector<double> s(static_cast<std::size_t>(t + 1));
        double top = -std::numeric_limits<double>::infinity(), total = 0;
        for (std::int64_t u = 0; u <= t; ++u) {
          double dot = 0;
          for (std::int64_t j = 0; j < hd; ++j) dot += q[at(b, t, h, j)] * k[at(b, u, h, j)];
          s[static_cast<std::size_t>(u)] = dot / std::sqrt(double(hd));
          top = std::max(top, s[static_cast<std::size_t>(u)]);
        }
        for (double& e : s) total += (e = std::exp(e - top));
        for (std::int64_t u = 0; u <= t; ++u)
          for (std::int64_t j = 0; j < hd; ++j) y[at(b, t, h, j)] += s[static_cast<std::size_t>(u)] / total * v[at(b, u, h, j)];
      }
  return naive_linear(y, w("o"), B * T, d, d);
}

}  // namespace

TEST_CASE("parameter names and shapes of every layer") {
  Generator gen(1);
  Linear lin(4, 3, gen);
  CHECK(names_of(lin) == std::vector<std::string>{"weight", "bias"});
  CHECK(lin.weight().shape() == Shape{3, 4});
  CHECK(lin.bias().shape() == Shape{3});
  Linear nobias(4, 3, gen, false);
  CHECK(names_of(nobias) == std::vector<std::string>{"weight"});
  CHECK_FALSE(nobias.bias().defined());

  Embedding emb(7, 5, gen);
  CHECK(names_of(emb) == std::vector<std::string>{"weight"});
  CHECK(emb.weight().shape() == Shape{7, 5});

  RMSNorm rms(6);
  CHECK(names_of(rms) == std::vector<std::string>{"weight"});
  CHECK(values(rms.weight()) == std::vector<double>(6, 1.0));
  CHECK(rms.eps() == 1e-5);
  LayerNorm ln(6);
  CHECK(names_of(ln) == std::vector<std::string>{"weight", "bias"});
  CHECK(values(ln.bias()) == std::vector<double>(6, 0.0));

  MLP mlp(4, 10, gen);
  CHECK(names_of(mlp) == std::vector<std::string>{"up.weight", "down.weight"});
  CHECK(mlp.parameter("up.weight").shape() == Shape{10, 4});
  CHECK(mlp.parameter("down.weight").shape() == Shape{4, 10});
  MLP mlp_bias(4, 10, gen, true);
  CHECK(names_of(mlp_bias) == std::vector<std::string>{"up.weight", "up.bias", "down.weight", "down.bias"});

  Attention attn(8, 2, gen);
  CHECK(names_of(attn) == std::vector<std::string>{"q.weight", "k.weight", "v.weight", "o.weight"});
  for (const auto& [name, p] : attn.named_parameters()) CHECK(p.shape() == Shape{8, 8});
  CHECK(attn.head_dim() == 4);

  Linear f64(3, 2, gen, true, DType::Float64);
  CHECK(f64.weight().dtype() == DType::Float64);
  CHECK(f64.bias().dtype() == DType::Float64);
}

TEST_CASE("initialisation: PyTorch's bounds and distributions, deterministic per seed") {
  Generator gen(2);
  Linear lin(64, 32, gen);
  const double bound = 1.0 / 8.0;
  double lo = 1, hi = -1;
  for (double w : values(lin.weight())) lo = std::min(lo, w), hi = std::max(hi, w);
  CHECK(lo >= -bound);
  CHECK(hi < bound);
  CHECK(lo < -0.9 * bound);  // 2048 draws fill the range
  CHECK(hi > 0.9 * bound);
  for (double b : values(lin.bias())) CHECK(std::abs(b) <= bound);

  Embedding emb(100, 50, gen);
  double mean = 0, sq = 0;
  const std::vector<double> e = values(emb.weight());
  for (double v : e) mean += v, sq += v * v;
  mean /= double(e.size());
  CHECK(std::abs(mean) < 0.05);
  CHECK(std::sqrt(sq / double(e.size()) - mean * mean) == doctest::Approx(1.0).epsilon(0.05));

  Generator a(9), b(9);
  CHECK(values(MLP(4, 6, a).parameter("down.weight")) == values(MLP(4, 6, b).parameter("down.weight")));
}

TEST_CASE("Linear equals a manual product, with and without bias, for any leading axes") {
  Generator gen(3);
  for (bool bias : {true, false}) {
    Linear lin(5, 3, gen, bias);
    const Tensor x = normal({2, 4, 5}, 0, 1, gen);
    std::vector<double> want = naive_linear(to_doubles(x), values(lin.weight()), 8, 5, 3);
    if (bias)
      for (std::size_t i = 0; i < want.size(); ++i) want[i] += values(lin.bias())[i % 3];
    const Variable y = lin.forward(Variable(x));
    CHECK(y.shape() == Shape{2, 4, 3});
    CHECK(max_error(y.data(), want) < 1e-5);
    // 2-d and 1-d inputs
    CHECK(max_error(lin.forward(Variable(x.reshape({8, 5}))).data(), want) < 1e-5);
    CHECK(lin.forward(Variable(x.reshape({40}).slice(0, 5))).shape() == Shape{3});
  }
}

TEST_CASE("Embedding gathers rows; norms and the MLP match naive loops") {
  Generator gen(4);
  Embedding emb(6, 3, gen);
  const Tensor ids = from_vector(std::vector<std::int32_t>{5, 0, 2, 2}, {2, 2});
  const Variable e = emb.forward(ids);
  CHECK(e.shape() == Shape{2, 2, 3});
  const std::vector<double> w = values(emb.weight());
  std::vector<double> want;
  for (int id : {5, 0, 2, 2})
    for (int c = 0; c < 3; ++c) want.push_back(w[static_cast<std::size_t>(id * 3 + c)]);
  CHECK(max_error(e.data(), want) == 0.0);

  const Tensor x = normal({3, 4}, 0, 2, gen);
  const std::vector<double> xv = to_doubles(x);
  RMSNorm rms(4);
  LayerNorm ln(4);
  std::vector<double> want_rms, want_ln;
  for (int r = 0; r < 3; ++r) {
    double ms = 0, mu = 0, var = 0;
    for (int c = 0; c < 4; ++c) ms += xv[r * 4 + c] * xv[r * 4 + c] / 4, mu += xv[r * 4 + c] / 4;
    for (int c = 0; c < 4; ++c) var += (xv[r * 4 + c] - mu) * (xv[r * 4 + c] - mu) / 4;
    for (int c = 0; c < 4; ++c) {
      want_rms.push_back(xv[r * 4 + c] / std::sqrt(ms + 1e-5));
      want_ln.push_back((xv[r * 4 + c] - mu) / std::sqrt(var + 1e-5));
    }
  }
  CHECK(max_error(rms.forward(Variable(x)).data(), want_rms) < 1e-5);
  CHECK(max_error(ln.forward(Variable(x)).data(), want_ln) < 1e-5);

  MLP mlp(4, 7, gen);
  std::vector<double> h = naive_linear(xv, values(mlp.parameter("up.weight")), 3, 4, 7);
  for (double& v : h) v = std::max(v, 0.0);
  CHECK(max_error(mlp.forward(Variable(x)).data(), naive_linear(h, values(mlp.parameter("down.weight")), 3, 7, 4)) <
        1e-5);
}

TEST_CASE("rope equals an explicit rotation matrix per position") {
  Generator gen(5);
  const std::int64_t T = 5, hd = 6;
  const double theta = 10000.0;
  const Tensor x = normal({1, T, 1, hd}, 0, 1, gen, DType::Float64);
  const std::vector<double> y = rope(Variable(x), 2).data().to_vector<double>();
  for (std::int64_t t = 0; t < T; ++t) {
    // R: [hd, hd], block-diagonal with 2x2 rotations by (2 + t) * theta^(-2i/hd).
    std::vector<double> R(static_cast<std::size_t>(hd * hd), 0.0);
    for (std::int64_t i = 0; i < hd / 2; ++i) {
      const double a = double(2 + t) * std::pow(theta, -2.0 * double(i) / double(hd));
      R[static_cast<std::size_t>((2 * i) * hd + 2 * i)] = std::cos(a);
      R[static_cast<std::size_t>((2 * i) * hd + 2 * i + 1)] = -std::sin(a);
      R[static_cast<std::size_t>((2 * i + 1) * hd + 2 * i)] = std::sin(a);
      R[static_cast<std::size_t>((2 * i + 1) * hd + 2 * i + 1)] = std::cos(a);
    }
    const Tensor row = kernels::narrow(x, 1, t, 1).reshape({hd, 1});
    const std::vector<double> want = kernels::matmul(from_vector(R, {hd, hd}), row).to_vector<double>();
    const std::vector<double> got(y.begin() + t * hd, y.begin() + (t + 1) * hd);
    CHECK(max_error(got, want) < 1e-14);
  }
}

TEST_CASE("Attention matches a naive loop in float64 and float32") {
  Generator gen(6);
  for (DType dtype : {DType::Float64, DType::Float32}) {
    Attention attn(12, 3, gen, 100.0, dtype);
    const Tensor x = normal({2, 5, 12}, 0, 1, gen, dtype);
    const Variable y = attn.forward(Variable(x));
    CHECK(y.shape() == Shape{2, 5, 12});
    CHECK(y.dtype() == dtype);
    CHECK(max_error(y.data(), naive_attention(attn, to_doubles(x), 2, 5)) < (dtype == DType::Float64 ? 1e-12 : 1e-5));
  }
}

TEST_CASE("Attention output at position t does not depend on tokens after t") {
  Generator gen(7);
  Attention attn(8, 2, gen);
  const Tensor x = normal({2, 6, 8}, 0, 1, gen);
  const std::vector<double> base = to_doubles(attn.forward(Variable(x)).data());
  for (std::int64_t t = 0; t < 5; ++t) {
    // Replace every position after t with new values.
    std::vector<float> changed = x.to_vector<float>();
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t u = t + 1; u < 6; ++u)
        for (std::int64_t c = 0; c < 8; ++c) changed[static_cast<std::size_t>((b * 6 + u) * 8 + c)] += 3.0f;
    const std::vector<double> y = to_doubles(attn.forward(Variable(from_vector(changed, {2, 6, 8}))).data());
    bool later_changed = false;
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t u = 0; u < 6; ++u)
        for (std::int64_t c = 0; c < 8; ++c) {
          const auto i = static_cast<std::size_t>((b * 6 + u) * 8 + c);
          if (u <= t) CHECK(y[i] == base[i]);
          else if (y[i] != base[i]) later_changed = true;
        }
    CHECK(later_changed);  // the perturbation is visible where it may be
  }
}

TEST_CASE("Attention with a KV cache, fed in chunks, equals attention over the whole sequence") {
  Generator gen(8);
  Attention attn(8, 2, gen, 10000.0, DType::Float64);
  const Tensor x = normal({3, 7, 8}, 0, 1, gen, DType::Float64);
  const std::vector<double> full = attn.forward(Variable(x)).data().to_vector<double>();
  LayerKV cache;
  std::vector<Tensor> pieces;
  std::int64_t at = 0;
  for (std::int64_t len : {3, 1, 2, 1}) {
    pieces.push_back(attn.forward(Variable(kernels::narrow(x, 1, at, len)), at, &cache).data());
    at += len;
    CHECK(cache.length() == at);
    CHECK(cache.k.shape() == Shape{3, 2, at, 4});
  }
  CHECK(max_error(kernels::concat(pieces, 1), full) < 1e-12);
  // A position offset that disagrees with the cache is an error.
  CHECK_THROWS_WITH_AS(attn.forward(Variable(kernels::narrow(x, 1, 0, 1)), 3, &cache), doctest::Contains("Attention"),
                       Error);
}

TEST_CASE("nn::cross_entropy over [B, T, V] equals the flat loss; ignored positions are skipped") {
  Generator gen(9);
  const Tensor logits = normal({2, 3, 5}, 0, 1, gen, DType::Float64);
  const Tensor targets = from_vector(std::vector<std::int32_t>{1, -100, 4, 0, 0, -100}, {2, 3});
  const double got = nn::cross_entropy(Variable(logits), targets).data().item<double>();
  const std::vector<double> l = logits.to_vector<double>();
  double total = 0;
  int kept = 0;
  for (int r = 0; r < 6; ++r) {
    const int t = targets.to_vector<std::int32_t>()[static_cast<std::size_t>(r)];
    if (t == -100) continue;
    double z = 0;
    for (int c = 0; c < 5; ++c) z += std::exp(l[static_cast<std::size_t>(r * 5 + c)]);
    total += std::log(z) - l[static_cast<std::size_t>(r * 5 + t)];
    ++kept;
  }
  CHECK(got == doctest::Approx(total / kept).epsilon(1e-12));
  // Another ignore index: zeros skipped exactly as -100 is.
  const Tensor zeros_ignored = from_vector(std::vector<std::int32_t>{1, 0, 4, 3, 0, 2}, {2, 3});
  const Tensor same_with_default = from_vector(std::vector<std::int32_t>{1, -100, 4, 3, -100, 2}, {2, 3});
  CHECK(nn::cross_entropy(Variable(logits), zeros_ignored, 0).data().item<double>() ==
        nn::cross_entropy(Variable(logits), same_with_default).data().item<double>());
  CHECK_THROWS_WITH_AS(nn::cross_entropy(Variable(logits), targets.reshape({3, 2})), doctest::Contains("cross_entropy"),
                       Error);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(Variable(logits), zeros({2, 3})), doctest::Contains("cross_entropy"), Error);
  const Tensor a = normal({4, 2}, 0, 1, gen, DType::Float64), b = normal({4, 2}, 0, 1, gen, DType::Float64);
  CHECK(nn::mse_loss(Variable(a), Variable(b)).data().item<double>() ==
        doctest::Approx(mse_loss(Variable(a), Variable(b)).data().item<double>()));
}

TEST_CASE("bad inputs throw moelab::Error naming the layer") {
  Generator gen(10);
  Linear lin(4, 3, gen);
  CHECK_THROWS_WITH_AS(lin.forward(Variable(zeros({2, 5}))), doctest::Contains("Linear"), Error);
  CHECK_THROWS_WITH_AS(lin.forward(Variable(zeros({2, 4}, DType::Float64))), doctest::Contains("Linear"), Error);
  CHECK_THROWS_WITH_AS(lin.forward(Variable()), doctest::Contains("Linear"), Error);
  CHECK_THROWS_WITH_AS(Linear(0, 3, gen), doctest::Contains("Linear"), Error);

  Embedding emb(5, 3, gen);
  CHECK_THROWS_WITH_AS(emb.forward(zeros({2, 2})), doctest::Contains("Embedding"), Error);
  CHECK_THROWS_WITH_AS(emb.forward(from_vector(std::vector<std::int32_t>{5}, {1})), doctest::Contains("embedding"),
                       Error);

  CHECK_THROWS_WITH_AS(RMSNorm(4).forward(Variable(zeros({2, 3}))), doctest::Contains("RMSNorm"), Error);
  CHECK_THROWS_WITH_AS(RMSNorm(4, 0.0), doctest::Contains("RMSNorm"), Error);
  CHECK_THROWS_WITH_AS(LayerNorm(4).forward(Variable(zeros({2, 3}))), doctest::Contains("LayerNorm"), Error);
  MLP mlp(4, 6, gen);
  CHECK_THROWS_WITH_AS(mlp.forward(Variable(zeros({2, 6}))), doctest::Contains("MLP"), Error);

  Attention attn(8, 2, gen);
  CHECK_THROWS_WITH_AS(attn.forward(Variable(zeros({4, 8}))), doctest::Contains("Attention"), Error);
  CHECK_THROWS_WITH_AS(attn.forward(Variable(zeros({1, 4, 6}))), doctest::Contains("Attention"), Error);
  CHECK_THROWS_WITH_AS(attn.forward(Variable(zeros({1, 0, 8}))), doctest::Contains("Attention"), Error);
  CHECK_THROWS_WITH_AS(Attention(8, 3, gen), doctest::Contains("Attention"), Error);
  CHECK_THROWS_WITH_AS(Attention(6, 2, gen), doctest::Contains("even"), Error);  // head_dim 3
  LayerKV cache;
  attn.forward(Variable(zeros({2, 3, 8})), 0, &cache);
  CHECK_THROWS_WITH_AS(attn.forward(Variable(zeros({1, 1, 8})), 3, &cache), doctest::Contains("cache"), Error);

  CHECK_THROWS_WITH_AS(rope(Variable(zeros({1, 2, 2, 3}))), doctest::Contains("rope"), Error);
}
