// tests/test_soft_moe.cpp — the Soft MoE layer and its expert-subset evaluation.
//
//   - forward equals a float64 loop over the formulas of nn/moe/soft_moe.h (normalize off, on
//     with the slots mixing X_hat or X, p = 1 and p = 2, a non-default scale, expert biases),
//     1e-12; float32 agrees to 1e-5 (tests/test_soft_moe_scale.cpp: the scale (in)variance)
//   - D's columns sum to 1 over the tokens, C's rows sum to 1 over the slots
//   - All, TopK(n) and an all-ones mask equal forward(x) bitwise
//   - Algorithm 1 keeps exactly k experts, the k largest column sums computed by hand, ties to
//     the lower id; expert_scores equals the hand sums
//   - random subsets: k per example, reproducible for a seed, different across seeds
//   - dropped experts are not computed: NaN weights of a masked expert never reach the output,
//     and the output equals the loop with that expert's slot outputs set to 0
//   - float64 gradcheck of x and every parameter (normalize off, on with either slot inputs,
//     with a subset mask)
//   - bad shapes, k out of range and bad masks throw moelab::Error with a clear message
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/moe/soft_moe.h"
#include "tests/parameter_gradcheck.h"
#include "test_util.h"

using namespace moelab;
using moelab::testing::check_parameters;
using moelab::testing::max_error;
using V = std::vector<Variable>;

