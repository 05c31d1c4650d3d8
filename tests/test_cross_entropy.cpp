// tests/test_cross_entropy.cpp — the fused cross-entropy loss and its backward.
//
// Compared with a naive double-precision reference, with rows ignored by ignore_index (the
// default -100 and a custom one that is a valid class), large logits, no kept row at all; the
// backward against the analytic formula and central finite differences of the loss in float64.
#include <doctest/doctest.h>

#include <cmath>
#include <tuple>

#include "core/cpu/thread_count.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/parallel.h"
#include "tests/test_util.h"

using namespace moelab;
using moelab::testing::max_error;
using moelab::testing::to_doubles;

namespace {

struct Reference {
  double loss = 0;
  std::vector<double> lse;
  std::int64_t kept = 0;
  std::vector<double> dlogits;  // for dloss
};

Reference reference(const std::vector<double>& x, const std::vector<std::int32_t>& t, std::int64_t vocab,
                    int ignore_index, double dloss) {
  Reference ref;
  const std::size_t rows = t.size(), v = static_cast<std::size_t>(vocab);
  for (std::size_t r = 0; r < rows; ++r) {
    double m = x[r * v], s = 0;
    for (std::size_t j = 0; j < v; ++j) m = std::max(m, x[r * v + j]);
    for (std::size_t j = 0; j < v; ++j) s += std::exp(x[r * v + j] - m);
    ref.lse.push_back(m + std::log(s));
    if (t[r] != ignore_index) {
      ref.loss += ref.lse[r] - x[r * v + static_cast<std::size_t>(t[r])];
      ++ref.kept;
    }
  }
  if (ref.kept > 0) ref.loss /= static_cast<double>(ref.kept);
  ref.dlogits.assign(x.size(), 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    if (t[r] == ignore_index) continue;
    for (std::size_t j = 0; j < v; ++j)
      ref.dlogits[r * v + j] = (std::exp(x[r * v + j] - ref.lse[r]) - (static_cast<std::int32_t>(j) == t[r] ? 1.0 : 0.0)) *
                               dloss / static_cast<double>(ref.kept);
  }
  return ref;
}

// Random targets in [0, vocab), with about one row in four set to `ignore_index`.
std::vector<std::int32_t> random_targets(std::int64_t rows, std::int64_t vocab, int ignore_index, Generator& gen) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(rows));
  for (std::int32_t& e : t)
    e = gen.next_below(4) == 0 ? ignore_index : static_cast<std::int32_t>(gen.next_below(static_cast<std::uint32_t>(vocab)));
  return t;
}

}  // namespace

