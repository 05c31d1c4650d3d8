// tests/test_cuda_parity.cpp — every kernel of core/kernels.h on the GPU against the CPU, part 1:
// copies, fills, casts, random fills, matrix products, grouped products, elementwise ops,
// reductions, softmax and cross-entropy. Part 2 (tests/test_cuda_parity_2.cpp) has the gathers,
// scatters, sorting, shape ops, masks, norms, rope and the optimizer updates.
//
// Each case builds random inputs on the host, runs the kernel on the CPU and on Device::cuda(),
// compares (tests/cuda_parity.h states the tolerances and which results must be bitwise equal),
// and runs the CUDA kernel twice to require bitwise-identical results. Float ops are checked in
// float32 and float64. Without a GPU, or in a build without CUDA, the executable prints that it
// was skipped and exits with 77, which ctest reports as "Skipped" (tests/cuda_test_main.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/kernels/elementwise_ops.h"
#include "core/random.h"
#include "cuda_parity.h"

using namespace moelab;
using namespace moelab::testing;
namespace k = moelab::kernels;

TEST_CASE("cuda parity: fill, copy across devices, clone, cast") {
  Generator gen(1);
  const Tensor x = randn({7, 13}, gen);
  check_parity_both([](const Tensors& in) {
    Tensor y = in[0].clone();
    k::fill(y, -2.75);
    return Tensors{y, in[0].clone()};
  }, {x}, kExact);

  // Host -> device -> host round trips, device -> device copies, and copy() in all directions.
  const Tensor g = on_gpu(x);
  CHECK(g.device().is_cuda());
  CHECK(same_bits(on_host(g), x));
  Tensor dst_gpu = zeros({7, 13}, DType::Float32, Device::cuda());
  k::copy(dst_gpu, x);        // host -> device
  CHECK(same_bits(dst_gpu, x));
  Tensor dst_gpu2 = zeros({7, 13}, DType::Float32, Device::cuda());
  k::copy(dst_gpu2, dst_gpu);  // device -> device
  CHECK(same_bits(dst_gpu2, x));
  Tensor dst_host = zeros({7, 13});
  k::copy(dst_host, dst_gpu2);  // device -> host
  CHECK(same_bits(dst_host, x));
  // A first-axis slice (a view at an offset) copies from the right place.
  CHECK(same_bits(on_host(g.slice(2, 3)), x.slice(2, 3)));

  // Casts between every pair of dtypes; float -> int truncates toward zero.
  const Tensor f = from_vector(std::vector<float>{2.7f, -2.7f, 0.5f, -0.5f, 1e6f, -3.0f, 0.0f, 7.99f}, {8});
  const Tensor i = from_vector(std::vector<std::int32_t>{-5, 0, 7, 123456, -99, 1, 2, 3}, {8});
  for (DType from : {DType::Float32, DType::Float64, DType::Int32}) {
    for (DType to : {DType::Float32, DType::Float64, DType::Int32}) {
      INFO("cast ", from, " -> ", to);
      const Tensor src = from == DType::Int32 ? i : f.to(from);
      check_parity([to](const Tensors& in) { return Tensors{k::cast(in[0], to)}; }, {src}, kExact);
    }
  }
  check_parity([](const Tensors& in) { return Tensors{k::cast(in[0], DType::Float32)}; },
               {randn({1000}, gen).to(DType::Float64)}, kExact);
}

TEST_CASE("cuda parity: fill_uniform and fill_normal draw the CPU's numbers and advance the generator alike") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    Tensor a = zeros({1001}, dtype), b = zeros({1001}, dtype, Device::cuda());
    Generator ga(42), gb(42);
    k::fill_uniform(a, -2.0, 3.0, ga);
    k::fill_uniform(b, -2.0, 3.0, gb);
    CHECK(ga.counter() == gb.counter());
    CHECK(parity_error(b, a) <= (dtype == DType::Float32 ? 1e-6 : kTol64));
    k::fill_normal(a, 0.5, 2.0, ga);
    k::fill_normal(b, 0.5, 2.0, gb);
    CHECK(ga.counter() == gb.counter());
    CHECK(parity_error(b, a) <= (dtype == DType::Float32 ? kTol32 : kTol64));
    CHECK(ga.next_u32() == gb.next_u32());
  }
}

