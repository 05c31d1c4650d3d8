// core/cpu/random_fill.cpp — random fills on the host, drawn from a Generator in row-major order.
//
//   fill_uniform: x[i] = low + (high - low) * gen.next_uniform()     (1 word per element)
//   fill_normal:  x[i] = mean + std * gen.next_normal()              (2 words per element)
// computed in double and rounded to the tensor's dtype: the very expressions of the factories
// uniform() / normal() (core/factories.cpp), so a fill and a factory with the same generator
// state give the same tensor. One thread: the Generator is a sequential stream (parallel
// drawing would be possible, Philox being counter-based, but initialisation is not a hot path).
#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"
#include "core/random.h"

namespace moelab {

void CpuBackend::fill_uniform(Tensor& x, double low, double high, Generator& gen) {
  dispatch_float(x.dtype(), [&]<class T>() {
    T* p = x.data<T>();
    for (std::int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<T>(low + (high - low) * gen.next_uniform());
  });
}

void CpuBackend::fill_normal(Tensor& x, double mean, double std, Generator& gen) {
  dispatch_float(x.dtype(), [&]<class T>() {
    T* p = x.data<T>();
    for (std::int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<T>(mean + std * gen.next_normal());
  });
}

}  // namespace moelab
