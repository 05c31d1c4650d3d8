// tests/test_grouped_matmul.cpp — the grouped matrix product (MoE experts) against a loop of
// per-group kernels::matmul calls, its weight gradient against a loop, and its argument checks.
//
// Reference: for every group e with rows r0 .. r1-1, out[r0:r1] = matmul(x[r0:r1], w[e], false,
// trans_w) and dw[e] = matmul(x[r0:r1], dy[r0:r1], true, false) (zeros when the group is empty).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/factories.h"
#include "core/cpu/thread_count.h"
#include "core/kernels.h"
#include "core/parallel.h"

using namespace moelab;

namespace {

Tensor offsets_of(const std::vector<std::int32_t>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())});
}

// w[e] as a 2-d matrix: [in, out] (or [out, in] when stored transposed).
Tensor weight(const Tensor& w, std::int64_t e) { return w.slice(e, 1).reshape({w.size(1), w.size(2)}); }

// x: [N, in], w: [E, in, out] / [E, out, in] -> [N, out] through one kernels::matmul per group.
std::vector<double> reference_forward(const Tensor& x, const Tensor& w, const std::vector<std::int32_t>& offs,
                                      bool trans_w) {
  const std::int64_t out_dim = trans_w ? w.size(1) : w.size(2);
  std::vector<double> out;
  for (std::size_t e = 0; e + 1 < offs.size(); ++e) {
    const std::int64_t r0 = offs[e], rows = offs[e + 1] - offs[e];
    if (rows == 0) continue;
    const std::vector<double> block =
        kernels::matmul(x.slice(r0, rows), weight(w, static_cast<std::int64_t>(e)), false, trans_w)
            .to(DType::Float64)
            .to_vector<double>();
    REQUIRE(block.size() == static_cast<std::size_t>(rows * out_dim));
    out.insert(out.end(), block.begin(), block.end());
  }
  return out;
}

// x: [N, in], dy: [N, out] -> dw: [E, in, out], dw[e] = x_e^T @ dy_e, zeros for empty groups.
std::vector<double> reference_weight_grad(const Tensor& x, const Tensor& dy, const std::vector<std::int32_t>& offs) {
  const std::int64_t in = x.size(1), out_dim = dy.size(1);
  std::vector<double> dw;
  for (std::size_t e = 0; e + 1 < offs.size(); ++e) {
    const std::int64_t r0 = offs[e], rows = offs[e + 1] - offs[e];
    if (rows == 0) {
      dw.insert(dw.end(), static_cast<std::size_t>(in * out_dim), 0.0);
      continue;
    }
    const std::vector<double> block =
        kernels::matmul(x.slice(r0, rows), dy.slice(r0, rows), true, false).to(DType::Float64).to_vector<double>();
    dw.insert(dw.end(), block.begin(), block.end());
  }
  return dw;
}

void check_close(const Tensor& got, const std::vector<double>& want, double tol) {
  const std::vector<double> g = got.to(DType::Float64).to_vector<double>();
  REQUIRE(g.size() == want.size());
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - want[i]));
  CHECK(worst <= tol);
}

struct Layout {
  const char* what;
  std::vector<std::int32_t> offsets;  // [E + 1]
};

// Offsets covering: one group, empty groups first / middle / last, many small groups (the
// group-parallel path) and a few large groups (the GEMM-parallel path).
std::vector<Layout> layouts() {
  std::vector<Layout> out = {{"one group", {0, 37}},
                             {"empty first, middle and last", {0, 0, 5, 5, 12, 30, 30}},
                             {"all rows in the last group", {0, 0, 0, 9}},
                             {"two large groups", {0, 300, 520}}};
  std::vector<std::int32_t> many = {0};
  for (int e = 0; e < 40; ++e) many.push_back(many.back() + (e % 7 == 3 ? 0 : 1 + (e * 5) % 9));
  out.push_back({"40 small groups, some empty", many});
  return out;
}

}  // namespace

