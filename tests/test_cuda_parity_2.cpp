// tests/test_cuda_parity_2.cpp — every kernel of core/kernels.h on the GPU against the CPU, part 2:
// gathers and scatters (embedding included), top-k and argsort, shape operations, the causal mask,
// fused causal attention, RMSNorm/LayerNorm, rope and the fused optimizer updates. Part 1 is tests/test_cuda_parity.cpp;
// tests/cuda_parity.h holds the comparison rules and tolerances. Skipped (exit 77) without a GPU.
//
// The scatter-adds, top-k, argsort and the optimizer updates must be *bitwise* equal to the CPU:
// the GPU adds each destination's sources in the CPU's order, both sorts are total orders, and
// the updates run the same IEEE operations (cuda/index.cu, cuda/sort.cu, cuda/optim.cu).
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "core/backend.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/random.h"
#include "cuda_parity.h"
#ifdef MOELAB_HAVE_CUDA
#include "cuda/cuda_backend.h"  // cuda::fused_attention_softmax
#endif

using namespace moelab;
using namespace moelab::testing;
namespace k = moelab::kernels;

TEST_CASE("cuda parity: index_select, gather_last (every dtype) and the scatter-adds, bitwise") {
  Generator gen(11);
  // Repeated and unordered indices.
  const Tensor src = randn({10, 4, 3}, gen);
  const Tensor index = from_vector(std::vector<std::int32_t>{3, 0, 9, 3, 3, 7, 0}, {7});
  check_parity_both([](const Tensors& in) { return Tensors{k::index_select(in[0], in[1])}; }, {src, index}, kExact);
  check_parity([](const Tensors& in) { return Tensors{k::index_select(in[0], in[1])}; },
               {randint({10, 5}, -50, 50, gen), index}, kExact);
  // scatter_add_rows: several sources per destination, rows that get nothing.
  const Tensor rows_src = randn({12, 5}, gen);
  const Tensor rows_index = from_vector(std::vector<std::int32_t>{2, 0, 2, 5, 2, 0, 4, 2, 5, 0, 2, 2}, {12});
  check_parity_both([](const Tensors& in) { return Tensors{k::scatter_add_rows(in[0], in[1], 7)}; },
                    {rows_src, rows_index}, kExact);
  // Larger: 3000 sources onto 50 rows of 33 (many sources per row, several sort tiles).
  check_parity_both([](const Tensors& in) { return Tensors{k::scatter_add_rows(in[0], in[1], 50)}; },
                    {randn({3000, 33}, gen), randint({3000}, 0, 50, gen)}, kExact);
  // Values of very different magnitudes make the order of the additions visible in the result.
  std::vector<float> mixed = randn({400, 2}, gen).to_vector<float>();
  for (std::size_t i = 0; i < mixed.size(); i += 3) mixed[i] *= 1e7f;
  check_parity_both([](const Tensors& in) { return Tensors{k::scatter_add_rows(in[0], in[1], 3)}; },
                    {from_vector(mixed, {400, 2}), randint({400}, 0, 3, gen)}, kExact);

  // scatter_add_rows_scaled: bitwise forward; backward dsrc bitwise, dscale (a row sum) to rounding.
  const Tensor scale = randn({3000}, gen), big_index = randint({3000}, 0, 50, gen);
  const Tensor big_src = randn({3000, 33}, gen), dy = randn({50, 33}, gen);
  check_parity_both([](const Tensors& in) { return Tensors{k::scatter_add_rows_scaled(in[0], in[1], in[2], 50)}; },
                    {big_src, scale, big_index}, kExact);
  check_parity_both([](const Tensors& in) { return Tensors{k::scatter_add_rows_scaled_backward(in[0], in[1], in[2], in[3]).src}; },
                    {dy, big_src, scale, big_index}, kExact);
  check_parity_both([](const Tensors& in) { return Tensors{k::scatter_add_rows_scaled_backward(in[0], in[1], in[2], in[3]).scale}; },
                    {dy, big_src, scale, big_index}, kTol32);
  // gather_last / scatter_add_last: short index rows (J <= 64) and long ones (J > 64).
  const Tensor gsrc = randn({6, 9}, gen), gidx = randint({6, 4}, 0, 9, gen);
  check_parity_both([](const Tensors& in) { return Tensors{k::gather_last(in[0], in[1])}; }, {gsrc, gidx}, kExact);
  check_parity([](const Tensors& in) { return Tensors{k::gather_last(in[0], in[1])}; },
               {randint({6, 9}, -9, 9, gen), gidx}, kExact);
  check_parity_both([](const Tensors& in) { return Tensors{k::scatter_add_last(in[0], in[1], 9)}; },
                    {randn({6, 4}, gen), gidx}, kExact);
  check_parity_both([](const Tensors& in) { return Tensors{k::scatter_add_last(in[0], in[1], 20)}; },
                    {randn({2, 3, 100}, gen), randint({2, 3, 100}, 0, 20, gen)}, kExact);
  std::vector<float> mixed_last = randn({3, 90}, gen).to_vector<float>();
  for (std::size_t i = 0; i < mixed_last.size(); i += 4) mixed_last[i] *= 1e7f;
  check_parity_both([](const Tensors& in) { return Tensors{k::scatter_add_last(in[0], in[1], 5)}; },
                    {from_vector(mixed_last, {3, 90}), randint({3, 90}, 0, 5, gen)}, kExact);
}