TEST_CASE("cross_entropy and its backward match the reference, with ignored rows") {
  Generator gen(31);
  struct Case {
    std::int64_t rows, vocab;
    int ignore_index;
    double scale;  // logit magnitude
  };
  const Case cases[] = {
      {13, 11, -100, 2.0},   // default ignore_index
      {9, 5, 3, 2.0},        // ignore_index that is also a valid class
      {6, 7, -100, 1000.0},  // large logits: stability
      {80, 1000, -100, 3.0}, // 2.4 grains (core/cpu/thread_count.h): rows split over 4 threads
  };
  // With 4 threads set, the last case runs its rows in parallel, forward and backward. The first
  // 64 x 1000 fell below two grains, so it ran on one thread and tested no parallel path.
  testing::ScopedThreads four(4);
  REQUIRE(cpu::element_threads(80 * 1000) > 1);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Case& c : cases) {
      Tensor logits = normal({c.rows, c.vocab}, 0, c.scale, gen, dtype);
      std::vector<std::int32_t> t = random_targets(c.rows, c.vocab, c.ignore_index, gen);
      t[0] = 0;  // at least one kept row
      Tensor targets = from_vector(t, {c.rows});
      const double dloss = 1.7;
      Reference ref = reference(to_doubles(logits), t, c.vocab, c.ignore_index, dloss);
      kernels::CrossEntropyResult out = kernels::cross_entropy(logits, targets, c.ignore_index);
      INFO(dtype, " rows ", c.rows, " vocab ", c.vocab, " ignore_index ", c.ignore_index, " scale ", c.scale);
      const double tol = dtype == DType::Float32 ? 1e-6 : 1e-13;
      CHECK(out.kept_count() == ref.kept);
      CHECK(out.loss.shape() == Shape{});
      CHECK(out.loss.dtype() == dtype);
      CHECK(out.logsumexp.shape() == Shape{c.rows});
      CHECK(max_error(to_doubles(out.loss), {ref.loss}) <= tol);
      CHECK(max_error(to_doubles(out.logsumexp), ref.lse) <= tol);
      Tensor d =
          kernels::cross_entropy_backward(logits, targets, out.logsumexp, dloss, out.kept_count(), c.ignore_index);
      CHECK(d.shape() == logits.shape());
      // float32 keeps logsumexp in float32: exp(x - lse) inherits its rounding, |lse| * 6e-8.
      const double dtol = dtype == DType::Float32 ? 1e-6 * (1 + c.scale) : 1e-12;
      CHECK(max_error(to_doubles(d), ref.dlogits) <= dtol);
      // Ignored rows get exactly zero gradient.
      std::vector<double> dv = to_doubles(d);
      for (std::size_t r = 0; r < t.size(); ++r)
        if (t[r] == c.ignore_index)
          for (std::int64_t j = 0; j < c.vocab; ++j) CHECK(dv[r * static_cast<std::size_t>(c.vocab) + static_cast<std::size_t>(j)] == 0.0);
    }
  }
}

TEST_CASE("the backward matches finite differences of the loss (float64)") {
  Generator gen(32);
  const std::int64_t rows = 5, vocab = 4;
  Tensor logits = normal({rows, vocab}, 0, 1.5, gen, DType::Float64);
  Tensor targets = from_vector(std::vector<std::int32_t>{2, -100, 0, 3, 3}, {rows});
  kernels::CrossEntropyResult out = kernels::cross_entropy(logits, targets);
  CHECK(out.kept_count() == 4);
  const double dloss = 0.8;
  std::vector<double> analytic =
      kernels::cross_entropy_backward(logits, targets, out.logsumexp, dloss, out.kept_count()).to_vector<double>();
  const double h = 1e-6;
  for (std::size_t i = 0; i < analytic.size(); ++i) {
    Tensor plus = logits.clone(), minus = logits.clone();
    plus.data<double>()[i] += h;
    minus.data<double>()[i] -= h;
    const double numeric = dloss * (kernels::cross_entropy(plus, targets).loss.item<double>() -
                                    kernels::cross_entropy(minus, targets).loss.item<double>()) / (2 * h);
    CHECK(analytic[i] == doctest::Approx(numeric).epsilon(1e-7).scale(1.0));
  }
}

TEST_CASE("no kept row: loss 0 and zero gradient; no row at all: loss 0") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor logits = ones({3, 4}, dtype);
    Tensor targets = full({3}, -100, DType::Int32);
    kernels::CrossEntropyResult out = kernels::cross_entropy(logits, targets);
    CHECK(out.kept_count() == 0);
    CHECK(to_doubles(out.loss)[0] == 0.0);
    CHECK(to_doubles(out.logsumexp)[1] == doctest::Approx(1.0 + std::log(4.0)));
    Tensor d = kernels::cross_entropy_backward(logits, targets, out.logsumexp, 1.0, 0);
    for (double v : to_doubles(d)) CHECK(v == 0.0);
    kernels::CrossEntropyResult none = kernels::cross_entropy(zeros({0, 4}, dtype), zeros({0}, DType::Int32));
    CHECK(none.kept_count() == 0);
    CHECK(to_doubles(none.loss)[0] == 0.0);
    CHECK(none.logsumexp.shape() == Shape{0});
  }
}