TEST_CASE("grouped_matmul matches a loop of per-group matmuls, float32 and float64, w and w^T") {
  Generator gen(11);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const double tol = dtype == DType::Float32 ? 1e-5 : 1e-12;
    for (const Layout& layout : layouts())
      for (bool trans_w : {false, true}) {
        CAPTURE(layout.what);
        CAPTURE(trans_w);
        CAPTURE(dtype);
        const auto groups = static_cast<std::int64_t>(layout.offsets.size()) - 1;
        const std::int64_t n = layout.offsets.back(), in = 19, out_dim = 13;
        Tensor x = uniform({n, in}, -1, 1, gen, dtype);
        Tensor w = uniform(trans_w ? Shape{groups, out_dim, in} : Shape{groups, in, out_dim}, -1, 1, gen, dtype);
        Tensor y = kernels::grouped_matmul(x, w, offsets_of(layout.offsets), trans_w);
        CHECK(y.shape() == Shape{n, out_dim});
        check_close(y, reference_forward(x, w, layout.offsets, trans_w), tol);
      }
  }
}

TEST_CASE("grouped_matmul_weight_grad matches a loop of x_e^T @ dy_e, zeros for empty groups") {
  Generator gen(12);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const double tol = dtype == DType::Float32 ? 1e-4 : 1e-11;
    for (const Layout& layout : layouts()) {
      CAPTURE(layout.what);
      CAPTURE(dtype);
      const auto groups = static_cast<std::int64_t>(layout.offsets.size()) - 1;
      const std::int64_t n = layout.offsets.back(), in = 17, out_dim = 11;
      Tensor x = uniform({n, in}, -1, 1, gen, dtype), dy = uniform({n, out_dim}, -1, 1, gen, dtype);
      Tensor dw = kernels::grouped_matmul_weight_grad(x, dy, offsets_of(layout.offsets), groups);
      CHECK(dw.shape() == Shape{groups, in, out_dim});
      check_close(dw, reference_weight_grad(x, dy, layout.offsets), tol);
    }
  }
}

TEST_CASE("grouped_matmul edge sizes: no rows, zero inner dimension, zero groups for the weight gradient") {
  // N = 0: every group empty.
  CHECK(kernels::grouped_matmul(zeros({0, 3}), zeros({2, 3, 4}), offsets_of({0, 0, 0})).shape() == Shape{0, 4});
  CHECK(kernels::grouped_matmul_weight_grad(zeros({0, 3}), zeros({0, 4}), offsets_of({0, 0, 0}), 2).to_vector<float>() ==
        std::vector<float>(24, 0.0f));
  // in = 0: the product is all zeros.
  CHECK(kernels::grouped_matmul(zeros({3, 0}), zeros({2, 0, 4}), offsets_of({0, 1, 3})).to_vector<float>() ==
        std::vector<float>(12, 0.0f));
}

TEST_CASE("grouped_matmul is bitwise the same for 1, 2 and 3 threads (float32)") {
  Generator gen(13);
  const std::vector<std::int32_t> small = layouts().back().offsets, large = {0, 300, 520};
  // in = 192, out = 96: 2 * 192 * 96 flops a row, so the 169 rows of the small groups are 6.2M flops
  // (3 grains of kGemmGrainFlops, core/cpu/thread_count.h: the groups shared out over threads) and
  // the two large groups 11.1M and 8.1M each (each GEMM on several threads). The first 40 x 24 gave
  // 0.3M and 1.0M flops in all, under two grains, so every run took one thread and compared nothing.
  const std::int64_t in = 192, out = 96;
  for (const auto& offs : {small, large}) {
    const auto groups = static_cast<std::int64_t>(offs.size()) - 1;
    Tensor x = uniform({offs.back(), in}, -1, 1, gen), w = uniform({groups, in, out}, -1, 1, gen);
    Tensor dy = uniform({offs.back(), out}, -1, 1, gen);
    // The thread decision of for_each_group (all groups' flops) and of each group's GEMM.
    const auto flops = [&](std::int64_t rows) { return 2.0 * static_cast<double>(rows * in * out); };
    const int threads = num_threads();
    set_num_threads(1);
    REQUIRE(cpu::threads_for(flops(offs.back()), cpu::kGemmGrainFlops) == 1);
    const std::vector<float> y1 = kernels::grouped_matmul(x, w, offsets_of(offs)).to_vector<float>();
    const std::vector<float> dw1 = kernels::grouped_matmul_weight_grad(x, dy, offsets_of(offs), groups).to_vector<float>();
    for (int t : {2, 3}) {
      set_num_threads(t);
      REQUIRE(cpu::threads_for(flops(offs.back()), cpu::kGemmGrainFlops) > 1);
      if (offs == large)
        for (std::size_t e = 0; e + 1 < offs.size(); ++e)
          REQUIRE(cpu::threads_for(flops(offs[e + 1] - offs[e]), cpu::kGemmGrainFlops) > 1);
      CHECK(kernels::grouped_matmul(x, w, offsets_of(offs)).to_vector<float>() == y1);
      CHECK(kernels::grouped_matmul_weight_grad(x, dy, offsets_of(offs), groups).to_vector<float>() == dw1);
    }
    set_num_threads(threads);
  }
}

