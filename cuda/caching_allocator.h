// cuda/caching_allocator.h — device memory for tensors without a cudaMalloc/cudaFree per op.
//
// cudaMalloc and cudaFree are slow (tens to hundreds of microseconds) and cudaFree synchronises
// the whole device, so an engine that allocated every temporary with them would spend its time
// there. Instead freed blocks go back into a cache, keyed by size, and the next request of that
// size takes one from the cache. In steady state (a training loop allocating the same shapes
// every step) no cudaMalloc or cudaFree happens at all.
//
// Block sizes. A request is rounded up to its size class:
//   small (<= 1 MiB):  a multiple of 512 bytes (so 512 B is the smallest block)
//   large (>  1 MiB):  a multiple of 2 MiB
// A request is served by a cached block of exactly its class when there is one; a large request
// also accepts the smallest cached large block of at most 1.25x its class, so a slightly smaller
// tensor reuses a freed bigger one instead of growing the cache. Blocks are never split or merged
// (simple, and enough for an engine whose shapes repeat).
//
// Why reuse needs no events. Every kernel, cuBLAS call and copy runs on the one stream of
// cuda/context.h, in the order the host enqueues them. When the host frees a tensor, kernels
// that read it may still be queued; its block goes back to the cache at once. Whoever gets that
// block next can only use it from work enqueued later on the same stream, which the GPU runs
// after the earlier readers have finished. So stream order alone makes reuse safe. (A second
// stream would break this: a block freed by work on one stream and reused on another would need
// a cudaEvent recorded at free time and waited on before reuse. moelab has one stream.)
// Host-side reads of device memory (copy_to_host) synchronise the stream first.
//
// Out of memory. When cudaMalloc fails, every cached block is released (cudaFree) and the
// allocation is retried once; if it fails again, moelab::Error reports the requested size and
// the bytes in use and cached.
//
// Thread safety: one mutex guards the lists; any thread may allocate and free.
// The allocator is never destroyed (see cuda/context.cu for why): cached blocks stay mapped
// until the process exits, when the driver reclaims them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace moelab::cuda {

struct AllocatorStats {
  std::size_t bytes_in_use = 0;      // block bytes currently handed out (rounded sizes)
  std::size_t bytes_requested = 0;   // what callers asked for, for blocks handed out
  std::size_t bytes_cached = 0;      // block bytes sitting in the free lists
  std::size_t peak_bytes_in_use = 0; // the high-water mark of bytes_in_use
  std::int64_t cuda_malloc_calls = 0;
  std::int64_t cuda_free_calls = 0;
  std::int64_t cache_hits = 0;       // allocations served from the cache
};

class CachingAllocator {
 public:
  static CachingAllocator& instance();

  void* allocate(std::size_t bytes);   // never nullptr; throws moelab::Error when out of memory
  void deallocate(void* ptr);          // back into the cache; nullptr is ignored
  void empty_cache();                  // cudaFree every cached block (blocks in use stay)
  AllocatorStats stats() const;

  // The block size a request of `bytes` is rounded up to.
  static std::size_t round_size(std::size_t bytes);

 private:
  CachingAllocator() = default;
  void release_cached_locked();  // the mutex is held

  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> free_blocks_;  // block size -> cached block
  struct Block {
    std::size_t size;       // rounded block size
    std::size_t requested;  // what the caller asked for
  };
  std::unordered_map<void*, Block> in_use_;
  AllocatorStats stats_;
};

// Convenience wrappers over CachingAllocator::instance(), for tests and benchmarks.
AllocatorStats allocator_stats();
void empty_cache();

// A scratch buffer of `count` elements of T for the duration of one op (reduction partials and
// the like). Released at scope exit straight back to the cache; safe even while kernels using it
// are still queued, by the stream-order argument above.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count)
      : ptr_(static_cast<T*>(CachingAllocator::instance().allocate(count * sizeof(T)))) {}
  ~DeviceBuffer() { CachingAllocator::instance().deallocate(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return ptr_; }

 private:
  T* ptr_;
};

}  // namespace moelab::cuda
