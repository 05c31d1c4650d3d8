// tests/test_gradcheck.cpp — every differentiable op against central finite differences.
//
// THE TABLE below maps each op name of the registry (autograd/op_list.h) to one or more small
// float64 problems. One test walks differentiable_ops() and fails for any op without a case, and
// for any case whose name is not registered; then it runs every case through gradcheck. The
// unary elementwise ops get their case from the list of core/kernels/elementwise_ops.h. Inputs
// avoid kinks by construction: ReLU/abs/maximum inputs stay >= 0.2 away from the kink, max/top-k
// inputs are distinct and well separated, log/sqrt/pow inputs positive. Every binary op also runs
// on NumPy broadcast pairs where both operands are repeated along some axis and both need
// gradients (each gradient is summed back over its operand's repeated axes).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "core/factories.h"
#include "core/kernels/elementwise_ops.h"

using namespace moelab;

namespace {

struct Case {
  std::string what;             // which form of the op this problem exercises
  std::vector<Tensor> inputs;   // float64, differentiated
  GradcheckFunction f;
};
using Table = std::map<std::string, std::vector<Case>>;
using V = std::vector<Variable>;

// ---------------------------------------------------------------- input makers (float64, CPU)
Tensor randn(const Shape& shape, Generator& gen) { return normal(shape, 0.0, 1.0, gen, DType::Float64); }
Tensor positive(const Shape& shape, Generator& gen) { return uniform(shape, 0.5, 2.0, gen, DType::Float64); }
// Magnitudes in [0.2, 1.5) with random signs: no element near 0.
Tensor away_from_zero(const Shape& shape, Generator& gen) {
  std::vector<double> v = uniform(shape, 0.2, 1.5, gen, DType::Float64).to_vector<double>();
  for (double& x : v)
    if (gen.next_below(2) == 0) x = -x;
  return from_vector(v, shape);
}
// All elements distinct, at least 0.1 apart: a random permutation of 0.1 * (0..n-1), shifted.
Tensor distinct(const Shape& shape, Generator& gen) {
  const auto n = static_cast<std::size_t>(shape.numel());
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 0.1 * static_cast<double>(i) - 0.05 * static_cast<double>(n);
  for (std::size_t i = n; i > 1; --i) std::swap(v[i - 1], v[gen.next_below(static_cast<std::uint32_t>(i))]);
  return from_vector(v, shape);
}
// a = b (broadcast over a's shape) + a random offset of magnitude in [0.2, 1.5): never a tie.
Tensor offset_from(const Tensor& b, const Shape& shape, Generator& gen) {
  std::vector<double> bv = b.to_vector<double>(), off = away_from_zero(shape, gen).to_vector<double>();
  for (std::size_t i = 0; i < off.size(); ++i) off[i] += bv[i % bv.size()];
  return from_vector(off, shape);
}
Tensor ints(const std::vector<std::int32_t>& v, const Shape& shape) { return from_vector(v, shape); }
// Whole numbers in [-3, 3] and numbers half-way between them: any whole minus any half is at
// least 0.5 away from 0, so maximum/minimum of the two never meet a tie, whatever broadcasts.
Tensor whole(const Shape& shape, Generator& gen) {
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  for (double& x : v) x = static_cast<double>(gen.next_below(7)) - 3.0;
  return from_vector(v, shape);
}
Tensor halves(const Shape& shape, Generator& gen) {
  std::vector<double> v = whole(shape, gen).to_vector<double>();
  for (double& x : v) x += 0.5;
  return from_vector(v, shape);
}

// Broadcast shape pairs (a, b) on which every binary op is gradchecked with both inputs differentiated.
struct ShapePair {
  const char* what;
  Shape a, b;
};
const ShapePair kBroadcastPairs[] = {
    {"[3, 1] with [1, 4] (both repeat)", {3, 1}, {1, 4}},
    {"[2, 3] with [2, 1] (a column)", {2, 3}, {2, 1}},
    {"[2, 1, 3] with [4, 3] (middle 1, rank difference)", {2, 1, 3}, {4, 3}},
    {"[] with [2, 3] (0-d on the left)", {}, {2, 3}},
    {"[3] with [2, 2, 1] (b wider and longer)", {3}, {2, 2, 1}},
};

// ---------------------------------------------------------------- THE TABLE
Table build_table() {
  Generator gen(2024);
  Table t;
  const double inf = std::numeric_limits<double>::infinity();

  // ---- elementwise binary: same shape, bias [d] on [N, d], scalar tensor [], [T, d] on [B, T, d], doubles
  auto binary_forms = [&](const std::string& name, std::function<Variable(const Variable&, const Variable&)> op,
                          std::function<Variable(const Variable&, double)> op_vd,
                          std::function<Variable(double, const Variable&)> op_dv, bool b_nonzero) {
    auto b_of = [&](const Shape& s) { return b_nonzero ? away_from_zero(s, gen) : randn(s, gen); };
    auto f = [op](const V& v) { return op(v[0], v[1]); };
    t[name].push_back({"same shape", {randn({3, 4}, gen), b_of({3, 4})}, f});
    t[name].push_back({"bias [4] on [3, 4]", {randn({3, 4}, gen), b_of({4})}, f});
    t[name].push_back({"scalar tensor [] on [2, 3]", {randn({2, 3}, gen), b_of({})}, f});
    t[name].push_back({"[3, 2] on [2, 3, 2]", {randn({2, 3, 2}, gen), b_of({3, 2})}, f});
    t[name].push_back({"Variable op 1.7", {b_of({2, 3})}, [op_vd](const V& v) { return op_vd(v[0], 1.7); }});
    t[name].push_back({"-0.8 op Variable", {b_of({2, 3})}, [op_dv](const V& v) { return op_dv(-0.8, v[0]); }});
    for (const ShapePair& p : kBroadcastPairs) t[name].push_back({p.what, {randn(p.a, gen), b_of(p.b)}, f});
  };
  binary_forms("add", [](auto& a, auto& b) { return a + b; }, [](auto& a, double b) { return a + b; },
               [](double a, auto& b) { return a + b; }, false);
  binary_forms("sub", [](auto& a, auto& b) { return a - b; }, [](auto& a, double b) { return a - b; },
               [](double a, auto& b) { return a - b; }, false);
  binary_forms("mul", [](auto& a, auto& b) { return a * b; }, [](auto& a, double b) { return a * b; },
               [](double a, auto& b) { return a * b; }, false);
  binary_forms("div", [](auto& a, auto& b) { return a / b; }, [](auto& a, double b) { return a / b; },
               [](double a, auto& b) { return a / b; }, true);
  t["add"].push_back({"named add(a, b), a used twice", {randn({2, 2}, gen)}, [](const V& v) { return add(v[0], v[0]); }});

  for (const std::string name : {"maximum", "minimum"}) {
    auto op = name == "maximum" ? [](const Variable& a, const Variable& b) { return maximum(a, b); }
                                : [](const Variable& a, const Variable& b) { return minimum(a, b); };
    auto f = [op](const V& v) { return op(v[0], v[1]); };
    Tensor b = randn({3, 4}, gen), bias = randn({4}, gen), scalar = randn({}, gen);
    t[name].push_back({"same shape", {offset_from(b, {3, 4}, gen), b}, f});
    t[name].push_back({"bias [4] on [3, 4]", {offset_from(bias, {3, 4}, gen), bias}, f});
    t[name].push_back({"scalar tensor", {offset_from(scalar, {2, 3}, gen), scalar}, f});
    for (const ShapePair& p : kBroadcastPairs) t[name].push_back({p.what, {whole(p.a, gen), halves(p.b, gen)}, f});
  }

  t["pow"].push_back({"x^3", {randn({2, 3}, gen)}, [](const V& v) { return pow(v[0], 3.0); }});
  t["pow"].push_back({"x^0.5, x > 0", {positive({2, 3}, gen)}, [](const V& v) { return pow(v[0], 0.5); }});
  t["pow"].push_back({"x^-1.5, x > 0", {positive({4}, gen)}, [](const V& v) { return pow(v[0], -1.5); }});
  auto pow_ab = [](const V& v) { return pow(v[0], v[1]); };
  t["pow"].push_back({"a^b, same shape, a > 0", {positive({2, 3}, gen), randn({2, 3}, gen)}, pow_ab});
  for (const ShapePair& p : kBroadcastPairs)
    t["pow"].push_back({std::string("a^b, ") + p.what, {positive(p.a, gen), randn(p.b, gen)}, pow_ab});

  // ---- elementwise unary: every op of the list (core/kernels/elementwise_ops.h), on its domain
  auto from_domain = [&](kernels::OpDomain domain, const Shape& shape) {
    switch (domain) {
      case kernels::OpDomain::Real: return randn(shape, gen);
      case kernels::OpDomain::Positive: return positive(shape, gen);
      case kernels::OpDomain::NonZero: return away_from_zero(shape, gen);  // also keeps relu, abs off their kink
    }
    FAIL("unknown domain");
    return Tensor();
  };
#define MOELAB_UNARY_GRADCHECK(Op, name, domain)                  \
  t[#name].push_back({"[2, 3]", {from_domain(kernels::OpDomain::domain, {2, 3})}, \
                      [](const V& v) { return moelab::name(v[0]); }});
  MOELAB_UNARY_OPS(MOELAB_UNARY_GRADCHECK)
#undef MOELAB_UNARY_GRADCHECK
  t["neg"].push_back({"unary minus operator", {randn({3}, gen)}, [](const V& v) { return -v[0]; }});