TEST_CASE("cuda parity: matmul, 2-d and batched, every transpose") {
  Generator gen(2);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      INFO("trans_a ", ta, " trans_b ", tb);
      const Tensor a = ta ? randn({7, 5}, gen) : randn({5, 7}, gen);
      const Tensor b = tb ? randn({3, 7}, gen) : randn({7, 3}, gen);
      const Op op = [ta, tb](const Tensors& in) { return Tensors{k::matmul(in[0], in[1], ta, tb)}; };
      check_parity_both(op, {a, b}, kTolGemm32);
      const Tensor ba = ta ? randn({4, 9, 6}, gen) : randn({4, 6, 9}, gen);
      const Tensor bb = tb ? randn({4, 11, 9}, gen) : randn({4, 9, 11}, gen);
      check_parity_both(op, {ba, bb}, kTolGemm32);
    }
  }
  // A larger product (several cuBLAS tiles; K = 64).
  check_parity_both([](const Tensors& in) { return Tensors{k::matmul(in[0], in[1])}; },
                    {randn({70, 64}, gen), randn({64, 130}, gen)}, kTolGemm32);
}

TEST_CASE("cuda parity: bfloat16 casts (bitwise: the same rounding) and the bf16 products") {
  Generator gen(21);
  std::vector<float> special{0.0f, -0.0f, 1.00390625f, 1.01171875f, 3.4028234e38f, -3.4028234e38f,
                             std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                             -std::numeric_limits<float>::quiet_NaN(), 1e-40f, 0.1f};
  const Tensor x = k::concat({from_vector(special, {11}), randn({989}, gen)}, 0);
  check_parity([](const Tensors& in) { return Tensors{in[0].to(DType::BFloat16)}; }, {x}, kExact);
  check_parity([](const Tensors& in) { return Tensors{in[0].to(DType::BFloat16).to(DType::Float32)}; }, {x}, kExact);
  check_parity([](const Tensors& in) { return Tensors{in[0].to(DType::BFloat16).to(DType::Float64)}; },
               {x.to(DType::Float64)}, kExact);
  check_parity([](const Tensors& in) { return Tensors{full({5}, 0.1, DType::BFloat16, in[0].device())}; }, {x}, kExact);
  // Products of bfloat16 operands: float32 results, float32 sums in another order (kTolGemm32).
  // On the GPU these are cublasGemmEx on the tensor cores (exact bf16 products, float32
  // accumulation), on the CPU the widened float32 GEMM: batched (strided-batched GemmEx) and
  // single (GemmEx), with each operand transposed or not, and K = 300 for a longer sum.
  check_parity([](const Tensors& in) {
    return Tensors{k::matmul(in[0].to(DType::BFloat16), in[1].to(DType::BFloat16), false, true)};
  }, {randn({2, 30, 40}, gen), randn({2, 20, 40}, gen)}, kTolGemm32);
  for (const bool trans_a : {false, true})
    for (const bool trans_b : {false, true}) {
      const Tensor a = trans_a ? randn({300, 70}, gen) : randn({70, 300}, gen);
      const Tensor b = trans_b ? randn({130, 300}, gen) : randn({300, 130}, gen);
      check_parity([trans_a, trans_b](const Tensors& in) {
        return Tensors{k::matmul(in[0].to(DType::BFloat16), in[1].to(DType::BFloat16), trans_a, trans_b)};
      }, {a, b}, kTolGemm32);
    }
  const Tensor offsets = from_vector(std::vector<std::int32_t>{0, 7, 7, 19}, {4});
  check_parity([](const Tensors& t) {
    return Tensors{k::grouped_matmul(t[0].to(DType::BFloat16), t[1].to(DType::BFloat16), t[2])};
  }, {randn({20, 9}, gen), randn({3, 9, 5}, gen), offsets}, kTolGemm32);
}

