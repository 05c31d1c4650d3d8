// tests/test_bfloat16.cpp — bfloat16 conversions (core/bfloat16.h) against a reference written
// from the definition rather than from bit tricks:
//   - widening is exact: every one of the 65,536 bfloat16 patterns widens to a float whose high
//     half is the pattern and whose low half is 0, and narrows back to itself (NaNs to 0x7FC0)
//   - narrowing is round to nearest, ties to even: for float32 patterns sampled across the whole
//     range (every 97th of the 2^32, plus every pattern near 1.0, near the largest finite value and
//     among the subnormals), the result is the nearer of the two bfloat16 neighbours found by
//     exact comparisons in double, the even one on a tie, and infinity past the largest finite
//     value by half a step or more
//   - named cases: 1 + 2^-8 (a tie: down to 1), 1 + 3 * 2^-8 (a tie: up to 1 + 2^-6), the largest
//     finite float (to infinity), -0, infinities, NaNs of either sign and any payload (0x7FC0)
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <ios>
#include <limits>

#include "core/bfloat16.h"

using namespace moelab;

namespace {

float float_of_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

std::uint32_t bits_of_float(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// The bfloat16 nearest to x (finite, not NaN) by the definition: of the two bfloat16 values that
// bracket x (truncation toward zero and the next one away from zero), the nearer one by exact
// differences in double (both and x are floats, so the differences are exact), the even one on a
// tie; a value at or past the midpoint between the largest finite bfloat16 and 2^128 is infinity.
std::uint16_t reference_round(float x) {
  const std::uint32_t b = bits_of_float(x);
  const std::uint16_t toward_zero = static_cast<std::uint16_t>(b >> 16);
  if ((b & 0xFFFFu) == 0) return toward_zero;  // exactly representable
  const std::uint16_t away = static_cast<std::uint16_t>(toward_zero + 1);  // next magnitude, same sign
  const double lo = BFloat16::from_bits(toward_zero).to_float();
  // The next magnitude past the largest finite one is infinity; measure against 2^128 instead.
  const bool away_is_inf = (away & 0x7FFFu) == 0x7F80u;
  const double hi = away_is_inf ? std::copysign(std::ldexp(1.0, 128), static_cast<double>(x))
                                : static_cast<double>(BFloat16::from_bits(away).to_float());
  const double d_lo = std::fabs(static_cast<double>(x) - lo), d_hi = std::fabs(hi - static_cast<double>(x));
  if (d_lo < d_hi) return toward_zero;
  if (d_hi < d_lo) return away;
  return (toward_zero & 1u) == 0 ? toward_zero : away;  // a tie: the even mantissa
}

void check_pattern(std::uint32_t b) {
  const float x = float_of_bits(b);
  const std::uint16_t got = BFloat16::from_float(x).bits;
  if (std::isnan(x)) {
    CHECK(got == 0x7FC0u);
  } else if (got != reference_round(x)) {
    FAIL_CHECK("float bits 0x" << std::hex << b << " -> 0x" << got << ", the reference says 0x" << reference_round(x));
  }
}

}  // namespace

TEST_CASE("bfloat16 widens exactly and narrows back to itself") {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = BFloat16::from_bits(static_cast<std::uint16_t>(h)).to_float();
    REQUIRE(bits_of_float(f) == (h << 16));
    const std::uint16_t back = BFloat16::from_float(f).bits;
    if (std::isnan(f))
      CHECK(back == 0x7FC0u);
    else
      CHECK(back == h);
  }
}

TEST_CASE("bfloat16 narrowing rounds to nearest, ties to even, across the float32 range") {
  std::uint64_t checked = 0;
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 97, ++checked) check_pattern(static_cast<std::uint32_t>(b));
  // Every pattern near 1.0, near the largest finite float and among the smallest subnormals, both signs.
  for (const std::uint32_t centre : {bits_of_float(1.0f), bits_of_float(std::numeric_limits<float>::max()), 0x00010000u})
    for (std::int64_t d = -0x18000; d < 0x18000; ++d) {
      const std::int64_t b = static_cast<std::int64_t>(centre) + d;
      if (b < 0 || b > 0x7FFFFFFF) continue;  // the magnitudes only; the sign is added below
      for (const std::uint32_t sign : {0u, 0x80000000u}) check_pattern(static_cast<std::uint32_t>(b) | sign), ++checked;
    }
  CHECK(checked > 44000000);
}

TEST_CASE("bfloat16: the named cases") {
  const auto round = [](float x) { return BFloat16::from_float(x).bits; };
  CHECK(round(1.0f) == 0x3F80u);
  CHECK(round(1.0f + 0x1p-8f) == 0x3F80u);            // halfway between 1 and 1 + 2^-7: to even (1)
  CHECK(round(1.0f + 3 * 0x1p-8f) == 0x3F82u);        // halfway between 1 + 2^-7 and 1 + 2^-6: to even
  CHECK(round(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81u); // just past halfway: up
  CHECK(round(1.99609375f) == 0x4000u);               // mantissa overflow carries into the exponent: 2
  CHECK(round(0.1f) == 0x3DCDu);
  CHECK(BFloat16::from_bits(0x3DCDu).to_float() == 0.10009765625f);
  CHECK(round(std::numeric_limits<float>::max()) == 0x7F80u);  // rounds past the largest bfloat16: inf
  CHECK(round(-std::numeric_limits<float>::max()) == 0xFF80u);
  CHECK(round(std::numeric_limits<float>::infinity()) == 0x7F80u);
  CHECK(round(-std::numeric_limits<float>::infinity()) == 0xFF80u);
  CHECK(round(-0.0f) == 0x8000u);
  CHECK(round(std::numeric_limits<float>::denorm_min()) == 0x0000u);  // far below half a bf16 step
  CHECK(round(float_of_bits(0x7F800001u)) == 0x7FC0u);  // a NaN whose rounding would carry to infinity
  CHECK(round(float_of_bits(0xFFFFFFFFu)) == 0x7FC0u);
  CHECK(round(-std::numeric_limits<float>::quiet_NaN()) == 0x7FC0u);
  float in[3] = {1.0f, 0.1f, -2.5f}, out[3];
  BFloat16 mid[3];
  float_to_bfloat16(in, mid, 3);
  bfloat16_to_float(mid, out, 3);
  CHECK(out[0] == 1.0f);
  CHECK(out[1] == 0.10009765625f);
  CHECK(out[2] == -2.5f);
}