namespace {

using std::size_t;
size_t sz(std::int64_t v) { return static_cast<size_t>(v); }

Tensor randn(const Shape& shape, Generator& gen, double std = 1.0) {
  return normal(shape, 0.0, std, gen, DType::Float64);
}
std::vector<double> values(const Tensor& t) { return moelab::testing::to_doubles(t); }
void set_values(Variable p, const Tensor& v) { kernels::copy(p.data(), v); }

SoftMoEConfig f64_config(std::int64_t d, std::int64_t n, std::int64_t p, std::int64_t h, bool normalize,
                         bool bias = false, SlotInputs slots = SlotInputs::Normalized) {
  SoftMoEConfig c;
  c.slot_inputs = slots;
  c.d = d;
  c.experts = n;
  c.slots_per_expert = p;
  c.hidden = h;
  c.normalize = normalize;
  c.bias = bias;
  c.dtype = DType::Float64;
  return c;
}

// The formulas of soft_moe.h written as plain loops in double. keep: [B*n] (empty = all kept);
// dropped experts are skipped, their slot outputs are 0.
struct Reference {
  std::vector<double> y, D, C, scores;  // [B,m,d], [B,m,S], [B,m,S], [B,n]
};

Reference reference(const SoftMoE& moe, const Tensor& x, const std::vector<std::int32_t>& keep = {}) {
  const SoftMoEConfig& c = moe.config();
  const std::int64_t B = x.size(0), m = x.size(1), d = c.d, n = c.experts, p = c.slots_per_expert, S = n * p;
  const std::int64_t h = moe.experts().ffn();
  const std::vector<double> xv = values(x), phi = values(moe.phi().data());
  const std::vector<double> w_in = values(moe.experts().w_in().data()), w_out = values(moe.experts().w_out().data());
  const bool bias = c.bias;
  const std::vector<double> b_in = bias ? values(moe.experts().b_in().data()) : std::vector<double>();
  const std::vector<double> b_out = bias ? values(moe.experts().b_out().data()) : std::vector<double>();
  auto X = [&](std::int64_t b, std::int64_t i, std::int64_t k) { return xv[sz((b * m + i) * d + k)]; };

  // The routing matrix: phi, or scale * phi_hat.
  std::vector<double> w(phi);
  if (c.normalize) {
    const double scale = values(moe.scale().data())[0];
    for (std::int64_t s = 0; s < S; ++s) {
      double sq = 0;
      for (std::int64_t k = 0; k < d; ++k) sq += phi[sz(k * S + s)] * phi[sz(k * S + s)];
      for (std::int64_t k = 0; k < d; ++k) w[sz(k * S + s)] = scale * phi[sz(k * S + s)] / (std::sqrt(sq) + 1e-6);
    }
  }
  Reference r;
  std::vector<double> L(sz(B * m * S)), norm(sz(B * m), 1.0);  // norm: ||X[b, i]|| + 1e-6, or 1
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < m; ++i) {
      if (c.normalize) {
        double sq = 0;
        for (std::int64_t k = 0; k < d; ++k) sq += X(b, i, k) * X(b, i, k);
        norm[sz(b * m + i)] = std::sqrt(sq) + 1e-6;
      }
      for (std::int64_t s = 0; s < S; ++s) {
        double acc = 0;
        for (std::int64_t k = 0; k < d; ++k) acc += X(b, i, k) / norm[sz(b * m + i)] * w[sz(k * S + s)];
        L[sz((b * m + i) * S + s)] = acc;
      }
    }
  // What the slots mix: X_hat (normalize, slot_inputs Normalized) or X.
  const bool mix_normalized = c.normalize && c.slot_inputs == SlotInputs::Normalized;
  auto Xmix = [&](std::int64_t b, std::int64_t i, std::int64_t k) {
    return mix_normalized ? X(b, i, k) / norm[sz(b * m + i)] : X(b, i, k);
  };
  auto at = [&](std::int64_t b, std::int64_t i, std::int64_t s) { return sz((b * m + i) * S + s); };
  r.D.assign(L.size(), 0.0);
  r.C.assign(L.size(), 0.0);
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t s = 0; s < S; ++s) {  // D: softmax over tokens
      double mx = -1e300, z = 0;
      for (std::int64_t i = 0; i < m; ++i) mx = std::max(mx, L[at(b, i, s)]);
      for (std::int64_t i = 0; i < m; ++i) z += std::exp(L[at(b, i, s)] - mx);
      for (std::int64_t i = 0; i < m; ++i) r.D[at(b, i, s)] = std::exp(L[at(b, i, s)] - mx) / z;
    }
    for (std::int64_t i = 0; i < m; ++i) {  // C: softmax over slots
      double mx = -1e300, z = 0;
      for (std::int64_t s = 0; s < S; ++s) mx = std::max(mx, L[at(b, i, s)]);
      for (std::int64_t s = 0; s < S; ++s) z += std::exp(L[at(b, i, s)] - mx);
      for (std::int64_t s = 0; s < S; ++s) r.C[at(b, i, s)] = std::exp(L[at(b, i, s)] - mx) / z;
    }
  }
  r.scores.assign(sz(B * n), 0.0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t s = 0; s < S; ++s) r.scores[sz(b * n + s / p)] += r.C[at(b, i, s)];
  // Slots: Xs = D^T X_hat (or D^T X), Ys = expert(Xs) for kept experts, Y = C Ys.
  std::vector<double> ys(sz(B * S * d), 0.0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t s = 0; s < S; ++s) {
      const std::int64_t e = s / p;
      if (!keep.empty() && !keep[sz(b * n + e)]) continue;
      std::vector<double> xs(sz(d), 0.0), hid(sz(h));
      for (std::int64_t k = 0; k < d; ++k)
        for (std::int64_t i = 0; i < m; ++i) xs[sz(k)] += r.D[at(b, i, s)] * Xmix(b, i, k);
      for (std::int64_t o = 0; o < h; ++o) {
        double acc = bias ? b_in[sz(e * h + o)] : 0.0;
        for (std::int64_t k = 0; k < d; ++k) acc += xs[sz(k)] * w_in[sz((e * d + k) * h + o)];
        hid[sz(o)] = std::max(acc, 0.0);
      }
      for (std::int64_t k = 0; k < d; ++k) {
        double acc = bias ? b_out[sz(e * d + k)] : 0.0;
        for (std::int64_t o = 0; o < h; ++o) acc += hid[sz(o)] * w_out[sz((e * h + o) * d + k)];
        ys[sz((b * S + s) * d + k)] = acc;
      }
    }
  r.y.assign(sz(B * m * d), 0.0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t s = 0; s < S; ++s)
        for (std::int64_t k = 0; k < d; ++k)
          r.y[sz((b * m + i) * d + k)] += r.C[at(b, i, s)] * ys[sz((b * S + s) * d + k)];
  return r;
}