TEST_CASE("cuda parity: embedding and embedding_backward (repeated ids), bitwise") {
  Generator gen(12);
  const Tensor weight = randn({11, 8}, gen);
  const Tensor ids = randint({3, 5}, 0, 11, gen);
  check_parity_both([](const Tensors& in) { return Tensors{k::embedding(in[0], in[1])}; }, {weight, ids}, kExact);
  check_parity_both([](const Tensors& in) { return Tensors{k::embedding_backward(in[0], in[1], 11)}; },
                    {randn({3, 5, 8}, gen), ids}, kExact);
  // A batch of 4 x 512 tokens over a vocabulary of 100: hundreds of rows per id.
  check_parity_both([](const Tensors& in) { return Tensors{k::embedding_backward(in[0], in[1], 100)}; },
                    {randn({4, 512, 16}, gen), randint({4, 512}, 0, 100, gen)}, kExact);
}

TEST_CASE("cuda parity: topk with ties, NaN, infinities and signed zeros, every k") {
  Generator gen(13);
  const Tensor ties = rand_ties({13, 40}, gen);  // many equal values: lower index first
  for (int kk : {1, 2, 3, 8, 16, 17, 33, 40}) {
    INFO("k ", kk);
    const Op op = [kk](const Tensors& in) {
      const k::TopKResult r = k::topk(in[0], kk);
      return Tensors{r.values, r.indices};
    };
    check_parity_both(op, {ties}, kExact);
    check_parity_both(op, {randn({5, 40}, gen)}, kExact);
  }
  // Long rows: the warp selection over many elements, and the merge sort past one tile (1024).
  for (int kk : {1, 5, 16, 20, 1500}) {
    INFO("long rows, k ", kk);
    const Op op = [kk](const Tensors& in) {
      const k::TopKResult r = k::topk(in[0], kk);
      return Tensors{r.values, r.indices};
    };
    check_parity_both(op, {rand_ties({3, 3000}, gen)}, kExact);
  }
  // Special values: NaN above everything (lower index first among NaNs), then +inf; +0 == -0.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Tensor special =
      from_vector(std::vector<float>{0.0f, -0.0f, nan, 1.0f, inf, -inf, nan, -0.0f, 0.0f, 1.0f, -inf, 2.0f}, {1, 12});
  for (int kk : {1, 4, 12}) {
    INFO("special values, k ", kk);
    check_parity_both([kk](const Tensors& in) {
      const k::TopKResult r = k::topk(in[0], kk);
      return Tensors{r.values, r.indices};
    }, {special}, kExact);
  }
  // Router shapes: many rows of a few experts.
  check_parity_both([](const Tensors& in) {
    const k::TopKResult r = k::topk(in[0], 2);
    return Tensors{r.values, r.indices};
  }, {randn({2048, 8}, gen)}, kExact);
}

