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
#include "core/cpu/thread_count.h"

namespace moelab::cpu {

inline constexpr std::int64_t kChunk = 16384;

// Calls body(begin, end) for consecutive chunks of `chunk` elements covering [0, n) (the last may
// be shorter), in parallel when n is large.
template <class Body>
void for_chunks(std::int64_t n, std::int64_t chunk, const Body& body) {
  const std::int64_t chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) num_threads(element_threads(n)) if (element_threads(n) > 1 && chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) body(c * chunk, std::min(n, (c + 1) * chunk));
}

// The same with chunks of kChunk elements.
template <class Body>
void for_chunks(std::int64_t n, const Body& body) {
  for_chunks(n, kChunk, body);
}

}  // namespace moelab::cpu