// Experts of example b in mask (int32 [B, n]) that are kept.
std::vector<int> kept_ids(const std::vector<std::int32_t>& mask, std::int64_t b, std::int64_t n) {
  std::vector<int> ids;
  for (std::int64_t e = 0; e < n; ++e)
    if (mask[sz(b * n + e)]) ids.push_back(static_cast<int>(e));
  return ids;
}

// The first k expert ids of example b ordered by (score descending, id ascending).
std::vector<int> top_ids(const std::vector<double>& scores, std::int64_t b, std::int64_t n, std::int64_t k) {
  std::vector<int> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int u, int v) {
    return scores[sz(b * n + u)] > scores[sz(b * n + v)];
  });
  ids.resize(static_cast<size_t>(k));
  std::sort(ids.begin(), ids.end());
  return ids;
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

}  // namespace

// normalize off; on with the slots mixing X_hat (the default); on with the slots mixing X.
const std::vector<std::pair<bool, SlotInputs>> kVariants{
    {false, SlotInputs::Normalized}, {true, SlotInputs::Normalized}, {true, SlotInputs::Raw}};

TEST_CASE("Soft MoE forward equals the float64 loop (normalize off / on, both slot inputs, p = 1 and 2)") {
  for (const auto& [normalize, slots] : kVariants)
    for (std::int64_t p : {1, 2}) {
      const bool bias = p == 2;
      INFO("normalize ", normalize, " raw slots ", slots == SlotInputs::Raw, " p ", p, " bias ", bias);
      Generator gen(21);
      SoftMoE moe(f64_config(5, 3, p, 7, normalize, bias, slots), gen);
      if (normalize) set_values(moe.scale(), full({1}, 1.7, DType::Float64));  // a scale that is used
      const Tensor x = randn({2, 4, 5}, gen);
      const Variable y = moe.forward(Variable(x));
      CHECK(y.shape() == x.shape());
      const Reference ref = reference(moe, x);
      CHECK(max_error(y.data(), ref.y) <= 1e-12);
      const SoftMoERouting r = moe.routing(Variable(x));
      CHECK(r.dispatch.shape() == Shape{2, 4, 3 * p});
      CHECK(max_error(r.dispatch.data(), ref.D) <= 1e-12);
      CHECK(max_error(r.combine.data(), ref.C) <= 1e-12);
      CHECK(max_error(moe.expert_scores(Variable(x)), ref.scores) <= 1e-12);
      // Parameters, in order.
      std::vector<std::string> names;
      for (const auto& [name, v] : moe.named_parameters()) names.push_back(name);
      std::vector<std::string> want{"phi"};
      if (normalize) want.push_back("scale");
      want.insert(want.end(), {"experts.w_in"});
      if (bias) want.push_back("experts.b_in");
      want.push_back("experts.w_out");
      if (bias) want.push_back("experts.b_out");
      CHECK(names == want);
      CHECK(moe.parameter("phi").shape() == Shape{5, 3 * p});
      CHECK(moe.parameter("experts.w_in").shape() == Shape{3, 5, 7});
      CHECK(moe.parameter("experts.w_out").shape() == Shape{3, 7, 5});
      if (normalize) CHECK(moe.parameter("scale").shape() == Shape{1});
    }
}

TEST_CASE("Soft MoE in float32 agrees with the float64 loop; phi initialisations") {
  Generator gen(22);
  SoftMoEConfig c = f64_config(8, 4, 1, 6, true);
  c.dtype = DType::Float32;
  SoftMoE moe(c, gen);
  const std::vector<double> phi = values(moe.phi().data());
  CHECK(*std::min_element(phi.begin(), phi.end()) >= -1.0);
  CHECK(*std::max_element(phi.begin(), phi.end()) < 1.0);
  CHECK(values(moe.scale().data()) == std::vector<double>{1.0});
  const Tensor x = normal({3, 4, 8}, 0.0, 1.0, gen, DType::Float32);
  const Variable y = moe.forward(Variable(x));
  CHECK(y.dtype() == DType::Float32);
  CHECK(max_error(y.data(), reference(moe, x).y) <= 1e-5);
  // LecunNormal: std 1/sqrt(d) (d = 400, so 4000 draws estimate it to a few percent).
  SoftMoEConfig lc = f64_config(400, 10, 1, 4, false);
  lc.phi_init = parse_phi_init("lecun_normal");
  SoftMoE lecun(lc, gen);
  const std::vector<double> lp = values(lecun.phi().data());
  double sq = 0;
  for (double v : lp) sq += v * v;
  CHECK(std::sqrt(sq / static_cast<double>(lp.size())) == doctest::Approx(0.05).epsilon(0.05));
  CHECK(parse_phi_init("uniform") == PhiInit::Uniform);
}