  // ---- matmul: every transpose combination, 2-d and batched
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const std::string flags = std::string(ta ? "A^T" : "A") + " @ " + (tb ? "B^T" : "B");
      auto f = [ta, tb](const V& v) { return matmul(v[0], v[1], ta != 0, tb != 0); };
      Shape a2 = ta ? Shape{4, 3} : Shape{3, 4}, b2 = tb ? Shape{5, 4} : Shape{4, 5};
      Shape a3 = ta ? Shape{2, 4, 3} : Shape{2, 3, 4}, b3 = tb ? Shape{2, 5, 4} : Shape{2, 4, 5};
      t["matmul"].push_back({"2-d " + flags, {randn(a2, gen), randn(b2, gen)}, f});
      t["matmul"].push_back({"batched " + flags, {randn(a3, gen), randn(b3, gen)}, f});
    }

  // ---- grouped_matmul: x [6, 3] in groups of 2, 0 (empty), 3, 1 rows; w [4, 3, 2] (or [4, 2, 3])
  Tensor group_offsets = ints({0, 2, 2, 5, 6}, {5});
  for (int tw = 0; tw < 2; ++tw) {
    auto f = [group_offsets, tw](const V& v) { return grouped_matmul(v[0], v[1], group_offsets, tw != 0); };
    t["grouped_matmul"].push_back({std::string("4 groups, one empty, ") + (tw ? "w^T" : "w"),
                                   {randn({6, 3}, gen), randn(tw ? Shape{4, 2, 3} : Shape{4, 3, 2}, gen)}, f});
  }
  Tensor one_group = ints({0, 3}, {2});
  t["grouped_matmul"].push_back({"one group", {randn({3, 2}, gen), randn({1, 2, 4}, gen)},
                                 [one_group](const V& v) { return grouped_matmul(v[0], v[1], one_group); }});

  // ---- reductions
  t["sum"].push_back({"all", {randn({2, 3}, gen)}, [](const V& v) { return sum(v[0]); }});
  t["sum"].push_back({"axis 0", {randn({3, 4}, gen)}, [](const V& v) { return sum(v[0], 0); }});
  t["sum"].push_back({"middle axis keepdim", {randn({2, 3, 4}, gen)}, [](const V& v) { return sum(v[0], 1, true); }});
  t["sum"].push_back({"axis -1", {randn({2, 3, 4}, gen)}, [](const V& v) { return sum(v[0], -1); }});
  t["mean"].push_back({"all", {randn({2, 3}, gen)}, [](const V& v) { return mean(v[0]); }});
  t["mean"].push_back({"axis 0 keepdim", {randn({3, 4}, gen)}, [](const V& v) { return mean(v[0], 0, true); }});
  t["mean"].push_back({"middle axis", {randn({2, 3, 4}, gen)}, [](const V& v) { return mean(v[0], 1); }});
  t["mean"].push_back({"axis -1 keepdim", {randn({2, 3, 4}, gen)}, [](const V& v) { return mean(v[0], -1, true); }});
  t["max"].push_back({"all", {distinct({3, 4}, gen)}, [](const V& v) { return max(v[0]); }});
  t["max"].push_back({"axis 0", {distinct({3, 4}, gen)}, [](const V& v) { return max(v[0], 0); }});
  t["max"].push_back({"middle axis keepdim", {distinct({2, 3, 4}, gen)}, [](const V& v) { return max(v[0], 1, true); }});
  t["max"].push_back({"axis -1", {distinct({2, 3, 4}, gen)}, [](const V& v) { return max(v[0], -1); }});

  // ---- softmax
  for (const std::string name : {"softmax", "log_softmax"}) {
    const auto op = [name](const Variable& x) { return name == "softmax" ? softmax(x) : log_softmax(x); };
    t[name].push_back({"[3, 5]", {randn({3, 5}, gen)}, [op](const V& v) { return op(v[0]); }});
    t[name].push_back({"[2, 3, 4]", {randn({2, 3, 4}, gen)}, [op](const V& v) { return op(v[0]); }});
  }
  // Over another axis: columns of 3 at stride 4 ([2, 3, 4], Soft MoE's dispatch), and the first.
  t["softmax"].push_back({"middle axis", {randn({2, 3, 4}, gen)}, [](const V& v) { return softmax(v[0], 1); }});
  t["softmax"].push_back({"axis 0 of [4, 3]", {randn({4, 3}, gen)}, [](const V& v) { return softmax(v[0], 0); }});

  // ---- losses
  Tensor targets = ints({2, -100, 0, 3, -100}, {5});
  t["cross_entropy"].push_back({"some targets ignored (-100)", {randn({5, 4}, gen)},
                                [targets](const V& v) { return cross_entropy(v[0], targets); }});
  Tensor targets7 = ints({1, 7, 7, 0}, {4});
  t["cross_entropy"].push_back({"ignore_index 7, after a matmul", {randn({4, 3}, gen), randn({3, 6}, gen)},
                                [targets7](const V& v) { return cross_entropy(matmul(v[0], v[1]), targets7, 7); }});
  Tensor all_ignored = ints({-100, -100}, {2});
  t["cross_entropy"].push_back({"every target ignored (loss 0)", {randn({2, 3}, gen)},
                                [all_ignored](const V& v) { return cross_entropy(v[0], all_ignored); }});
  t["mse_loss"].push_back({"pred and target", {randn({3, 4}, gen), randn({3, 4}, gen)},
                           [](const V& v) { return mse_loss(v[0], v[1]); }});

  // ---- gathering and scattering (indices repeat, so gradients must add)
  Tensor rows = ints({0, 2, 2, 4}, {4});
  t["index_select"].push_back({"[5, 3] rows with repeats", {randn({5, 3}, gen)},
                               [rows](const V& v) { return index_select(v[0], rows); }});
  t["index_select"].push_back({"[5, 2, 2]", {randn({5, 2, 2}, gen)}, [rows](const V& v) { return index_select(v[0], rows); }});
  Tensor dest = ints({1, 0, 1, 3}, {4});
  t["scatter_add_rows"].push_back({"[4, 3] into 5 rows", {randn({4, 3}, gen)},
                                   [dest](const V& v) { return scatter_add_rows(v[0], dest, 5); }});
  t["scatter_add_rows_scaled"].push_back({"[4, 3] times [4] into 5 rows", {randn({4, 3}, gen), randn({4}, gen)},
                                          [dest](const V& v) { return scatter_add_rows_scaled(v[0], v[1], dest, 5); }});
  t["scatter_add_rows_scaled"].push_back(
      {"[4, 2, 3] times [4] into 4 rows", {randn({4, 2, 3}, gen), randn({4}, gen)},
       [dest](const V& v) { return scatter_add_rows_scaled(v[0], v[1], dest, 4); }});
  Tensor cols = ints({4, 0, 1, 1, 3, 3}, {3, 2});
  t["gather_last"].push_back({"[3, 5] -> [3, 2]", {randn({3, 5}, gen)}, [cols](const V& v) { return gather_last(v[0], cols); }});
  Tensor cols3 = ints({0, 2, 1, 1, 2, 0, 0, 0}, {2, 2, 2});
  t["gather_last"].push_back({"[2, 2, 3] -> [2, 2, 2]", {randn({2, 2, 3}, gen)},
                              [cols3](const V& v) { return gather_last(v[0], cols3); }});
  t["scatter_add_last"].push_back({"[3, 2] -> [3, 5]", {randn({3, 2}, gen)},
                                   [cols](const V& v) { return scatter_add_last(v[0], cols, 5); }});
  Tensor ids = ints({5, 0, 2, 2, 1, 5}, {2, 3});
  t["embedding"].push_back({"[6, 3] by ids [2, 3]", {randn({6, 3}, gen)}, [ids](const V& v) { return embedding(v[0], ids); }});
  t["topk"].push_back({"[3, 6], k = 2", {distinct({3, 6}, gen)}, [](const V& v) { return topk(v[0], 2).values; }});
  t["topk"].push_back({"[2, 2, 5], k = 3", {distinct({2, 2, 5}, gen)}, [](const V& v) { return topk(v[0], 3).values; }});

  // ---- shapes
  t["concat"].push_back({"middle axis of 3-d", {randn({2, 1, 3}, gen), randn({2, 2, 3}, gen), randn({2, 3, 3}, gen)},
                         [](const V& v) { return concat(v, 1); }});
  t["concat"].push_back({"axis 0", {randn({1, 3}, gen), randn({2, 3}, gen)}, [](const V& v) { return concat(v, 0); }});
  t["concat"].push_back({"axis -1", {randn({2, 2}, gen), randn({2, 3}, gen)}, [](const V& v) { return concat(v, -1); }});
  t["split"].push_back({"middle axis, pieces reordered", {randn({2, 6, 3}, gen)}, [](const V& v) {
                          std::vector<Variable> p = split(v[0], {1, 2, 3}, 1);
                          return concat({square(p[1]), p[0], tanh(p[2])}, 1);
                        }});
  t["split"].push_back({"last axis, one piece unused", {randn({3, 5}, gen)}, [](const V& v) {
                          return split(v[0], {2, 3}, -1)[1];
                        }});
  t["narrow"].push_back({"middle axis", {randn({2, 5, 3}, gen)}, [](const V& v) { return narrow(v[0], 1, 1, 2); }});
  t["narrow"].push_back({"last axis from 0", {randn({3, 4}, gen)}, [](const V& v) { return narrow(v[0], -1, 0, 3); }});
  t["reshape"].push_back({"[2, 6] -> [3, -1]", {randn({2, 6}, gen)}, [](const V& v) { return reshape(v[0], {3, -1}); }});
  t["transpose"].push_back({"last two of 3-d", {randn({2, 3, 4}, gen)}, [](const V& v) { return transpose(v[0]); }});
  t["transpose"].push_back({"axes 0 and 2", {randn({2, 3, 4}, gen)}, [](const V& v) { return transpose(v[0], 0, 2); }});
  t["permute"].push_back({"3-d {2, 0, 1}", {randn({2, 3, 4}, gen)}, [](const V& v) { return permute(v[0], {2, 0, 1}); }});
  t["permute"].push_back({"3-d {1, 2, 0}", {randn({2, 3, 4}, gen)}, [](const V& v) { return permute(v[0], {1, 2, 0}); }});

  // ---- masking: -inf then softmax, so masked entries get exactly zero gradient
  t["causal_mask"].push_back({"[4, 4], -inf fill, then softmax", {randn({4, 4}, gen)},
                              [inf](const V& v) { return softmax(causal_mask(v[0], -inf)); }});
  t["causal_mask"].push_back({"[2, 3, 5] (T < S), -inf, then softmax", {randn({2, 3, 5}, gen)},
                              [inf](const V& v) { return softmax(causal_mask(v[0], -inf)); }});
  t["causal_mask"].push_back({"[3, 3], fill 0", {randn({3, 3}, gen)}, [](const V& v) { return causal_mask(v[0], 0.0); }});

  // ---- fused causal attention: q [B, T, H, hd], k, v [B, S, H, hd]; T == S, S > T, and T past one
  // block of query rows (24, core/cpu/attention.cpp)
  t["causal_attention"].push_back({"[2, 4, 2, 3], T == S, scale 0.5",
                                   {randn({2, 4, 2, 3}, gen), randn({2, 4, 2, 3}, gen), randn({2, 4, 2, 3}, gen)},
                                   [](const V& v) { return causal_attention(v[0], v[1], v[2], 0.5); }});
  t["causal_attention"].push_back({"[1, 3, 1, 2] with S = 5",
                                   {randn({1, 3, 1, 2}, gen), randn({1, 5, 1, 2}, gen), randn({1, 5, 1, 2}, gen)},
                                   [](const V& v) { return causal_attention(v[0], v[1], v[2], 1.0); }});
  t["causal_attention"].push_back({"[1, 26, 2, 2] with S = 29, several blocks",
                                   {randn({1, 26, 2, 2}, gen), randn({1, 29, 2, 2}, gen), randn({1, 29, 2, 2}, gen)},
                                   [](const V& v) { return causal_attention(v[0], v[1], v[2], 0.7); }});
  t["bidirectional_attention"].push_back({"[2, 4, 2, 3], T == S, scale 0.5",
                                          {randn({2, 4, 2, 3}, gen), randn({2, 4, 2, 3}, gen), randn({2, 4, 2, 3}, gen)},
                                          [](const V& v) { return bidirectional_attention(v[0], v[1], v[2], 0.5); }});
  t["bidirectional_attention"].push_back({"[1, 26, 2, 2] with S = 3 < T, several blocks",
                                          {randn({1, 26, 2, 2}, gen), randn({1, 3, 2, 2}, gen), randn({1, 3, 2, 2}, gen)},
                                          [](const V& v) { return bidirectional_attention(v[0], v[1], v[2], 0.7); }});

  // ---- norms, with their weights (and bias)
  t["rmsnorm"].push_back({"[4, 5], w [5]", {randn({4, 5}, gen), randn({5}, gen)},
                          [](const V& v) { return rmsnorm(v[0], v[1], 1e-5); }});
  t["rmsnorm"].push_back({"[2, 3, 4], w [4]", {randn({2, 3, 4}, gen), randn({4}, gen)},
                          [](const V& v) { return rmsnorm(v[0], v[1], 1e-3); }});
  t["layernorm"].push_back({"[4, 5], w, b [5]", {randn({4, 5}, gen), randn({5}, gen), randn({5}, gen)},
                            [](const V& v) { return layernorm(v[0], v[1], v[2], 1e-5); }});
  t["layernorm"].push_back({"[2, 3, 4], w, b [4]", {randn({2, 3, 4}, gen), randn({4}, gen), randn({4}, gen)},
                            [](const V& v) { return layernorm(v[0], v[1], v[2], 1e-3); }});

  // ---- rotary position embedding: x [B, T, H, hd], offset positions, both directions
  t["rope"].push_back({"[2, 3, 2, 4], offset 0", {randn({2, 3, 2, 4}, gen)}, [](const V& v) { return rope(v[0]); }});
  t["rope"].push_back({"[1, 4, 3, 6], offset 5, theta 100, inverse", {randn({1, 4, 3, 6}, gen)},
                       [](const V& v) { return rope(v[0], 5, 100.0, true); }});

  // ---- Soft MoE token-order mixing: w [B, m, n, p] with u [B, m, f, n] or v [B, f, n, p]
  t["slot_mix_reduce"].push_back({"w [2, 3, 4, 1], u [2, 3, 5, 4]", {randn({2, 3, 4, 1}, gen), randn({2, 3, 5, 4}, gen)},
                                  [](const V& v) { return slot_mix_reduce(v[0], v[1]); }});
  t["slot_mix_reduce"].push_back({"w [2, 3, 2, 3], u [2, 3, 4, 2] (p = 3)",
                                  {randn({2, 3, 2, 3}, gen), randn({2, 3, 4, 2}, gen)},
                                  [](const V& v) { return slot_mix_reduce(v[0], v[1]); }});
  t["slot_mix_expand"].push_back({"w [2, 3, 4, 1], v [2, 5, 4, 1]", {randn({2, 3, 4, 1}, gen), randn({2, 5, 4, 1}, gen)},
                                  [](const V& v) { return slot_mix_expand(v[0], v[1]); }});
  t["slot_mix_expand"].push_back({"w [2, 3, 2, 3], v [2, 4, 2, 3] (p = 3)",
                                  {randn({2, 3, 2, 3}, gen), randn({2, 4, 2, 3}, gen)},
                                  [](const V& v) { return slot_mix_expand(v[0], v[1]); }});
  // slot order: w [B, m, S] with x [B, m, d] or y [S, B, d]; d = 11 exercises dot's 8 lanes and tail
  t["slot_dispatch"].push_back({"w [2, 3, 4], x [2, 3, 11]", {randn({2, 3, 4}, gen), randn({2, 3, 11}, gen)},
                                [](const V& v) { return slot_dispatch(v[0], v[1]); }});
  t["slot_combine"].push_back({"w [2, 3, 4], y [4, 2, 11]", {randn({2, 3, 4}, gen), randn({4, 2, 11}, gen)},
                               [](const V& v) { return slot_combine(v[0], v[1]); }});
  return t;
}

}  // namespace

