// core/cpu/cache_line_allocator.h — a std::vector allocator whose blocks start on a cache line.
//
// The GEMMs' packing buffers are read by whole-vector and whole-tile loads: a 64-byte zmm load or
// an AMX tile row of 64 bytes. malloc (and new) only promise 16-byte alignment, and a 64-byte load
// from an address that is not a multiple of 64 touches two cache lines. For AMX that halved the
// speed of the bf16 product's inner block (0.9 against 1.6 TFLOP/s, the same code and data, the
// packed B 16 or 32 bytes off a line: which one was the luck of the heap). Tensors' own storage is
// 64-byte aligned already (core/cpu/memory.cpp); this is for the scratch vectors.
//
//   std::vector<float, CacheLineAllocator<float>> panel(n);   // panel.data() % 64 == 0
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace moelab::cpu {

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::size_t kLine = 64;

  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}

  T* allocate(std::size_t count) {
    const std::size_t bytes = (count * sizeof(T) + kLine - 1) / kLine * kLine;  // aligned_alloc wants a multiple
    void* p = std::aligned_alloc(kLine, bytes == 0 ? kLine : bytes);
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