TEST_CASE("Soft MoE: D's columns sum to 1 over the tokens, C's rows sum to 1 over the slots") {
  Generator gen(23);
  SoftMoE moe(f64_config(6, 4, 2, 5, true), gen);
  const Tensor x = randn({3, 5, 6}, gen);
  const SoftMoERouting r = moe.routing(Variable(x));
  const std::int64_t B = 3, m = 5, S = 8;
  const std::vector<double> D = values(r.dispatch.data()), C = values(r.combine.data());
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t s = 0; s < S; ++s) {
      double total = 0;
      for (std::int64_t i = 0; i < m; ++i) total += D[sz((b * m + i) * S + s)];
      CHECK(total == doctest::Approx(1.0).epsilon(1e-13));
    }
    for (std::int64_t i = 0; i < m; ++i) {
      double total = 0;
      for (std::int64_t s = 0; s < S; ++s) total += C[sz((b * m + i) * S + s)];
      CHECK(total == doctest::Approx(1.0).epsilon(1e-13));
    }
  }
}

TEST_CASE("Soft MoE: All, TopK(n) and an all-ones mask equal the plain forward bitwise") {
  Generator gen(24);
  const std::int64_t B = 3, n = 5, p = 2;
  SoftMoE moe(f64_config(4, n, p, 6, true), gen);
  const Tensor x = randn({B, 3, 4}, gen);
  const std::vector<double> full_y = values(moe.forward(Variable(x)).data());
  CHECK(moe.last_mask().to_vector<std::int32_t>() == std::vector<std::int32_t>(sz(B * n), 1));
  CHECK(moe.last_computed_slots() == B * n * p);
  CHECK(values(moe.forward(Variable(x), ExpertSubset::all()).data()) == full_y);
  CHECK(values(moe.forward(Variable(x), ExpertSubset::top_k(n)).data()) == full_y);
  CHECK(moe.last_mask().to_vector<std::int32_t>() == std::vector<std::int32_t>(sz(B * n), 1));
  CHECK(values(moe.forward(Variable(x), ExpertSubset::from_mask(ones({n}, DType::Int32))).data()) == full_y);
  CHECK(values(moe.forward(Variable(x), ExpertSubset::from_mask(ones({B, n}, DType::Int32))).data()) == full_y);
  Generator draw(1);
  CHECK(values(moe.forward(Variable(x), ExpertSubset::random(n, draw)).data()) == full_y);
}

TEST_CASE("Algorithm 1 keeps the k largest column sums of C per example (hand-computed)") {
  for (std::int64_t p : {1, 2}) {
    INFO("p ", p);
    Generator gen(25);
    const std::int64_t B = 6, n = 7;
    SoftMoE moe(f64_config(5, n, p, 4, true), gen);
    set_values(moe.scale(), full({1}, 4.0, DType::Float64));  // sharper C: well separated scores
    const Tensor x = randn({B, 4, 5}, gen);
    const Reference ref = reference(moe, x);
    for (std::int64_t k = 1; k <= n; ++k) {
      INFO("k ", k);
      const Variable y = moe.forward(Variable(x), ExpertSubset::top_k(k));
      const std::vector<std::int32_t> mask = moe.last_mask().to_vector<std::int32_t>();
      REQUIRE(moe.last_mask().shape() == Shape{B, n});
      CHECK(moe.last_computed_slots() == B * k * p);
      for (std::int64_t b = 0; b < B; ++b) {
        // The hand-computed k-th and (k+1)-th scores are apart, so rounding cannot reorder them.
        std::vector<double> row(ref.scores.begin() + b * n, ref.scores.begin() + (b + 1) * n);
        std::sort(row.begin(), row.end(), std::greater<double>());
        if (k < n) REQUIRE(row[sz(k - 1)] - row[sz(k)] > 1e-9);
        const std::vector<int> kept = kept_ids(mask, b, n);
        CHECK(kept.size() == sz(k));
        CHECK(kept == top_ids(ref.scores, b, n, k));
      }
      // C is not renormalised: the output is the loop with the dropped slots' outputs zeroed.
      CHECK(max_error(y.data(), reference(moe, x, mask).y) <= 1e-12);
    }
  }
}