TEST_CASE("cuda parity: argsort is stable, on long rows of small keys and on wide keys") {
  Generator gen(14);
  const Op op = [](const Tensors& in) { return Tensors{k::argsort(in[0])}; };
  check_parity(op, {randint({2, 4096}, 0, 64, gen)}, kExact);   // sort-by-expert: many equal keys
  check_parity(op, {randint({1, 20000}, 0, 8, gen)}, kExact);   // one long row of 8 experts
  check_parity(op, {randint({5, 7}, 0, 3, gen)}, kExact);
  check_parity(op, {randint({3, 1}, 0, 3, gen)}, kExact);
  for (std::int64_t n : {1023, 1024, 1025, 2049}) {  // around the tile size
    INFO("n ", n);
    check_parity(op, {randint({2, n}, -5, 5, gen)}, kExact);
  }
  // Wide keys: the whole int32 range, negatives included.
  std::vector<std::int32_t> wide(2500);
  for (std::int32_t& key : wide) key = static_cast<std::int32_t>(gen.next_u32());
  wide[10] = std::numeric_limits<std::int32_t>::min();
  wide[11] = std::numeric_limits<std::int32_t>::max();
  wide[12] = wide[11];
  check_parity(op, {from_vector(wide, {1, 2500})}, kExact);
}

TEST_CASE("cuda parity: group_by_expert (drops, capacities) and row_groups, bitwise") {
  Generator gen(15);
  for (std::int64_t capacity : {-1, 0, 1, 7, 100000}) {
    for (auto [T, k, E] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 1, 1}, {37, 2, 8}, {3000, 2, 64},
                           {5000, 1, 3}, {20, 8, 8}}) {
      INFO("T ", T, " k ", k, " E ", E, " capacity ", capacity);
      const Op op = [E, capacity](const Tensors& in) {
        const k::ExpertGroups g = k::group_by_expert(in[0], E, capacity);
        return Tensors{g.kept, g.order, g.rows, g.offsets, g.wanted,
                       k::row_groups(g.offsets, in[0].numel() + 3)};
      };
      check_parity(op, {randint({T, k}, -1, static_cast<std::int32_t>(E), gen)}, kExact);  // -1: dropped before
    }
  }
}

TEST_CASE("cuda parity: concat, split, narrow, transpose and permute (every dtype)") {
  Generator gen(15);
  const Tensor a = randn({2, 3, 4}, gen);
  for (int axis : {0, 1, 2, -1}) {
    INFO("axis ", axis);
    std::vector<std::int64_t> sa = {2, 3, 4}, sb = sa, sc = sa;
    const int ax = axis < 0 ? axis + 3 : axis;
    sb[static_cast<std::size_t>(ax)] = 1;
    sc[static_cast<std::size_t>(ax)] = 5;
    const Tensor b = randn(Shape(sb), gen), c = randn(Shape(sc), gen);
    check_parity_both([axis](const Tensors& in) {
      const Tensor cat = k::concat({in[0], in[1], in[2]}, axis);
      Tensors out = {cat, k::narrow(cat, axis, 1, 3)};
      for (const Tensor& piece : k::split(cat, {2, 0, 4, cat.size(axis) - 6}, axis)) out.push_back(piece);
      return out;
    }, {a, b, c}, kExact);
  }
  const Tensor x = randn({2, 3, 4, 5}, gen);
  const std::vector<std::vector<int>> orders = {{0, 1, 2, 3}, {0, 2, 1, 3}, {3, 2, 1, 0}, {1, 0, 3, 2},
                                                {0, 1, 3, 2}, {2, 3, 0, 1}, {-1, 0, 1, 2}};
  for (const std::vector<int>& order : orders) {
    check_parity_both([order](const Tensors& in) { return Tensors{k::permute(in[0], order)}; }, {x}, kExact);
    check_parity([order](const Tensors& in) { return Tensors{k::permute(in[0], order)}; },
                 {randint({2, 3, 4, 5}, -100, 100, gen)}, kExact);
  }
  check_parity_both([](const Tensors& in) {
    return Tensors{k::transpose(in[0]), k::transpose(in[0], 0, 2), k::transpose(in[1])};
  }, {x, randn({33, 65}, gen)}, kExact);
  // The attention's head split and merge ([B, S, H, Dh] <-> [B, H, S, Dh]) and a transpose whose
  // last axis stays put: 16-byte words where they apply (Dh = 8 floats, 4 doubles or 4 ints),
  // and each again with the general kernel, which must give the same bits.
  const Tensor heads = randn({2, 6, 3, 8}, gen), ints = randint({2, 6, 3, 8}, -1000, 1000, gen);
  with_each_kernel_path([&] {
    check_parity_both([](const Tensors& in) {
      return Tensors{k::permute(in[0], {0, 2, 1, 3}), k::permute(in[0], {2, 0, 1, 3}), k::permute(in[1], {1, 0, 3, 2})};
    }, {heads, randn({5, 3, 4, 12}, gen)}, kExact);
    check_parity([](const Tensors& in) { return Tensors{k::permute(in[0], {0, 2, 1, 3})}; }, {ints}, kExact);
  });
  // Size-1 axes, rank 6, and a 0-d tensor.
  check_parity_both([](const Tensors& in) {
    return Tensors{k::permute(in[0], {5, 1, 3, 0, 4, 2}), k::permute(in[1], {})};
  }, {randn({2, 1, 3, 1, 4, 2}, gen), randn({}, gen)}, kExact);
}

