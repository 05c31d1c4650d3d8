// core/cpu/memory.cpp — host memory: 64-byte aligned allocations and plain memcpy.
//
// Keeping freed memory. glibc serves blocks above its mmap threshold (128 KiB by default, then
// adapting) with a fresh mmap and gives them back with munmap on free, and trims the heap's top
// when more than 128 KiB is free there. A training step frees and reallocates the same
// activations every step, so each step then faults its large tensors in again page by page: a
// Soft MoE MNIST training step spent 21% of its time in the kernel's page-fault handler. Raising
// both thresholds once (the mmap one to glibc's maximum, 32 MiB) keeps freed blocks in the heap
// for the next step: 18.5 s -> 14.3 s for 1000 steps of that model on one thread. The process
// keeps its peak heap instead of returning it, as PyTorch's caching allocators do on the GPU.
#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/cpu/cache_line_allocator.h"
#include "core/cpu/cpu_backend.h"

namespace moelab {

Backend& cpu_backend() {
  // Never destroyed: a Tensor in static storage (a program's global, a function-local static) is
  // destroyed at exit in an order no one controls, and its Storage frees through this backend. A
  // static object here could be gone by then (UBSan reported an invalid vptr at exit in
  // trace_step); a leaked one cannot, and the OS takes its memory back anyway.
  static CpuBackend* const instance = new CpuBackend();
  return *instance;
}

namespace {

bool keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
  return true;
}

}  // namespace

void* CpuBackend::allocate(std::size_t bytes) {
  static const bool tuned = keep_freed_memory();  // once, before the first allocation
  (void)tuned;
  void* p = cpu::allocate_cache_lines(bytes);  // 64-byte aligned
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