TEST_CASE("grouped_matmul rejects bad offsets, dtypes and shapes with moelab::Error naming it") {
  const Tensor x = zeros({5, 3}), w = zeros({2, 3, 4}), good = offsets_of({0, 2, 5});
  const auto contains = doctest::Contains("grouped_matmul");
  CHECK_NOTHROW(kernels::grouped_matmul(x, w, good));
  // Offsets: wrong length, not starting at 0, decreasing, past N, wrong dtype, not 1-d.
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul(x, w, offsets_of({0, 5})), contains, Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul(x, w, offsets_of({1, 2, 5})), contains, Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul(x, w, offsets_of({0, 4, 3})), contains, Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul(x, w, offsets_of({0, 3, 6})), doctest::Contains("offsets[E]"), Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul_weight_grad(x, zeros({5, 4}), offsets_of({0, 3, 6}), 2),
                       doctest::Contains("grouped_matmul_weight_grad: offsets[E] = 6"), Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul(x, w, from_vector(std::vector<float>{0, 2, 5}, {3})), contains, Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul(x, w, from_vector(std::vector<std::int32_t>{0, 2, 5}, {1, 3})),
                       contains, Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul(x, w, Tensor()), contains, Error);
  // Dtypes: mixed floats, integer data.
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul(x, zeros({2, 3, 4}, DType::Float64), good), contains, Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul(zeros({5, 3}, DType::Int32), zeros({2, 3, 4}, DType::Int32), good),
                       contains, Error);
  // Shapes: inner dimension (also when transposed), ranks.
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul(x, zeros({2, 4, 4}), good), contains, Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul(x, w, good, true), contains, Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul(zeros({5, 3, 1}), w, good), contains, Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul(x, zeros({3, 4}), good), contains, Error);
  // Weight gradient: row counts, dtypes, offsets against the group count.
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul_weight_grad(x, zeros({4, 4}), good, 2), contains, Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul_weight_grad(x, zeros({5, 4}, DType::Float64), good, 2), contains, Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul_weight_grad(x, zeros({5, 4}), good, 3), contains, Error);
  CHECK_THROWS_WITH_AS(kernels::grouped_matmul_weight_grad(x, zeros({5, 4}), offsets_of({0, 6, 5}), 2), contains,
                       Error);
}

TEST_CASE("grouped_matmul: rows past offsets[E] belong to no group, come out 0 and add nothing to dw") {
  // A MoE layer with a capacity keeps N = T*k rows and sorts the dropped ones past offsets[E].
  Generator gen(41);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Tensor x = normal({7, 3}, 0, 1, gen, dtype), w = normal({2, 3, 4}, 0, 1, gen, dtype);
    const Tensor dy = normal({7, 4}, 0, 1, gen, dtype);
    const Tensor partial = offsets_of({0, 2, 5});  // rows 5 and 6 in no group
    const Tensor y = kernels::grouped_matmul(x, w, partial);
    const Tensor y5 = kernels::grouped_matmul(kernels::narrow(x, 0, 0, 5), w, partial);
    CHECK(kernels::narrow(y, 0, 0, 5).to(DType::Float64).to_vector<double>() == y5.to(DType::Float64).to_vector<double>());
    CHECK(kernels::narrow(y, 0, 5, 2).to(DType::Float64).to_vector<double>() == std::vector<double>(8, 0.0));
    const Tensor dw = kernels::grouped_matmul_weight_grad(x, dy, partial, 2);
    const Tensor dw5 = kernels::grouped_matmul_weight_grad(kernels::narrow(x, 0, 0, 5), kernels::narrow(dy, 0, 0, 5),
                                                           partial, 2);
    CHECK(dw.to(DType::Float64).to_vector<double>() == dw5.to(DType::Float64).to_vector<double>());
  }
  // Everything past: no group has a row.
  const Tensor y = kernels::grouped_matmul(ones({3, 2}), ones({2, 2, 2}), offsets_of({0, 0, 0}));
  CHECK(y.to_vector<float>() == std::vector<float>(6, 0.0f));
}
