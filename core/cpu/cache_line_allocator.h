// core/cpu/cache_line_allocator.h — a std::vector allocator whose blocks start on a cache line.
//
// The GEMMs' packing buffers are read by whole-vector and whole-tile loads: a 64-byte zmm load or
// an AMX tile row of 64 bytes. malloc (and new) only promise 16-byte alignment, and a 64-byte load
// from an address that is not a multiple of 64 touches two cache lines. For AMX that halved the
// speed of the bf16 product's inner block (0.9 against 1.6 TFLOP/s, the same code and data, the
// packed B 16 or 32 bytes off a line: which one was the luck of the heap). Tensors' own storage is
// 64-byte aligned too (core/cpu/memory.cpp takes its blocks from allocate_cache_lines below); the
// allocator is for the scratch vectors.
//
//   std::vector<float, CacheLineAllocator<float>> panel(n);   // panel.data() % 64 == 0
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace moelab::cpu {

constexpr std::size_t kCacheLine = 64;

// `bytes` (rounded up to whole lines, as aligned_alloc wants; 0 takes one line) starting on a
// cache line, or nullptr when memory is out; std::free gives it back. Tensors' storage
// (core/cpu/memory.cpp) and the allocator below both take their blocks here.
inline void* allocate_cache_lines(std::size_t bytes) {
  const std::size_t rounded = (bytes + kCacheLine - 1) / kCacheLine * kCacheLine;
  return std::aligned_alloc(kCacheLine, rounded == 0 ? kCacheLine : rounded);
}

template <class T>
struct CacheLineAllocator {
  using value_type = T;

  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}

  T* allocate(std::size_t count) {
    void* p = allocate_cache_lines(count * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }

  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};

}  // namespace moelab::cpu