TEST_CASE("cuda parity: causal_mask with T == S, S > T and S < T") {
  Generator gen(16);
  const double inf = std::numeric_limits<double>::infinity();
  for (const Shape& shape : {Shape{2, 5, 5}, Shape{2, 3, 6}, Shape{4, 6, 3}, Shape{3, 2, 7, 7}, Shape{1, 1}}) {
    for (double fill : {-inf, -1e9, 0.0}) {
      INFO(shape, " fill ", fill);
      check_parity_both([fill](const Tensors& in) { return Tensors{k::causal_mask(in[0], fill)}; },
                        {randn(shape, gen)}, kExact);
    }
  }
}

TEST_CASE("cuda parity: causal_attention, forward and backward, T == S and S > T") {
  Generator gen(26);
  // [B, T, S, H, hd]: one block of query rows, several (the CPU's blocks are 24 rows), and S > T.
  for (const auto& [b, t, s, h, hd] :
       std::vector<std::array<std::int64_t, 5>>{{3, 5, 5, 1, 4}, {2, 30, 30, 2, 8}, {2, 7, 31, 3, 6}}) {
    INFO("B ", b, " T ", t, " S ", s, " H ", h, " hd ", hd);
    const Tensors inputs = {randn({b, t, h, hd}, gen), randn({b, s, h, hd}, gen), randn({b, s, h, hd}, gen),
                            randn({b, t, h, hd}, gen)};
    with_each_kernel_path([&] {  // the fused scale-mask-softmax kernels, then the separate ones
      check_parity_both([](const Tensors& in) {
        k::AttentionResult r = k::causal_attention(in[0], in[1], in[2], 0.4);
        k::AttentionGrads g = k::causal_attention_backward(in[0], in[1], in[2], 0.4, r.p, in[3]);
        return Tensors{r.y, r.p, g.dq, g.dk, g.dv};
      }, inputs, kTolGemm32);
    });
  }
}

TEST_CASE("cuda parity: bidirectional attention (no mask), forward and backward, S == T, S > T, S < T") {
  Generator gen(28);
  for (const auto& [b, t, s, h, hd] :
       std::vector<std::array<std::int64_t, 5>>{{3, 5, 5, 1, 4}, {2, 30, 30, 2, 8}, {2, 7, 31, 3, 6}, {1, 20, 3, 2, 4}}) {
    INFO("B ", b, " T ", t, " S ", s, " H ", h, " hd ", hd);
    const Tensors inputs = {randn({b, t, h, hd}, gen), randn({b, s, h, hd}, gen), randn({b, s, h, hd}, gen),
                            randn({b, t, h, hd}, gen)};
    check_parity_both([](const Tensors& in) {
      k::AttentionResult r = k::attention(in[0], in[1], in[2], 0.4, /*causal=*/false);
      k::AttentionGrads g = k::attention_backward(in[0], in[1], in[2], 0.4, false, r.p, in[3]);
      return Tensors{r.y, r.p, g.dq, g.dk, g.dv};
    }, inputs, kTolGemm32);
  }
}