TEST_CASE("every registered differentiable op passes gradcheck; the table covers exactly the registry") {
  const Table table = build_table();
  for (const std::string& op : differentiable_ops()) {
    INFO("op: ", op);
    const auto found = table.find(op);
    CHECK_MESSAGE(found != table.end(), "the registered op '", op, "' has no gradcheck case in tests/test_gradcheck.cpp");
  }
  for (const auto& [name, cases] : table) {
    CHECK_MESSAGE(is_differentiable_op(name), "the table has a case for '", name, "', which is not a registered op");
    CHECK_MESSAGE(!cases.empty(), "no cases for '", name, "'");
    for (const Case& c : cases) {
      INFO(name, " (", c.what, ")");
      const GradcheckResult result = gradcheck(c.f, c.inputs);
      CHECK_MESSAGE(result.ok, name, " (", c.what, "): ", result.report);
    }
  }
}

TEST_CASE("masked entries of causal_mask then softmax get exactly zero gradient") {
  Generator gen(5);
  Variable x(randn({3, 3}, gen), true);
  softmax(causal_mask(x, -std::numeric_limits<double>::infinity())).backward(randn({3, 3}, gen));
  const std::vector<double> g = x.grad().to_vector<double>();
  for (int row = 0; row < 3; ++row)
    for (int col = row + 1; col < 3; ++col) CHECK(g[static_cast<std::size_t>(row * 3 + col)] == 0.0);
}