TEST_CASE("cross_entropy and its backward do not depend on the thread count") {
  Generator gen(33);
  // 128 x 700 elements, 2.7 grains: 2 threads with 3 set, one with 1. Loss, logsumexp and gradient.
  Tensor logits = normal({128, 700}, 0, 2, gen);
  Tensor targets = from_vector(random_targets(128, 700, -100, gen), {128});
  auto run = [&] {
    kernels::CrossEntropyResult out = kernels::cross_entropy(logits, targets);
    Tensor d = kernels::cross_entropy_backward(logits, targets, out.logsumexp, 1.3, out.kept_count());
    return std::make_tuple(out.loss.item<float>(), out.logsumexp.to_vector<float>(), d.to_vector<float>());
  };
  testing::ScopedThreads one(1);
  REQUIRE(cpu::element_threads(logits.numel()) == 1);
  const auto [loss1, lse1, d1] = run();
  set_num_threads(3);
  REQUIRE(cpu::element_threads(logits.numel()) > 1);
  const auto [loss3, lse3, d3] = run();
  CHECK(loss1 == loss3);
  CHECK(lse1 == lse3);
  CHECK(d1 == d3);
}

TEST_CASE("cross_entropy rejects bad arguments, naming the op") {
  Tensor logits = zeros({3, 5});
  Tensor targets = from_vector(std::vector<std::int32_t>{0, 4, -100}, {3});
  CHECK_NOTHROW(kernels::cross_entropy(logits, targets));
  const char* ce = "cross_entropy";
  // Targets out of range (and not ignore_index).
  CHECK_THROWS_WITH_AS(kernels::cross_entropy(logits, from_vector(std::vector<std::int32_t>{0, 5, 1}, {3})),
                       doctest::Contains("targets[1] = 5"), Error);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy(logits, from_vector(std::vector<std::int32_t>{0, -1, 1}, {3})),
                       doctest::Contains(ce), Error);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy(logits, targets, -1), doctest::Contains(ce), Error);  // -100 now out
  // dtypes, ranks and shapes.
  CHECK_THROWS_WITH_AS(kernels::cross_entropy(zeros({3, 5}, DType::Int32), targets), doctest::Contains(ce), Error);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy(logits, zeros({3})), doctest::Contains(ce), Error);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy(zeros({3, 5, 1}), targets), doctest::Contains(ce), Error);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy(zeros({4, 5}), targets), doctest::Contains("[4, 5]"), Error);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy(logits, targets.reshape({3, 1})), doctest::Contains(ce), Error);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy(zeros({3, 0}), full({3}, -100, DType::Int32)), doctest::Contains(ce),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy(Tensor(), targets), doctest::Contains(ce), Error);
  // The backward checks the same, plus logsumexp and kept.
  kernels::CrossEntropyResult out = kernels::cross_entropy(logits, targets);
  const char* ceb = "cross_entropy_backward";
  CHECK_THROWS_WITH_AS(kernels::cross_entropy_backward(logits, targets, out.logsumexp, 1.0, 3), doctest::Contains(ceb),
                       Error);  // kept is 2
  CHECK_THROWS_WITH_AS(kernels::cross_entropy_backward(logits, targets, zeros({4}), 1.0, 2), doctest::Contains(ceb),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy_backward(logits, targets, zeros({3}, DType::Float64), 1.0, 2),
                       doctest::Contains(ceb), Error);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy_backward(logits, from_vector(std::vector<std::int32_t>{0, 9, 1}, {3}),
                                                       out.logsumexp, 1.0, 3),
                       doctest::Contains(ceb), Error);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy_backward(logits, zeros({3}), out.logsumexp, 1.0, 2),
                       doctest::Contains(ceb), Error);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy_backward(logits, targets, Tensor(), 1.0, 2), doctest::Contains(ceb),
                       Error);
}