TEST_CASE("Algorithm 1 breaks ties toward the lower expert id") {
  Generator gen(26);
  const std::int64_t B = 3, n = 5, d = 4;
  SoftMoE moe(f64_config(d, n, 1, 3, true), gen);
  const Tensor x = randn({B, 3, d}, gen);
  // All phi columns equal: every score ties, so top-k keeps experts 0 .. k-1.
  {
    const Tensor col = randn({d, 1}, gen);
    std::vector<double> phi;
    for (double v : values(col)) phi.insert(phi.end(), sz(n), v);
    set_values(moe.phi(), from_vector(phi, {d, n}));
    for (std::int64_t k = 1; k <= n; ++k) {
      moe.forward(Variable(x), ExpertSubset::top_k(k));
      const std::vector<std::int32_t> mask = moe.last_mask().to_vector<std::int32_t>();
      std::vector<int> want(sz(k));
      std::iota(want.begin(), want.end(), 0);
      for (std::int64_t b = 0; b < B; ++b) CHECK(kept_ids(mask, b, n) == want);
    }
  }
  // Columns 1 and 3 equal, the rest distinct: at the k that splits the tie, 1 is kept, 3 is not.
  {
    std::vector<double> phi = values(randn({d, n}, gen));
    for (std::int64_t c = 0; c < d; ++c) phi[sz(c * n + 3)] = phi[sz(c * n + 1)];
    set_values(moe.phi(), from_vector(phi, {d, n}));
    const std::vector<double> scores = values(moe.expert_scores(Variable(x)));
    for (std::int64_t b = 0; b < B; ++b) {
      INFO("example ", b);
      const double tied = scores[sz(b * n + 1)];
      REQUIRE(scores[sz(b * n + 3)] == tied);  // bitwise equal
      std::int64_t above = 0;
      for (std::int64_t e = 0; e < n; ++e) above += scores[sz(b * n + e)] > tied;
      moe.forward(Variable(x), ExpertSubset::top_k(above + 1));
      const std::vector<std::int32_t> mask = moe.last_mask().to_vector<std::int32_t>();
      CHECK(mask[sz(b * n + 1)] == 1);
      CHECK(mask[sz(b * n + 3)] == 0);
    }
  }
}

TEST_CASE("Random subsets: k per example, reproducible for a seed, different across seeds") {
  Generator gen(27);
  const std::int64_t B = 8, n = 16, k = 4;
  SoftMoE moe(f64_config(4, n, 1, 3, true), gen);
  const Tensor x = randn({B, 3, 4}, gen);
  auto draw_mask = [&](Generator& g, std::vector<double>* y = nullptr) {
    const Variable out = moe.forward(Variable(x), ExpertSubset::random(k, g));
    if (y) *y = values(out.data());
    return moe.last_mask().to_vector<std::int32_t>();
  };
  Generator a(5), b(5), c(6);
  std::vector<double> ya;
  const std::vector<std::int32_t> ma = draw_mask(a, &ya), mb = draw_mask(b), mc = draw_mask(c);
  CHECK(ma == mb);
  CHECK(ma != mc);
  CHECK(draw_mask(a) != ma);  // the generator advances: the next batch draws new subsets
  std::vector<std::vector<int>> rows;
  for (std::int64_t e = 0; e < B; ++e) {
    rows.push_back(kept_ids(ma, e, n));
    CHECK(rows.back().size() == sz(k));
  }
  CHECK(std::count(rows.begin(), rows.end(), rows.front()) < B);  // drawn per example
  // The output is that of the explicit mask, bitwise.
  CHECK(values(moe.forward(Variable(x), ExpertSubset::from_mask(from_vector(ma, {B, n}))).data()) == ya);
  CHECK(max_error(from_vector(ya, {B, 3, 4}), reference(moe, x, ma).y) <= 1e-12);
}

