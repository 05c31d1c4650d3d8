// cuda/random_fill.cu — random fills generated on the GPU from a moelab::Generator's state
// (mirrors core/cpu/random_fill.cpp).
//
//   fill_uniform: x[i] = low + (high - low) * u_i,   u_i from word c + i
//   fill_normal:  x[i] = mean + std * z_i,           z_i from words c + 2i, c + 2i + 1
// where c is the Generator's counter (words drawn so far); afterwards the counter is c + numel
// (uniform) or c + 2 * numel (normal), so the stream never repeats.
//
// Which random words. moelab::Generator (core/random.h) is Philox4x32-10 keyed by the seed:
// word w is element w % 4 of philox(counter = {w / 4 low, w / 4 high, 0, 0}, key = {seed low,
// seed high}). Each GPU thread evaluates exactly that for the words of its element (ten rounds of
// 32-bit multiplies, cheap next to the memory write), so the GPU draws *the same words* the CPU
// would, and turns them into numbers with the same formulas:
//   uniform in [0, 1):  (word >> 8) * 2^-24                       (24 random bits, exact)
//   normal:             sqrt(-2 log(1 - u1)) * cos(2 pi u2)       (Box-Muller, in double)
// So a CUDA fill equals the CPU fill (and the factories) up to the last bits of the double
// maths (CUDA's log/cos are within 1-2 ulp of glibc's; the uniform's multiply-add is done without
// FMA contraction), which after rounding to float32 almost always gives identical values.
//
// Why not curandGenerateUniform/Normal. cuRAND's host API runs its own Philox streams with an
// internal layout of threads and offsets, and returns uniforms in (0, 1] and normals in pairs
// (curandGenerateNormal needs an even count): its numbers would match neither the CPU fill nor
// the factories, and carrying the Generator's (seed, counter) over needs cuRAND's offset
// conventions. Evaluating Philox directly is as fast, needs no scratch for odd sizes, and keeps
// "the same seed gives the same numbers on every device". (The cuRAND handle in cuda/context.h
// remains for code that wants cuRAND's distributions.)
#include "core/random.h"
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_utils.cuh"

namespace moelab {
namespace {

// Philox4x32-10: word `w` of the stream keyed by `seed` (core/random.cpp, word for word).
// __host__ too, so that the transcription can be checked against core/random.cpp on a machine
// without a GPU (the 64-bit product's high half compiles to one mul.hi on the device).
__host__ __device__ inline std::uint32_t philox_word(std::uint64_t seed, std::uint64_t w) {
  const std::uint64_t block = w >> 2;
  std::uint32_t c0 = static_cast<std::uint32_t>(block), c1 = static_cast<std::uint32_t>(block >> 32), c2 = 0, c3 = 0;
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c0, p1 = static_cast<std::uint64_t>(kMul1) * c2;
    const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    const std::uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  switch (w & 3) {
    case 0: return c0;
    case 1: return c1;
    case 2: return c2;
    default: return c3;
  }
}

// Generator::next_uniform: 24 random bits in [0, 1).
__device__ double uniform_of(std::uint32_t word) { return static_cast<double>(word >> 8) * (1.0 / 16777216.0); }

template <class T>
__global__ void uniform_kernel(T* x, std::int64_t n, std::uint64_t seed, std::uint64_t counter, double low,
                               double range) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const double u = uniform_of(philox_word(seed, counter + static_cast<std::uint64_t>(i)));
    x[i] = static_cast<T>(__dadd_rn(low, __dmul_rn(range, u)));  // low + range * u, unfused
  }
}

template <class T>
__global__ void normal_kernel(T* x, std::int64_t n, std::uint64_t seed, std::uint64_t counter, double mean,
                              double std) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;  // 2 * M_PI as the CPU rounds it
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t w = counter + 2 * static_cast<std::uint64_t>(i);
    const double u1 = 1.0 - uniform_of(philox_word(seed, w));  // in (0, 1]: log(u1) is finite
    const double u2 = uniform_of(philox_word(seed, w + 1));
    const double z = ::sqrt(-2.0 * ::log(u1)) * ::cos(__dmul_rn(kTwoPi, u2));
    x[i] = static_cast<T>(__dadd_rn(mean, __dmul_rn(std, z)));
  }
}

}  // namespace

void CudaBackend::fill_uniform(Tensor& x, double low, double high, Generator& gen) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  dispatch_float(x.dtype(), [&]<class T>() {
    uniform_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(x.data<T>(), n, gen.seed(),
                                                                                  gen.counter(), low, high - low);
    MOELAB_CUDA_CHECK_LAUNCH();
  });
  gen.set_state(gen.seed(), gen.counter() + static_cast<std::uint64_t>(n));
}

void CudaBackend::fill_normal(Tensor& x, double mean, double std, Generator& gen) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  dispatch_float(x.dtype(), [&]<class T>() {
    normal_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(x.data<T>(), n, gen.seed(),
                                                                                 gen.counter(), mean, std);
    MOELAB_CUDA_CHECK_LAUNCH();
  });
  gen.set_state(gen.seed(), gen.counter() + 2 * static_cast<std::uint64_t>(n));
}

}  // namespace moelab
