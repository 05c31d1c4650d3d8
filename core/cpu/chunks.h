// core/cpu/chunks.h — split a flat loop into fixed-size chunks and run them on OpenMP threads.
//
// The chunk size is fixed (not n / threads), so which elements a chunk holds never depends on
// the number of threads, and a multiple of every SIMD width, so every chunk but the last starts
// on a vector boundary. Loops whose elements are independent (elementwise ops, optimizer updates)
// therefore give bitwise the same result on any thread count.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cpu/accumulate.h"

namespace moelab::cpu {

inline constexpr std::int64_t kChunk = 16384;

// Calls body(begin, end) for consecutive chunks covering [0, n), in parallel when n is large.
template <class Body>
void for_chunks(std::int64_t n, const Body& body) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMinElements)
  for (std::int64_t c = 0; c < chunks; ++c) body(c * kChunk, std::min(n, (c + 1) * kChunk));
}

}  // namespace moelab::cpu
