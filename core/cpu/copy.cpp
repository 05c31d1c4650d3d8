// core/cpu/copy.cpp — fill, arange and dtype conversion on the host.
#include <algorithm>

#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"

namespace moelab {

void CpuBackend::fill(Tensor& x, double value) {
  dispatch_all(x.dtype(), [&]<class T>() { std::fill_n(x.data<T>(), x.numel(), static_cast<T>(value)); });
}

void CpuBackend::arange(Tensor& x, double start, double step) {
  dispatch_all(x.dtype(), [&]<class T>() {
    T* p = x.data<T>();
    for (std::int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<T>(start + step * static_cast<double>(i));
  });
}

void CpuBackend::cast(const Tensor& x, Tensor& out) {
  dispatch_all(x.dtype(), [&]<class From>() {
    dispatch_all(out.dtype(), [&]<class To>() {
      const From* src = x.data<From>();
      To* dst = out.data<To>();
      for (std::int64_t i = 0; i < x.numel(); ++i) dst[i] = static_cast<To>(src[i]);
    });
  });
}

}  // namespace moelab
