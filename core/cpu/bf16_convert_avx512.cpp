// core/cpu/bf16_convert_avx512.cpp — float32 -> bfloat16 on VCVTNE2PS2BF16 (what and why:
// core/cpu/bf16_convert.h).
//
// Compiled with -mavx512f -mavx512dq -mavx512bw -mavx512bf16 (CMakeLists.txt) and called only where
// the CPU has AVX512_BF16. For each 32 floats: two loads, VFPCLASSPS asks whether any is a NaN or
// subnormal (the two inputs on which the instruction and BFloat16::from_float differ), and if none
// is, one VCVTNE2PS2BF16 and one store; a block with such a value, and the last n % 32 values, go
// through from_float one at a time.
#include <immintrin.h>

#include "core/cpu/bf16_convert.h"

namespace moelab::cpu::bf16_convert_detail {

void avx512_float_to_bfloat16(const float* in, std::uint16_t* out, std::int64_t n) {
  constexpr int kNanOrSubnormal = 0x01 | 0x20 | 0x80;  // VFPCLASSPS: quiet NaN, subnormal, signalling NaN
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 low = _mm512_loadu_ps(in + i), high = _mm512_loadu_ps(in + i + 16);
    if (_mm512_fpclass_ps_mask(low, kNanOrSubnormal) | _mm512_fpclass_ps_mask(high, kNanOrSubnormal)) {
      for (int j = 0; j < 32; ++j) out[i + j] = BFloat16::from_float(in[i + j]).bits;
      continue;
    }
    // The first operand fills the upper 16 results, the second the lower 16.
    _mm512_storeu_si512(out + i, (__m512i)_mm512_cvtne2ps_pbh(high, low));
  }
  for (; i < n; ++i) out[i] = BFloat16::from_float(in[i]).bits;
}

}  // namespace moelab::cpu::bf16_convert_detail
