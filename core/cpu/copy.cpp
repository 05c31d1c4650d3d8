// core/cpu/copy.cpp — fill, arange and dtype conversion on the host.
//
// Conversions to bfloat16 round to nearest, ties to even, from the value as a float32
// (core/bfloat16.h); from bfloat16 they widen exactly to float32 first. A float64 -> bfloat16
// cast therefore rounds twice (to float32, then to bfloat16), as PyTorch's does. float32 ->
// bfloat16, the bf16 policy's conversion of every product operand, takes VCVTNE2PS2BF16 where the
// CPU has it (core/cpu/bf16_convert.h: the same bits).
#include <algorithm>

#include "core/cpu/bf16_convert.h"
#include "core/cpu/chunks.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/gemm_bf16.h"
#include "core/dtype_dispatch.h"

namespace moelab {

void CpuBackend::fill(Tensor& x, double value) {
  if (x.dtype() == DType::BFloat16) {
    std::fill_n(x.data<BFloat16>(), x.numel(), BFloat16::from_float(static_cast<float>(value)));
    return;
  }
  dispatch_all(x.dtype(), [&]<class T>() { std::fill_n(x.data<T>(), x.numel(), static_cast<T>(value)); });
}

void CpuBackend::arange(Tensor& x, double start, double step) {
  dispatch_all(x.dtype(), [&]<class T>() {
    T* p = x.data<T>();
    for (std::int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<T>(start + step * static_cast<double>(i));
  });
}

void CpuBackend::cast(const Tensor& x, Tensor& out) {
  const std::int64_t n = x.numel();
  if (x.dtype() == DType::BFloat16 && out.dtype() == DType::BFloat16) {
    std::copy_n(x.data<BFloat16>(), n, out.data<BFloat16>());
  } else if (x.dtype() == DType::Float32 && out.dtype() == DType::BFloat16) {
    const float* src = x.data<float>();
    BFloat16* dst = out.data<BFloat16>();
    cpu::for_chunks(n, [&](std::int64_t begin, std::int64_t end) {
      cpu::float_to_bfloat16_bits(src + begin, dst + begin, end - begin);
    });
  } else if (out.dtype() == DType::BFloat16) {  // via float32
    dispatch_all(x.dtype(), [&]<class From>() {
      const From* src = x.data<From>();
      BFloat16* dst = out.data<BFloat16>();
      for (std::int64_t i = 0; i < n; ++i) dst[i] = BFloat16::from_float(static_cast<float>(src[i]));
    });
  } else if (x.dtype() == DType::BFloat16) {  // widen exactly, then as from float32
    dispatch_all(out.dtype(), [&]<class To>() {
      const BFloat16* src = x.data<BFloat16>();
      To* dst = out.data<To>();
      for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<To>(src[i].to_float());
    });
  } else {
    dispatch_all(x.dtype(), [&]<class From>() {
      dispatch_all(out.dtype(), [&]<class To>() {
        const From* src = x.data<From>();
        To* dst = out.data<To>();
        for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<To>(src[i]);
      });
    });
  }
}

namespace cpu {

void float_to_bfloat16_bits(const float* in, BFloat16* out, std::int64_t n) {
#if defined(__x86_64__)
  if (cpu_has_avx512_bf16())
    return bf16_convert_detail::avx512_float_to_bfloat16(in, reinterpret_cast<std::uint16_t*>(out), n);
#endif
  for (std::int64_t i = 0; i < n; ++i) out[i] = BFloat16::from_float(in[i]);
}

}  // namespace cpu

}  // namespace moelab
