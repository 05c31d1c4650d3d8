// tests/test_cpu_isa.cpp — the run-time choice of instruction set, and the promise that it changes
// the GEMM's speed but not its bits.
//
// Every GEMM kernel set this CPU can run (core/cpu/gemm_kernels.h: generic, avx2, avx512) is
// run on the same products: shapes that take the small-product path, the blocked path with full
// and edge tiles, wide and narrow tiles, several KC slices, transposed operands. avx2 and avx512 must agree bitwise (both
// compute each element as one FMA chain in the same order); generic must agree bitwise too when
// the baseline it is compiled for has FMA, and to rounding otherwise. On a CPU without AVX-512
// the avx512 comparison is skipped, and said so.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu/cpu_features.h"
#include "core/cpu/gemm_f32.h"
#include "core/cpu/gemm_kernels.h"
#include "core/error.h"
#include "core/parallel.h"

using namespace moelab;
using namespace moelab::cpu;

namespace {

struct Product {
  std::int64_t m, k, n;
  bool trans_a, trans_b;
};

std::vector<float> random_values(std::int64_t count, std::uint64_t seed) {
  // A small LCG is enough here: the values only need to be varied and reproducible.
  std::vector<float> v(static_cast<std::size_t>(count));
  std::uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<double>(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
  return v;
}

std::vector<float> run(const GemmKernels& kernels, const Product& p, std::uint64_t seed) {
  const std::vector<float> a = random_values(p.m * p.k, seed), b = random_values(p.k * p.n, seed + 1);
  std::vector<float> c(static_cast<std::size_t>(p.m * p.n), std::nanf(""));
  gemm_f32(kernels, a.data(), b.data(), c.data(), p.m, p.k, p.n, p.trans_a, p.trans_b);
  return c;
}

std::vector<Product> products() {
  std::vector<Product> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      out.push_back({8, 4, 196, ta, tb});       // small path (Soft MoE's per-example product)
      out.push_back({1, 7, 1, ta, tb});         // small path, degenerate
      out.push_back({37, 300, 53, ta, tb});     // blocked: two KC slices, edge tiles both ways
      out.push_back({96, 64, 128, ta, tb});     // blocked: full tiles of both kernels
      out.push_back({130, 513, 70, ta, tb});    // blocked: three KC slices, partial everything
      out.push_back({1030, 20, 33, ta, tb});    // blocked: many row panels, threads share them
      out.push_back({25, 40, 1100, ta, tb});    // blocked: two NC blocks
      out.push_back({300, 70, 6, ta, tb});      // narrow tile everywhere (n <= 8), edge rows
      out.push_back({53, 70, 5, ta, tb});       // narrow tile, an edge of 5 rows (53 = 4 x 12 + 5 = 2 x 24 + 5)
      out.push_back({77, 300, 16, ta, tb});     // n = 16: avx512's narrow tile against avx2's wide one
      out.push_back({64, 16, 64, ta, tb});      // attention at d 64 (k = 16), blocked
    }
  return out;
}

bool bitwise_equal(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("the active instruction set is the detected one unless MOELAB_CPU_ISA lowers it") {
  const char* requested = std::getenv("MOELAB_CPU_ISA");
  MESSAGE("CPU: ", cpu_description(), "; detected ", std::string(isa_name(detected_isa())));
  if (requested == nullptr || *requested == '\0') CHECK(active_isa() == detected_isa());
  else CHECK(std::string(isa_name(active_isa())) == requested);
  CHECK(active_isa() <= detected_isa());
  CHECK(cpu_description().find(isa_name(active_isa())) != std::string::npos);
}

TEST_CASE("asking for kernels the CPU cannot run is an error, not a crash") {
  if (detected_isa() == CpuIsa::Avx512) {
    MESSAGE("this CPU has AVX-512: every kernel set runs here, nothing to refuse");
    return;
  }
  CHECK_THROWS_AS(gemm_kernels(CpuIsa::Avx512), Error);
}

TEST_CASE("every kernel set this CPU runs gives the same products, bitwise for the FMA ones") {
  const GemmKernels& generic = gemm_kernels(CpuIsa::Generic);
  CHECK(generic.isa == CpuIsa::Generic);
  if (detected_isa() < CpuIsa::Avx2) {
    MESSAGE("SKIPPED the avx2/avx512 comparisons: this CPU has neither");
    return;
  }
  const GemmKernels& avx2 = gemm_kernels(CpuIsa::Avx2);
  CHECK(avx2.wide.mr == 6);
  CHECK(avx2.wide.nr == 16);
  CHECK(avx2.narrow.nr == 8);
  const bool have_avx512 = detected_isa() == CpuIsa::Avx512;
  if (!have_avx512) MESSAGE("SKIPPED the avx512 comparison: this CPU has no AVX-512");
#if defined(__FMA__)
  const bool generic_fuses = true;  // the baseline has FMA, so the generic kernels fuse too
#else
  const bool generic_fuses = false;
#endif
  std::uint64_t seed = 1;
  for (const Product& p : products()) {
    INFO("m=", p.m, " k=", p.k, " n=", p.n, " trans_a=", p.trans_a, " trans_b=", p.trans_b);
    const std::vector<float> reference = run(avx2, p, seed);
    // Against a double-precision sum: the kernels are right, not only equal.
    const std::vector<float> a = random_values(p.m * p.k, seed), b = random_values(p.k * p.n, seed + 1);
    double worst = 0;
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j) {
        double s = 0;
        for (std::int64_t q = 0; q < p.k; ++q)
          s += double(a[p.trans_a ? q * p.m + i : i * p.k + q]) * double(b[p.trans_b ? j * p.k + q : q * p.n + j]);
        worst = std::max(worst, std::abs(s - double(reference[static_cast<std::size_t>(i * p.n + j)])));
      }
    CHECK(worst <= 1e-5 * double(p.k));
    if (have_avx512) CHECK(bitwise_equal(run(gemm_kernels(CpuIsa::Avx512), p, seed), reference));
    const std::vector<float> g = run(generic, p, seed);
    if (generic_fuses) {
      CHECK(bitwise_equal(g, reference));
    } else {
      double diff = 0;
      for (std::size_t i = 0; i < g.size(); ++i) diff = std::max(diff, double(std::abs(g[i] - reference[i])));
      CHECK(diff <= 1e-5 * double(p.k));
    }
    ++seed;
  }
}

TEST_CASE("a row-major B read in place (products of few rows) gives the bits of a packed B") {
  // C's first rows do not depend on how many rows C has: a product of 100 rows packs B (many A
  // panels share it, and B's rows, n = 600 floats apart, are farther apart than any instruction
  // set reads in place), one of 1 or 4 rows (also 13 or 24 with AVX-512's 12-row tile: two row
  // panels at most) reads B where it is (gemm_f32.cpp, b_in_place).
  // k = 300 makes two KC slices (the second accumulates), n = 600 leaves a partial panel at the
  // right edge (600 = 37 x 16 + 8 = 18 x 32 + 24). n = 512 (rows exactly 2 KiB apart) is packed
  // with 16 or more A panels (100 rows of AVX2's 6-row tile: 17) and read in place with fewer.
  const std::int64_t k = 300;
  std::vector<const GemmKernels*> sets{&gemm_kernels(CpuIsa::Generic)};
  if (detected_isa() >= CpuIsa::Avx2) sets.push_back(&gemm_kernels(CpuIsa::Avx2));
  if (detected_isa() >= CpuIsa::Avx512) sets.push_back(&gemm_kernels(CpuIsa::Avx512));
  for (std::int64_t n : {600, 512}) {
    const std::vector<float> a = random_values(100 * k, 7), b = random_values(k * n, 8);
    for (const GemmKernels* kernels : sets) {
      std::vector<float> all(static_cast<std::size_t>(100 * n));
      gemm_f32(*kernels, a.data(), b.data(), all.data(), 100, k, n, false, false);
      for (std::int64_t m : {1, 4, 13, 24}) {
        INFO(isa_name(kernels->isa), " n=", n, " m=", m);
        std::vector<float> few(static_cast<std::size_t>(m * n));
        gemm_f32(*kernels, a.data(), b.data(), few.data(), m, k, n, false, false);
        CHECK(bitwise_equal(few, std::vector<float>(all.begin(), all.begin() + m * n)));
      }
    }
  }
}

TEST_CASE("a transposed A packed per slice (rows 256+ floats apart) gives the bits of A read in place") {
  // gemm_f32.cpp's pack_a_block: a transposed A whose stored rows are m >= 256 floats apart, with
  // n >= 4 column panels, is copied into row panels first. The same product with A transposed
  // beforehand (row-major [m, k], read in place) does the same FMAs in the same order. m = 301
  // leaves a bottom panel of 1 row (6- and 12-row tiles); m = 256 is the threshold; k = 300 makes
  // two KC slices; n = 130 four panels and an edge of 2 columns on both tile widths, n = 64 AVX2's
  // threshold. 1 and 3 threads (each packs its own rows) must agree too.
  std::vector<const GemmKernels*> sets{&gemm_kernels(CpuIsa::Generic)};
  if (detected_isa() >= CpuIsa::Avx2) sets.push_back(&gemm_kernels(CpuIsa::Avx2));
  if (detected_isa() >= CpuIsa::Avx512) sets.push_back(&gemm_kernels(CpuIsa::Avx512));
  const std::int64_t k = 300;
  const int threads_before = num_threads();
  for (std::int64_t m : {301, 256})
    for (std::int64_t n : {130, 64}) {
      const std::vector<float> a_t = random_values(k * m, 11 + m), b = random_values(k * n, 12 + n);  // A stored [k, m]
      std::vector<float> a(static_cast<std::size_t>(m * k));  // the same A, stored [m, k]
      for (std::int64_t p = 0; p < k; ++p)
        for (std::int64_t i = 0; i < m; ++i) a[static_cast<std::size_t>(i * k + p)] = a_t[static_cast<std::size_t>(p * m + i)];
      for (const GemmKernels* kernels : sets) {
        INFO(isa_name(kernels->isa), " m=", m, " n=", n);
        std::vector<float> read(static_cast<std::size_t>(m * n)), packed = read, packed_3 = read;
        gemm_f32(*kernels, a.data(), b.data(), read.data(), m, k, n, false, false);
        set_num_threads(1);
        gemm_f32(*kernels, a_t.data(), b.data(), packed.data(), m, k, n, true, false);
        set_num_threads(3);
        gemm_f32(*kernels, a_t.data(), b.data(), packed_3.data(), m, k, n, true, false);
        set_num_threads(threads_before);
        CHECK(bitwise_equal(packed, read));
        CHECK(bitwise_equal(packed_3, read));
      }
    }
}
