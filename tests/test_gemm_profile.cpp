// tests/test_gemm_profile.cpp — the per-shape product profile (core/cpu/gemm_profile.h): off, it
// records nothing; on, every float32 product the CPU GEMM runs is counted once under its shape,
// on whichever path (the small-product loop, the blocked path, a strided block) and from whichever
// thread, and the table comes back largest total first.
#include <doctest/doctest.h>

#include <omp.h>

#include <vector>

#include "core/cpu/gemm_f32.h"
#include "core/cpu/gemm_profile.h"

using namespace moelab::cpu;

namespace {

const GemmShapeTime* find(const std::vector<GemmShapeTime>& rows, std::int64_t m, std::int64_t k, std::int64_t n) {
  for (const GemmShapeTime& r : rows)
    if (r.m == m && r.k == k && r.n == n) return &r;
  return nullptr;
}

// Leaves the profile off and empty whatever a test did.
struct ProfileOff {
  ~ProfileOff() {
    set_gemm_profiling(false);
    clear_gemm_profile();
  }
};

}  // namespace

TEST_CASE("the GEMM profile counts each product once under its shape, and nothing while off") {
  const ProfileOff restore;
  std::vector<float> a(300 * 64, 0.5f), b(300 * 64, 0.25f), c(300 * 64);
  clear_gemm_profile();
  REQUIRE_FALSE(gemm_profiling());
  gemm_f32(a.data(), b.data(), c.data(), 40, 300, 50, false, true);
  CHECK(gemm_profile().empty());

  set_gemm_profiling(true);
  CHECK(gemm_profiling());
  for (int i = 0; i < 3; ++i) gemm_f32(a.data(), b.data(), c.data(), 5, 7, 9, false, false);  // the small loop
  for (int i = 0; i < 2; ++i) gemm_f32(a.data(), b.data(), c.data(), 40, 300, 50, false, true);  // blocked
  gemm_f32(a.data(), b.data(), c.data(), 30, 20, 10, true, false);                             // small, A^T
  // A [6, 8] block of a [6, 64] matrix (lda 64): strided.
  gemm_f32_strided(a.data(), 64, b.data(), 16, c.data(), 16, 6, 8, 16, false, false);
  // The same shape contiguous is a separate row.
  gemm_f32_strided(a.data(), 8, b.data(), 16, c.data(), 16, 6, 8, 16, false, false);
  set_gemm_profiling(false);
  gemm_f32(a.data(), b.data(), c.data(), 5, 7, 9, false, false);  // off again: not counted

  const std::vector<GemmShapeTime> rows = gemm_profile();
  REQUIRE(rows.size() == 5);
  for (std::size_t i = 1; i < rows.size(); ++i) CHECK(rows[i - 1].seconds >= rows[i].seconds);
  for (const GemmShapeTime& r : rows) CHECK(r.seconds > 0);

  const GemmShapeTime* small = find(rows, 5, 7, 9);
  REQUIRE(small != nullptr);
  CHECK(small->calls == 3);
  CHECK_FALSE(small->trans_a);
  CHECK(small->flops() == doctest::Approx(3 * 2.0 * 5 * 7 * 9));
  const GemmShapeTime* blocked = find(rows, 40, 300, 50);
  REQUIRE(blocked != nullptr);
  CHECK(blocked->calls == 2);
  CHECK(blocked->trans_b);
  CHECK_FALSE(blocked->strided);
  const GemmShapeTime* transposed = find(rows, 30, 20, 10);
  REQUIRE(transposed != nullptr);
  CHECK(transposed->trans_a);
  CHECK(transposed->calls == 1);
  int strided = 0, contiguous = 0;
  for (const GemmShapeTime& r : rows)
    if (r.m == 6 && r.k == 8 && r.n == 16) (r.strided ? strided : contiguous) += static_cast<int>(r.calls);
  CHECK(strided == 1);
  CHECK(contiguous == 1);

  clear_gemm_profile();
  CHECK(gemm_profile().empty());
}

TEST_CASE("products run from several threads at once are all counted") {
  const ProfileOff restore;
  clear_gemm_profile();
  set_gemm_profiling(true);
  const int per_thread = 50;
#pragma omp parallel num_threads(4)
  {
    std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64);
    for (int i = 0; i < per_thread; ++i) gemm_f32(a.data(), b.data(), c.data(), 4, 4, 4, false, false);
  }
  set_gemm_profiling(false);
  const std::vector<GemmShapeTime> rows = gemm_profile();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].calls == 4 * per_thread);
}