TEST_CASE("gradcheck catches a wrong gradient") {
  Generator gen(11);
  const Tensor x = away_from_zero({2, 3}, gen);
  // x * detach(x): the analytic gradient misses the detached term (x instead of 2x).
  const GradcheckResult wrong = gradcheck([](const V& v) { return v[0] * v[0].detach(); }, {x});
  CHECK_FALSE(wrong.ok);
  CHECK(wrong.max_abs_error > 0.1);
  CHECK(wrong.report.find("FAILED") != std::string::npos);
  CHECK(wrong.report.find("input 0") != std::string::npos);
  // The same function without detach passes.
  const GradcheckResult right = gradcheck([](const V& v) { return v[0] * v[0]; }, {x});
  CHECK_MESSAGE(right.ok, right.report);
  CHECK(right.max_abs_error < 1e-6);
  // A function whose gradient is missing entirely for one input fails too.
  const Tensor y = randn({2, 3}, gen);
  const GradcheckResult missing =
      gradcheck([](const V& v) { return v[0] + v[1].detach() * 3.0; }, {x, y});
  CHECK_FALSE(missing.ok);
  CHECK(missing.report.find("input 1") != std::string::npos);
}

TEST_CASE("gradcheck accepts only float64 CPU inputs") {
  const Tensor x32 = ones({2});
  CHECK_THROWS_WITH_AS(gradcheck([](const V& v) { return v[0]; }, {x32}), doctest::Contains("gradcheck"), Error);
}

TEST_CASE("gelu: PyTorch's exact GELU values and a float64 gradcheck through its erf") {
  // torch.nn.functional.gelu (approximate='none') at -3, -1, 0, 0.5, 1, 3.
  const Variable x(from_vector(std::vector<double>{-3, -1, 0, 0.5, 1, 3}, {6}));
  const std::vector<double> want = {-0.00404969409489031, -0.15865525393145702, 0.0, 0.34573123063700656,
                                    0.841344746068543, 2.99595030590511};
  const std::vector<double> got = gelu(x).data().to_vector<double>();
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-15);
  Generator gen(8);
  const GradcheckResult r =
      gradcheck([](const std::vector<Variable>& v) { return gelu(v[0]); }, {normal({3, 5}, 0.0, 2.0, gen, DType::Float64)});
  CHECK_MESSAGE(r.ok, r.report);
}