TEST_CASE("Dropped experts are never computed: a masked expert's NaN weights do not reach the output") {
  Generator gen(28);
  const std::int64_t B = 2, n = 4, p = 2, d = 5, h = 3;
  SoftMoE moe(f64_config(d, n, p, h, true), gen);
  const Tensor x = randn({B, 3, d}, gen);
  // Expert 2's weights become NaN.
  std::vector<double> w_in = values(moe.experts().w_in().data()), w_out = values(moe.experts().w_out().data());
  std::fill(w_in.begin() + 2 * d * h, w_in.begin() + 3 * d * h, std::numeric_limits<double>::quiet_NaN());
  std::fill(w_out.begin() + 2 * h * d, w_out.begin() + 3 * h * d, std::numeric_limits<double>::quiet_NaN());
  set_values(moe.experts().w_in(), from_vector(w_in, {n, d, h}));
  set_values(moe.experts().w_out(), from_vector(w_out, {n, h, d}));
  auto all_finite = [](const std::vector<double>& v, size_t from, size_t to) {
    return std::all_of(v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(to),
                       [](double z) { return std::isfinite(z); });
  };
  const size_t half = sz(3 * d);  // one example's outputs
  // With every expert, the NaNs show (so the checks below could fail).
  const std::vector<double> full_y = values(moe.forward(Variable(x)).data());
  CHECK_FALSE(all_finite(full_y, 0, half));
  // Expert 2 dropped for every example: finite, and the loop with its slot outputs set to 0.
  const std::vector<std::int32_t> keep{1, 1, 0, 1};
  const Variable y = moe.forward(Variable(x), ExpertSubset::from_mask(from_vector(keep, {n})));
  CHECK(moe.last_computed_slots() == B * 3 * p);
  CHECK(all_finite(values(y.data()), 0, 2 * half));
  const std::vector<std::int32_t> keep_all{1, 1, 0, 1, 1, 1, 0, 1};
  CHECK(moe.last_mask().to_vector<std::int32_t>() == keep_all);
  CHECK(max_error(y.data(), reference(moe, x, keep_all).y) <= 1e-12);
  // Gradients of the kept computation are finite too.
  sum(y).backward();
  CHECK(all_finite(values(moe.phi().grad()), 0, sz(moe.phi().numel())));
  moe.zero_grad();
  // Dropped only for example 0: example 0 finite, example 1 (which ran expert 2) not.
  const std::vector<std::int32_t> per_example{1, 1, 0, 1, 1, 1, 1, 1};
  const std::vector<double> y2 = values(moe.forward(Variable(x), ExpertSubset::from_mask(from_vector(per_example, {B, n}))).data());
  CHECK(all_finite(y2, 0, half));
  CHECK_FALSE(all_finite(y2, half, 2 * half));
  const std::vector<double> ref2 = reference(moe, x, per_example).y;
  const auto first = [&](const std::vector<double>& v) {
    return std::vector<double>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(half));
  };
  CHECK(max_error(first(y2), first(ref2)) <= 1e-12);
  // Every expert dropped: the output is 0 and no expert runs.
  const Variable y0 = moe.forward(Variable(x), ExpertSubset::from_mask(zeros({n}, DType::Int32)));
  CHECK(moe.last_computed_slots() == 0);
  CHECK(values(y0.data()) == std::vector<double>(sz(B * 3 * d), 0.0));
}