TEST_CASE("cuda parity: grouped_matmul (empty groups, trans_w) and its weight gradient") {
  Generator gen(3);
  const std::int64_t n = 20, in = 6, out = 4, e = 6;
  // Groups 1, 3 and 5 are empty; the last group is empty too.
  const Tensor offsets = from_vector(std::vector<std::int32_t>{0, 3, 3, 10, 10, 20, 20}, {e + 1});
  const Tensor x = randn({n, in}, gen), dy = randn({n, out}, gen);
  const Tensor w = randn({e, in, out}, gen), wt = randn({e, out, in}, gen);
  check_parity_both([](const Tensors& t) { return Tensors{k::grouped_matmul(t[0], t[1], t[2], false)}; },
                    {x, w, offsets}, kTolGemm32);
  check_parity_both([](const Tensors& t) { return Tensors{k::grouped_matmul(t[0], t[1], t[2], true)}; },
                    {x, wt, offsets}, kTolGemm32);
  check_parity_both([e](const Tensors& t) { return Tensors{k::grouped_matmul_weight_grad(t[0], t[1], t[2], e)}; },
                    {x, dy, offsets}, kTolGemm32);
  // Every row in one group; and no rows at all.
  const Tensor one = from_vector(std::vector<std::int32_t>{0, 0, 20, 20, 20, 20, 20}, {e + 1});
  check_parity_both([e](const Tensors& t) { return Tensors{k::grouped_matmul_weight_grad(t[0], t[1], t[2], e)}; },
                    {x, dy, one}, kTolGemm32);
  const Tensor none = from_vector(std::vector<std::int32_t>(static_cast<std::size_t>(e + 1), 0), {e + 1});
  check_parity_both([e](const Tensors& t) {
    return Tensors{k::grouped_matmul(t[0], t[1], t[3], false), k::grouped_matmul_weight_grad(t[0], t[2], t[3], e)};
  }, {randn({0, in}, gen), w, randn({0, out}, gen), none}, kExact);
  // Rows past offsets[E] (a MoE layer's dropped assignments): zeros forward, unused for dw; a
  // larger problem, so that several row tiles and the groups' tile search are exercised.
  const Tensor partial = from_vector(std::vector<std::int32_t>{0, 70, 70, 200, 260, 261, 300}, {e + 1});
  const Tensor xl = randn({333, in}, gen), dyl = randn({333, out}, gen);
  check_parity_both([e](const Tensors& t) {
    return Tensors{k::grouped_matmul(t[0], t[1], t[3], false), k::grouped_matmul_weight_grad(t[0], t[2], t[3], e)};
  }, {xl, w, dyl, partial}, kTolGemm32);
}

// Sizes that cut both tile shapes (64 and 128, cuda/grouped_matmul.cu) in every way: groups of
// 1 row to several tiles, in and out not multiples of 16, 64 or 128, k steps with a partial last
// step. The GPU tests run this file once with the default tile and once with
// MOELAB_GROUPED_TILE=64 (scripts/gpu-check.sh), so both kernels are compared with the CPU.
TEST_CASE("cuda parity: grouped_matmul across several tiles of either shape") {
  Generator gen(11);
  const std::int64_t n = 700, in = 200, out = 300, e = 5;
  const Tensor offsets = from_vector(std::vector<std::int32_t>{0, 1, 130, 130, 387, 690}, {e + 1});
  const Tensor x = randn({n, in}, gen), dy = randn({n, out}, gen);
  const Tensor w = randn({e, in, out}, gen), wt = randn({e, out, in}, gen);
  check_parity_both([](const Tensors& t) { return Tensors{k::grouped_matmul(t[0], t[1], t[2], false)}; },
                    {x, w, offsets}, kTolGemm32);
  check_parity_both([](const Tensors& t) { return Tensors{k::grouped_matmul(t[0], t[1], t[2], true)}; },
                    {x, wt, offsets}, kTolGemm32);
  check_parity_both([e](const Tensors& t) { return Tensors{k::grouped_matmul_weight_grad(t[0], t[1], t[2], e)}; },
                    {x, dy, offsets}, kTolGemm32);
}

