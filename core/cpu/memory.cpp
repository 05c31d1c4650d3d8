// core/cpu/memory.cpp — host memory: 64-byte aligned allocations and plain memcpy.
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/cpu/cpu_backend.h"

namespace moelab {

Backend& cpu_backend() {
  static CpuBackend instance;
  return instance;
}

void* CpuBackend::allocate(std::size_t bytes) {
  constexpr std::size_t kAlign = 64;
  const std::size_t rounded = ((bytes + kAlign - 1) / kAlign) * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (!p) fail("allocate", "out of host memory allocating ", bytes, " bytes");
  return p;
}

void CpuBackend::deallocate(void* ptr, std::size_t) { std::free(ptr); }

void CpuBackend::copy_from_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
void CpuBackend::copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
void CpuBackend::copy_on_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

}  // namespace moelab
