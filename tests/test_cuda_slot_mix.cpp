// tests/test_cuda_slot_mix.cpp — Soft MoE's mixing kernels (core/kernels/slot_mix.cpp: token
// order's slot_mix_*, slot order's slot_dispatch / slot_combine / slot_dot) on the GPU against
// the CPU. Skipped (exit 77) without a GPU; tests/cuda_parity.h holds the
// comparison rules. Both devices add the same terms in the same order without FMA contraction
// (cuda/slot_mix.cu), so float32 agrees to the elementwise tolerance; the shapes cover p = 1
// (the CPU's own branch) and p = 3, an expert count that is no multiple of a warp, and a batch
// large enough for the grid-stride loops to wrap.
#include <doctest/doctest.h>

#include "core/factories.h"
#include "core/kernels.h"
#include "core/random.h"
#include "cuda_parity.h"

using namespace moelab;
using namespace moelab::testing;
namespace k = moelab::kernels;

TEST_CASE("cuda parity: slot_mix reduce, expand and dot (p = 1 and p = 3)") {
  Generator gen(61);
  struct Sizes {
    std::int64_t B, m, n, p, f;
  };
  for (const Sizes& s : {Sizes{3, 4, 37, 1, 5}, Sizes{2, 5, 7, 3, 4}, Sizes{256, 4, 128, 1, 6}}) {
    INFO("B ", s.B, " m ", s.m, " n ", s.n, " p ", s.p, " f ", s.f);
    const Tensor w = randu({s.B, s.m, s.n, s.p}, 0.0, 1.0, gen);
    const Tensor u = randn({s.B, s.m, s.f, s.n}, gen), v = randn({s.B, s.f, s.n, s.p}, gen);
    check_parity_both([](const Tensors& in) {
      return Tensors{k::slot_mix_reduce(in[0], in[1]), k::slot_mix_expand(in[0], in[2]), k::slot_mix_dot(in[1], in[2])};
    }, {w, u, v}, kTol32);
  }
}

TEST_CASE("cuda parity: slot_dispatch, slot_combine and slot_dot (expert-major slots)") {
  Generator gen(62);
  struct Sizes {
    std::int64_t B, m, S, d;
  };
  for (const Sizes& s : {Sizes{3, 4, 10, 19}, Sizes{256, 4, 16, 196}, Sizes{2, 1, 3, 5}}) {
    INFO("B ", s.B, " m ", s.m, " S ", s.S, " d ", s.d);
    const Tensor w = randu({s.B, s.m, s.S}, 0.0, 1.0, gen);
    const Tensor x = randn({s.B, s.m, s.d}, gen), y = randn({s.S, s.B, s.d}, gen);
    check_parity_both([](const Tensors& in) {
      return Tensors{k::slot_dispatch(in[0], in[1]), k::slot_combine(in[0], in[2]), k::slot_dot(in[1], in[2])};
    }, {w, x, y}, kTol32);
  }
}
