// cuda/caching_allocator.cu — the size-class cache of device blocks (design in the header).
#include "cuda/caching_allocator.h"

#include <algorithm>

#include "core/error.h"
#include "cuda/context.h"

namespace moelab::cuda {
namespace {

constexpr std::size_t kSmallLimit = std::size_t{1} << 20;   // 1 MiB
constexpr std::size_t kSmallRound = 512;
constexpr std::size_t kLargeRound = std::size_t{2} << 20;   // 2 MiB

std::size_t round_up(std::size_t n, std::size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

CachingAllocator& CachingAllocator::instance() {
  static CachingAllocator* the_allocator = new CachingAllocator();  // never destroyed, on purpose
  return *the_allocator;
}

std::size_t CachingAllocator::round_size(std::size_t bytes) {
  if (bytes <= kSmallLimit) return round_up(std::max<std::size_t>(bytes, 1), kSmallRound);
  return round_up(bytes, kLargeRound);
}

void* CachingAllocator::allocate(std::size_t bytes) {
  const std::size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);

  // 1. A cached block: exactly this class, or (large only) up to 1.25x it.
  auto it = free_blocks_.lower_bound(size);
  const std::size_t accept = size <= kSmallLimit ? size : size + size / 4;
  if (it != free_blocks_.end() && it->first <= accept) {
    void* ptr = it->second;
    const std::size_t block = it->first;
    free_blocks_.erase(it);
    stats_.bytes_cached -= block;
    stats_.bytes_in_use += block;
    stats_.bytes_requested += bytes;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    ++stats_.cache_hits;
    in_use_.emplace(ptr, Block{block, bytes});
    return ptr;
  }

  // 2. A new block; on failure release the cache and try once more.
  void* ptr = nullptr;
  const std::size_t cached_before = stats_.bytes_cached;
  cudaError_t status = cudaMalloc(&ptr, size);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the error so that no later check reports it
    release_cached_locked();
    status = cudaMalloc(&ptr, size);
  }
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    fail("cuda", "out of GPU memory allocating ", bytes, " bytes (", mib(size), " MiB block); ",
         mib(stats_.bytes_in_use), " MiB are in use by tensors; the ", mib(cached_before),
         " MiB cached were released before one retry");
  }
  check(status, "cudaMalloc", __FILE__, __LINE__);
  ++stats_.cuda_malloc_calls;
  stats_.bytes_in_use += size;
  stats_.bytes_requested += bytes;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  in_use_.emplace(ptr, Block{size, bytes});
  return ptr;
}

void CachingAllocator::deallocate(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_use_.find(ptr);
  if (it == in_use_.end()) fail("cuda", "deallocate: ", ptr, " is not a block of the caching allocator");
  const Block block = it->second;
  in_use_.erase(it);
  stats_.bytes_in_use -= block.size;
  stats_.bytes_requested -= block.requested;
  stats_.bytes_cached += block.size;
  free_blocks_.emplace(block.size, ptr);
}

void CachingAllocator::release_cached_locked() {
  if (free_blocks_.empty()) return;
  // cudaFree waits for the device to finish, so queued kernels still reading a cached block
  // complete before it is unmapped.
  for (const auto& [size, ptr] : free_blocks_) {
    MOELAB_CUDA_CHECK(cudaFree(ptr));
    ++stats_.cuda_free_calls;
    stats_.bytes_cached -= size;
  }
  free_blocks_.clear();
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

AllocatorStats allocator_stats() { return CachingAllocator::instance().stats(); }
void empty_cache() { CachingAllocator::instance().empty_cache(); }

}  // namespace moelab::cuda
