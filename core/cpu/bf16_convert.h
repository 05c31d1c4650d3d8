// core/cpu/bf16_convert.h — float32 -> bfloat16 for many values at once: the bits of
// BFloat16::from_float (core/bfloat16.h), faster.
//
// Under the bf16 policy every product's operands are converted each step (autograd/precision.h),
// and the element-by-element loop (integer round to nearest even, a NaN check) took 7% of the bf16
// training step. CPUs with AVX512_BF16 have an instruction for it, VCVTNE2PS2BF16: 32 floats to 32
// bfloat16 values, round to nearest even. It differs from from_float in two places only, which
// the vector loop leaves to from_float: a subnormal input reads as zero (from_float rounds it, and
// the largest ones round up to the smallest normal bfloat16), and a NaN keeps its sign and payload
// (from_float returns the one quiet NaN 0x7FC0). Every other input, infinities and overflow to
// infinity included, gets the same bits, so the cast's result never depends on the CPU.
#pragma once

#include <cstdint>

#include "core/bfloat16.h"

namespace moelab::cpu {

// out[i] = BFloat16::from_float(in[i]) for i < n: VCVTNE2PS2BF16 where the CPU has AVX512_BF16
// (core/cpu/gemm_bf16.h's cpu_has_avx512_bf16), the portable loop elsewhere.
void float_to_bfloat16_bits(const float* in, BFloat16* out, std::int64_t n);

namespace bf16_convert_detail {
// The vector loop (core/cpu/bf16_convert_avx512.cpp, x86-64 builds; only where the CPU has it).
void avx512_float_to_bfloat16(const float* in, std::uint16_t* out, std::int64_t n);
}  // namespace bf16_convert_detail

}  // namespace moelab::cpu