TEST_CASE("cuda parity: arange in every dtype") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32}) {
    const Tensor cpu = arange(-3.0, 40.0, 0.5, dtype);
    const Tensor gpu = arange(-3.0, 40.0, 0.5, dtype, Device::cuda());
    CHECK(gpu.device() == Device::cuda());
    CHECK(host_values(gpu) == host_values(cpu));
  }
}

namespace {

// Inputs from an op's domain (core/kernels/elementwise_ops.h): Real ~ N(0, 1), Positive in
// [0.5, 2), NonZero with magnitudes in [0.5, 2) and random signs.
Tensor draw(k::OpDomain domain, const Shape& shape, Generator& gen) {
  switch (domain) {
    case k::OpDomain::Real: return randn(shape, gen);
    case k::OpDomain::Positive: return randu(shape, 0.5, 2.0, gen);
    case k::OpDomain::NonZero: {
      std::vector<double> v = randu(shape, 0.5, 2.0, gen).to(DType::Float64).to_vector<double>();
      for (double& x : v)
        if (gen.next_below(2) == 0) x = -x;
      return from_vector(v, shape).to(DType::Float32);
    }
  }
  FAIL("unknown domain");
  return Tensor();
}

}  // namespace

TEST_CASE("cuda parity: every unary op") {
  Generator gen(4);
  for (const k::UnaryOpInfo& info : k::kUnaryOps) {
    INFO(info.name);
    const k::UnaryOp op = info.op;
    check_parity_both([op](const Tensors& in) { return Tensors{k::unary(op, in[0])}; },
                      {draw(info.domain, {37, 53}, gen)}, kTol32);
  }
}

TEST_CASE("cuda parity: every binary op, all broadcast forms; scalar forms; relu_backward") {
  Generator gen(5);
  for (const k::BinaryOpInfo& info : k::kBinaryOps) {
    INFO(info.name);
    const k::BinaryOp op = info.op;
    auto lhs = [&](const Shape& s) { return draw(info.a_domain, s, gen); };
    auto rhs = [&](const Shape& s) { return draw(info.b_domain, s, gen); };
    const Op binary = [op](const Tensors& in) { return Tensors{k::binary(op, in[0], in[1])}; };
    const Tensor a = lhs({6, 7, 9});
    check_parity_both(binary, {a, rhs({6, 7, 9})}, kTol32);  // elementwise
    check_parity_both(binary, {a, rhs({})}, kTol32);         // 0-d scalar tensor
    check_parity_both(binary, {a, rhs({1})}, kTol32);        // one-element tensor
    check_parity_both(binary, {a, rhs({7, 9})}, kTol32);     // trailing axes
    check_parity_both(binary, {a, rhs({9})}, kTol32);        // bias-like
    // General NumPy broadcasts (the strided kernel): either side smaller, both sides repeated.
    check_parity_both(binary, {a, rhs({6, 7, 1})}, kTol32);          // one value per row
    check_parity_both(binary, {lhs({6, 1, 9}), rhs({7, 9})}, kTol32);  // [B, 1, d] with [T, d]
    check_parity_both(binary, {lhs({7, 1}), rhs({1, 300})}, kTol32);   // an outer-product shape
    check_parity_both(binary, {lhs({9}), rhs({6, 7, 9})}, kTol32);     // the smaller one on the left
    check_parity_both(binary, {lhs({}), rhs({6, 7, 9})}, kTol32);      // 0-d on the left
    check_parity_both(binary, {lhs({2, 1, 3, 1, 2}), rhs({5, 1, 4, 1})}, kTol32);
    check_parity_both(binary, {lhs({2, 1, 2, 1, 2, 1, 2, 1}), rhs({2, 1, 2, 1, 2, 1, 2})}, kTol32);  // 8 merged axes
    check_parity_both(binary, {lhs({3, 0, 1}), rhs({1, 4})}, kTol32);  // empty result
    // The plain number 1.7 lies in every domain; the tensor stands where its domain says.
    check_parity_both([op](const Tensors& in) { return Tensors{k::binary_scalar(op, in[0], 1.7)}; }, {a}, kTol32);
    check_parity_both([op](const Tensors& in) { return Tensors{k::scalar_binary(op, 1.7, in[0])}; },
                      {rhs({6, 7, 9})}, kTol32);
  }
  // More merged axes than the CUDA kernel takes (8) is an error naming the op and the shapes.
  const Tensor nine_a = on_gpu(randn({2, 1, 2, 1, 2, 1, 2, 1, 2}, gen));
  const Tensor nine_b = on_gpu(randn({2, 1, 2, 1, 2, 1, 2, 1}, gen));
  CHECK_THROWS_WITH_AS(k::binary(k::BinaryOp::Add, nine_a, nine_b), doctest::Contains("binary"), Error);
  // relu_backward at exact zeros too (the gradient does not pass where x == 0).
  Tensor x = randn({300}, gen);
  std::vector<float> v = x.to_vector<float>();
  for (std::size_t i = 0; i < v.size(); i += 7) v[i] = 0.0f;
  x = from_vector(v, {300});
  check_parity_both([](const Tensors& in) { return Tensors{k::relu_backward(in[0], in[1])}; }, {x, randn({300}, gen)},
                    kExact);
}