TEST_CASE("Soft MoE gradcheck in float64: x and every parameter, normalize off / on, both slot inputs, a mask") {
  for (const auto& [normalize, slots] : kVariants)
    for (bool masked : {false, true}) {
      const bool bias = normalize && masked;
      INFO("normalize ", normalize, " raw slots ", slots == SlotInputs::Raw, " masked ", masked, " bias ", bias);
      Generator gen(29);
      const std::int64_t B = 2, n = 3, p = 2;
      SoftMoE moe(f64_config(4, n, p, 5, normalize, bias, slots), gen);
      if (normalize) set_values(moe.scale(), full({1}, 1.3, DType::Float64));
      const Tensor x = randn({B, 3, 4}, gen);
      const ExpertSubset subset = masked ? ExpertSubset::from_mask(from_vector(std::vector<std::int32_t>{1, 0, 1, 0, 1, 1}, {B, n}))
                                         : ExpertSubset::all();
      const GradcheckResult r = gradcheck([&](const V& v) { return moe.forward(v[0], subset); }, {x});
      CHECK_MESSAGE(r.ok, r.report);
      std::int64_t checked = 0;
      const std::string report = check_parameters(moe, [&] { return moe.forward(Variable(x), subset); }, checked);
      CHECK_MESSAGE(report.empty(), report);
      CHECK(checked == moe.num_parameters());
    }
}

TEST_CASE("Soft MoE: bad shapes, k out of range and bad masks throw moelab::Error") {
  Generator gen(30);
  const std::int64_t n = 4;
  SoftMoE moe(f64_config(5, n, 1, 3, true), gen);
  const Variable x(randn({2, 3, 5}, gen));
  check_error([&] { moe.forward(Variable(randn({3, 5}, gen))); }, {"SoftMoE", "x must be [B, m, 5]", "[3, 5]"});
  check_error([&] { moe.forward(Variable(randn({2, 3, 6}, gen))); }, {"SoftMoE", "[2, 3, 6]"});
  check_error([&] { moe.forward(Variable(zeros({2, 3, 5}, DType::Float32))); }, {"SoftMoE", "float32"});
  check_error([&] { moe.forward(x, ExpertSubset::top_k(0)); }, {"SoftMoE", "top-k", "k in [1, 4]", "got 0"});
  check_error([&] { moe.forward(x, ExpertSubset::top_k(5)); }, {"SoftMoE", "got 5"});
  Generator draw(1);
  check_error([&] { moe.forward(x, ExpertSubset::random(0, draw)); }, {"SoftMoE", "random", "got 0"});
  ExpertSubset no_gen;
  no_gen.kind = ExpertSubset::Kind::Random;
  no_gen.k = 2;
  check_error([&] { moe.forward(x, no_gen); }, {"SoftMoE", "Generator"});
  check_error([&] { moe.forward(x, ExpertSubset::from_mask(ones({3, n}, DType::Int32))); },
              {"SoftMoE", "mask", "[2, 4] or [4]", "[3, 4]"});
  check_error([&] { moe.forward(x, ExpertSubset::from_mask(ones({n + 1}, DType::Int32))); }, {"SoftMoE", "[5]"});
  check_error([&] { moe.forward(x, ExpertSubset::from_mask(ones({n}, DType::Float64))); }, {"SoftMoE", "int32"});
  check_error([&] { moe.forward(x, ExpertSubset::from_mask(Tensor())); }, {"SoftMoE", "undefined"});
  check_error([&] { moe.forward(x, ExpertSubset::from_mask(full({n}, 2, DType::Int32))); },
              {"SoftMoE", "0 or 1", "got 2"});
  check_error([&] { SoftMoE bad(f64_config(0, 2, 1, 3, true), gen); }, {"SoftMoE", "d 0"});
  check_error([&] { SoftMoE bad(f64_config(4, 2, 0, 3, true), gen); }, {"SoftMoE", "slots_per_expert 0"});
  SoftMoEConfig int_config = f64_config(4, 2, 1, 3, true);
  int_config.dtype = DType::Int32;
  check_error([&] { SoftMoE bad(int_config, gen); }, {"SoftMoE", "float dtype"});
  check_error([&] { parse_phi_init("gaussian"); }, {"SoftMoE", "gaussian", "uniform or lecun_normal"});
  CHECK(parse_slot_inputs("normalized") == SlotInputs::Normalized);
  CHECK(parse_slot_inputs("raw") == SlotInputs::Raw);
  check_error([&] { parse_slot_inputs("normalised"); }, {"SoftMoE", "normalised", "normalized or raw"});
}