#ifdef MOELAB_HAVE_CUDA
TEST_CASE("cuda: the attention's fused softmax kernels give the separate kernels' bits") {
  // p = softmax(causal_mask(scale * scores, -inf)) and ds = scale * softmax_backward(p, dp), fused
  // (cuda/softmax.cu) against the three ops run one by one on the GPU (each with its warp-per-row
  // softmax): equal bit for bit, float32 and float64, T == S, S > T, rows of 1 to 1024 keys.
  REQUIRE(cuda_available());
  Generator gen(27);
  for (const Shape& shape : {Shape{6, 5, 5}, Shape{4, 7, 31}, Shape{3, 40, 300}, Shape{2, 3, 1024}, Shape{5, 1, 1}}) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      INFO(shape, " ", dtype_name(dtype));
      const double scale = 0.37;
      const Tensor scores = on_gpu(randn(shape, gen).to(dtype)), dp = on_gpu(randn(shape, gen).to(dtype));
      Tensor fused = Tensor::empty(shape, dtype, Device::cuda());
      Tensor fused_ds = Tensor::empty(shape, dtype, Device::cuda());
      REQUIRE(cuda::fused_attention_softmax(scores, scale, fused));
      const double inf = std::numeric_limits<double>::infinity();
      const Tensor separate = k::softmax(k::causal_mask(k::mul(scores, scale), -inf));
      CHECK(same_bits(fused, separate));
      REQUIRE(cuda::fused_attention_softmax_backward(separate, dp, scale, fused_ds));
      CHECK(same_bits(fused_ds, k::mul(k::softmax_backward(separate, dp), scale)));
      // The masked entries are exactly 0 in p and in ds.
      const std::vector<double> p = host_values(fused), ds = host_values(fused_ds);
      const std::int64_t t = shape[1], n = shape[2];
      for (std::int64_t r = 0; r < shape.numel() / n; ++r)
        for (std::int64_t j = r % t + (n - t) + 1; j < n; ++j) {
          CHECK(p[static_cast<std::size_t>(r * n + j)] == 0.0);
          CHECK(ds[static_cast<std::size_t>(r * n + j)] == 0.0);
        }
    }
  }
  // Longer rows are left to the separate kernels.
  const Tensor long_rows = on_gpu(randn({1, 2, 1025}, gen));
  Tensor p = Tensor::empty(long_rows.shape(), DType::Float32, Device::cuda());
  CHECK_FALSE(cuda::fused_attention_softmax(long_rows, 0.5, p));
}
#endif

TEST_CASE("cuda parity: rmsnorm and layernorm, forward and backward") {
  Generator gen(17);
  // Rows: fewer than one dw chunk (64), several chunks with a partial last one; d: below a warp,
  // not a multiple of 32, and more than one column tile (256).
  for (const Shape& shape : {Shape{5, 7}, Shape{37, 96}, Shape{2, 65, 32}, Shape{130, 1000}, Shape{3, 1}}) {
    INFO(shape);
    const std::int64_t d = shape.back();
    const Tensor x = randn(shape, gen), dy = randn(shape, gen);
    const Tensor w = randu({d}, 0.5, 1.5, gen), b = randn({d}, gen);
    check_parity_both([](const Tensors& in) {
      const k::NormResult r = k::rmsnorm(in[0], in[2], 1e-5);
      const k::NormGrads g = k::rmsnorm_backward(in[0], in[2], r.rstd, in[1]);
      return Tensors{r.y, r.rstd, g.dx, g.dw};
    }, {x, dy, w}, kTol32);
    check_parity_both([](const Tensors& in) {
      const k::NormResult r = k::layernorm(in[0], in[2], in[3], 1e-5);
      const k::NormGrads g = k::layernorm_backward(in[0], in[2], r.mean, r.rstd, in[1]);
      return Tensors{r.y, r.mean, r.rstd, g.dx, g.dw, g.db};
    }, {x, dy, w, b}, kTol32);
  }
  // A large mean against a small spread (the two-pass variance), and an all-zero row.
  std::vector<float> v = randn({4, 64}, gen).to_vector<float>();
  for (std::size_t i = 0; i < 64; ++i) v[i] = 1000.0f + 0.01f * v[i];
  for (std::size_t i = 64; i < 128; ++i) v[i] = 0.0f;
  check_parity_both([](const Tensors& in) {
    const k::NormResult l = k::layernorm(in[0], in[1], in[1], 1e-5);
    const k::NormResult r = k::rmsnorm(in[0], in[1], 1e-5);
    return Tensors{l.y, l.mean, l.rstd, r.y, r.rstd};
  }, {from_vector(v, {4, 64}), randu({64}, 0.5, 1.5, gen)}, kTol32);
}

