// core/bfloat16.h — bfloat16, the 16-bit float of mixed-precision training, and its conversions.
//
// A bfloat16 is the top half of a float32: 1 sign bit, the same 8 exponent bits (so the same range,
// 1e-38 to 3e38, and the same infinities), and 7 of float32's 23 mantissa bits (about 2-3 decimal
// digits: the spacing of values near 1 is 2^-7 = 0.0078).
//
//   float32   s eeeeeeee mmmmmmm mmmmmmmmmmmmmmmm
//   bfloat16  s eeeeeeee mmmmmmm                      = the float32's high 16 bits, rounded
//
// Widening is exact (append 16 zero bits). Narrowing rounds to nearest, ties to even, as PyTorch's
// `.to(torch.bfloat16)`, the CPU's VCVTNEPS2BF16 and CUDA's __float2bfloat16 do: add 0x7FFF plus the
// lowest kept bit to the float's bits, then drop the low 16. The sum carries into the exponent when
// the mantissa overflows, which is right (1.99609375 rounds up to 2.0), and a finite value that
// rounds past the largest bfloat16 becomes infinity, as IEEE rounding says. Every NaN becomes
// 0x7FC0, the quiet NaN PyTorch's scalar c10::BFloat16 gives (sign and payload dropped; its
// vectorised CPU conversion gives 0xFFFF, another quiet NaN), never an infinity, which the
// rounding add could otherwise make of a NaN with a small payload. Subnormal floats round like
// any other (bfloat16 has the same subnormals, with fewer mantissa bits).
//
//   BFloat16 h = BFloat16::from_float(0.1f);   // bits 0x3DCD: 0.10009765625
//   float back = h.to_float();                 // 0.10009765625f exactly
//
// The mixed-precision policy (issue tracker: "Mixed precision on both devices") stores bf16 copies
// of weights and activations for the matrix products and accumulates in float32; this header is
// the number type those copies are made of.
#pragma once

#include <cstdint>
#include <cstring>

namespace moelab {

struct BFloat16 {
  std::uint16_t bits = 0;

  static BFloat16 from_bits(std::uint16_t b) { return BFloat16{b}; }

  // Round to nearest, ties to even (see above).
  static BFloat16 from_float(float value) {
    std::uint32_t f;
    std::memcpy(&f, &value, sizeof f);
    if ((f & 0x7FFFFFFFu) > 0x7F800000u) return BFloat16{0x7FC0u};  // NaN
    const std::uint32_t lowest_kept = (f >> 16) & 1u;
    return BFloat16{static_cast<std::uint16_t>((f + 0x7FFFu + lowest_kept) >> 16)};
  }

  // Exact: the bits as a float32's high half.
  float to_float() const {
    const std::uint32_t f = static_cast<std::uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &f, sizeof value);
    return value;
  }
};

// Elementwise conversions of n values (round to nearest even; exact).
inline void float_to_bfloat16(const float* in, BFloat16* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = BFloat16::from_float(in[i]);
}
inline void bfloat16_to_float(const BFloat16* in, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = in[i].to_float();
}

}  // namespace moelab