TEST_CASE("cuda parity: sum, mean and max over everything and over each axis, keepdim, indices") {
  Generator gen(6);
  const Tensor x = randn({4, 5, 6}, gen);
  check_parity_both([](const Tensors& in) { return Tensors{k::sum(in[0]), k::mean(in[0])}; }, {x}, kTol32);
  check_parity_both([](const Tensors& in) { return Tensors{k::max(in[0])}; }, {x}, kExact);
  for (int axis : {0, 1, 2, -1}) {
    for (bool keepdim : {false, true}) {
      INFO("axis ", axis, " keepdim ", keepdim);
      check_parity_both([axis, keepdim](const Tensors& in) {
        return Tensors{k::sum(in[0], axis, keepdim), k::mean(in[0], axis, keepdim)};
      }, {x}, kTol32);
      check_parity_both([axis, keepdim](const Tensors& in) {
        const k::MaxResult m = k::max(in[0], axis, keepdim);
        return Tensors{m.values, m.indices};
      }, {x}, kExact);
      // Ties: the first maximum's index.
      check_parity_both([axis, keepdim](const Tensors& in) {
        const k::MaxResult m = k::max(in[0], axis, keepdim);
        return Tensors{m.values, m.indices};
      }, {rand_ties({4, 5, 6}, gen)}, kExact);
    }
  }
  // Long reductions: many blocks (sum of all) and long rows (sum over an axis of 5000).
  const Tensor big = randn({100003}, gen);
  check_parity_both([](const Tensors& in) { return Tensors{k::sum(in[0]), k::mean(in[0]), k::max(in[0])}; }, {big},
                    kTol32);
  const Tensor wide = randn({3, 5000, 2}, gen);
  check_parity_both([](const Tensors& in) {
    const k::MaxResult m = k::max(in[0], 1);
    return Tensors{k::sum(in[0], 1), k::mean(in[0], 1), m.values, m.indices};
  }, {wide}, kTol32);
}