TEST_CASE("cuda parity: rope in both directions, with a position offset") {
  Generator gen(18);
  for (const Shape& shape : {Shape{2, 7, 3, 8}, Shape{1, 33, 2, 64}, Shape{3, 1, 1, 2}}) {
    for (std::int64_t offset : {0, 5, 1000}) {
      for (bool inverse : {false, true}) {
        INFO(shape, " offset ", offset, " inverse ", inverse);
        check_parity_both([offset, inverse](const Tensors& in) {
          return Tensors{k::rope(in[0], offset, 10000.0, inverse), k::rope(in[0], offset, 500.0, inverse)};
        }, {randn(shape, gen)}, kTol32);
      }
    }
  }
}

namespace {

// The same optimizer update sequence on CPU tensors and on CUDA copies, compared bitwise after
// every step. update(tensors, step) updates tensors[0] (param) in place from tensors[1] (grad)
// and the state in tensors[2..].
template <class Update>
void check_update_parity(const Tensors& start, int steps, Generator& gen, const Update& update) {
  Tensors cpu, gpu;
  for (const Tensor& t : start) cpu.push_back(t.defined() ? t.clone() : t);
  for (const Tensor& t : start) gpu.push_back(t.defined() ? on_gpu(t) : t);
  for (int step = 1; step <= steps; ++step) {
    INFO("step ", step);
    const Tensor grad = randn(start[0].shape(), gen).to(start[0].dtype());
    cpu[1] = grad;
    gpu[1] = on_gpu(grad);
    update(cpu, step);
    update(gpu, step);
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      if (i == 1) continue;
      INFO("tensor ", i);
      CHECK(gpu[i].device().is_cuda());
      CHECK(same_bits(gpu[i], cpu[i]));
    }
  }
}

}  // namespace

TEST_CASE("cuda parity: adam_update (Adam and AdamW) and sgd_update are bitwise the CPU's") {
  Generator gen(19);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (bool decoupled : {true, false}) {
      for (double wd : {0.0, 0.1}) {
        INFO(dtype, " decoupled ", decoupled, " weight_decay ", wd);
        const Shape shape{1000, 3};
        const Tensors start = {randn(shape, gen).to(dtype), Tensor(), zeros(shape, dtype), zeros(shape, dtype)};
        check_update_parity(start, 4, gen, [decoupled, wd](Tensors& t, int step) {
          k::AdamHyper h;
          h.lr = 3e-3;
          h.weight_decay = wd;
          h.decoupled = decoupled;
          h.step = step;
          k::adam_update(t[0], t[1], t[2], t[3], h);
        });
      }
    }
    for (double momentum : {0.0, 0.9}) {
      for (bool nesterov : {false, true}) {
        if (nesterov && momentum == 0.0) continue;
        for (double wd : {0.0, 0.01}) {
          INFO(dtype, " momentum ", momentum, " nesterov ", nesterov, " weight_decay ", wd);
          const Shape shape{777};
          const Tensors start = {randn(shape, gen).to(dtype), Tensor(), zeros(shape, dtype)};
          check_update_parity(start, 4, gen, [momentum, nesterov, wd](Tensors& t, int step) {
            k::SgdHyper h;
            h.lr = 0.05;
            h.momentum = momentum;
            h.dampening = nesterov ? 0.0 : 0.1;
            h.nesterov = nesterov;
            h.weight_decay = wd;
            h.first_step = step == 1;
            Tensor none;
            k::sgd_update(t[0], t[1], momentum != 0.0 ? t[2] : none, h);
          });
        }
      }
    }
  }
}