TEST_CASE("cuda parity: softmax, log_softmax and their backwards") {
  Generator gen(7);
  // Rows of every register count of the warp-per-row kernels (n <= 32, 64, 128, 256, 512, 1024;
  // row counts that leave a block's last warps without a row) and longer rows (a block per row),
  // each with the specialised kernels and with the general ones.
  for (const Shape& shape : {Shape{7, 33}, Shape{2, 3, 1000}, Shape{5, 1}, Shape{1, 5000}, Shape{9, 64},
                             Shape{3, 100}, Shape{2, 5, 256}, Shape{11, 300}, Shape{4, 1024}, Shape{3, 1025}}) {
    INFO(shape);
    const Tensor x = randn(shape, gen), dy = randn(shape, gen);
    with_each_kernel_path([&] {
      check_parity_both([](const Tensors& in) {
        const Tensor y = k::softmax(in[0]), ly = k::log_softmax(in[0]);
        return Tensors{y, k::softmax_backward(y, in[1]), ly, k::log_softmax_backward(ly, in[1])};
      }, {x, dy}, kTol32);
    });
  }
  // Large logits (the max subtraction matters) and -inf entries (masked scores).
  std::vector<float> v = randn({4, 10}, gen).to_vector<float>();
  for (float& e : v) e *= 80.0f;
  v[3] = -std::numeric_limits<float>::infinity();
  v[17] = -std::numeric_limits<float>::infinity();
  with_each_kernel_path([&] {
    check_parity_both([](const Tensors& in) { return Tensors{k::softmax(in[0]), k::log_softmax(in[0])}; },
                      {from_vector(v, {4, 10})}, kTol32);
  });
  // Over another axis (rows of n at stride inner): Soft MoE's dispatch [B, m, S] over m, a long
  // strided column, and the first axis.
  for (const auto& [shape, axis] : {std::pair<Shape, int>{{3, 4, 128}, 1}, {{2, 300, 5}, 1}, {{6, 7}, 0}}) {
    INFO(shape, " axis ", axis);
    const Tensor x = randn(shape, gen), dy = randn(shape, gen);
    check_parity_both([axis](const Tensors& in) {
      const Tensor y = k::softmax(in[0], axis);
      return Tensors{y, k::softmax_backward(y, in[1], axis)};
    }, {x, dy}, kTol32);
  }
}

TEST_CASE("cuda parity: cross_entropy and its backward, with ignored rows") {
  Generator gen(8);
  const Tensor logits = randn({9, 17}, gen);
  std::vector<std::int32_t> t = randint({9}, 0, 17, gen).to_vector<std::int32_t>();
  for (int ignore : {-100, 3}) {
    INFO("ignore_index ", ignore);
    t[2] = ignore;  // rows 2 and 6 (and, for ignore_index 3, any row whose target is 3) are skipped
    t[6] = ignore;
    const Tensor targets = from_vector(t, {9});
    check_parity_both([ignore](const Tensors& in) {
      const k::CrossEntropyResult r = k::cross_entropy(in[0], in[1], ignore);
      const Tensor kept =
          from_vector(std::vector<std::int32_t>{static_cast<std::int32_t>(r.kept_count())}, {1}, in[0].device());
      return Tensors{r.loss, r.logsumexp, kept,
                     k::cross_entropy_backward(in[0], in[1], r.logsumexp, 1.3, r.kept_count(), ignore)};
    }, {logits, targets}, kTol32);
  }
  // Every row ignored: loss 0, kept 0, zero gradient.
  const Tensor all_ignored = full({9}, -100, DType::Int32);
  check_parity_both([](const Tensors& in) {
    const k::CrossEntropyResult r = k::cross_entropy(in[0], in[1]);
    return Tensors{r.loss, k::cross_entropy_backward(in[0], in[1], r.logsumexp, 1.0, r.kept_count())};
  }, {logits, all_ignored}, kTol32);
  // A long vocabulary and many rows.
  check_parity_both([](const Tensors& in) {
    const k::CrossEntropyResult r = k::cross_entropy(in[0], in[1]);
    return Tensors{r.loss, r.logsumexp, k::cross_entropy_backward(in[0], in[1], r.logsumexp, 0.5, r.kept_count())};
  }, {randn({300, 2000}, gen), randint({300}, 0, 2000, gen)}, kTol32);
}
