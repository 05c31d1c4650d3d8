// cuda/routing.cu — the counting sort of MoE routing on the GPU, with no host round trip
// (mirrors core/cpu/routing.cpp; core/kernels/routing.cpp gives the math).
//
//   group_by_expert  ids: int32 [T, k] (expert of assignment a = t*k + j, or -1), capacity
//                    -> kept [T, k], order [n], rows [n], offsets [E + 1], wanted [E]   (n = T*k)
//   row_groups       offsets: int32 [E + 1] -> out: int32 [rows], the group of each row
//
// The result must be bitwise the CPU's, and it is an integer algorithm, so "the same" means the
// same permutation: kept assignments sorted by expert, increasing a inside an expert (stable),
// an expert keeping only its first `capacity` assignments in the order a = 0, 1, ..., and then
// the dropped ones (by the router: -1; by the capacity; or a bad id) in increasing a. The CPU
// walks a = 0..n-1 once with one running counter per expert. Here the n assignments are cut
// into P chunks of C consecutive assignments (chunk c = [c*C, (c+1)*C)), one thread per chunk,
// and what the CPU's counters would hold at the start of each chunk is computed first:
//
//   0. counts := 0                                  scratch int32 [E, P] (expert-major)
//   1. count_kernel          (one thread per chunk)  counts[e][c] = #{a in chunk c : ids[a] == e};
//                                                    an id outside [-1, E) is reported (device
//                                                    error flag) and counted nowhere: dropped
//   2. scan_chunk_counts     (one block per expert)  counts[e][.] := its exclusive prefix sum
//                                                    over c, so before[e][c] = #{a < c*C : ids[a]
//                                                    == e}, the rank of chunk c's first e among
//                                                    all of e's; wanted[e] = the total
//   3. offsets_kernel        (one block)             offsets = exclusive prefix sum of
//                                                    min(wanted[e], capacity), offsets[E] = kept
//   4. place_kernel          (one thread per chunk)  walks its chunk in increasing a, as the CPU:
//        an assignment of expert e with rank r = before[e][c] (then before[e][c] += 1) is kept
//        iff r < capacity and goes to slot offsets[e] + r; anything else goes to the dropped
//        tail, slot offsets[E] + (dropped assignments before a). The chunk's first dropped slot
//        needs no pass of its own: expert e kept the first min(before[e][c], capacity) of its
//        assignments before the chunk, so c*C - sum_e min(before[e][c], capacity) of the
//        assignments before it were dropped. Each thread then counts on from there.
//        order[slot] = a, rows[slot] = a / k, kept[a] = e or -1.
//
// Every slot is written exactly once (ranks 0 .. min(wanted[e], capacity) - 1 of each expert,
// and the n - offsets[E] dropped slots), so order is a permutation of 0..n-1, as on the CPU. No
// atomics decide anything (the only atomic is the error report), so the result is the same on
// every run. Only before[e][c] is written by step 4, and only by chunk c's own thread.
//
// Sizes: C = max(32, n / 4096, E * n / 2^22) rounded up, so P <= 4096 chunks and the scratch
// E * P stays near 16 MiB at most. For n = T*k = 65,536 and E = 64: C = 32, P = 2048 threads,
// 512 KiB of scratch, four kernels and a memset. The per-chunk walks are sequential (a chunk's
// 32 assignments one after another, each a read-modify-write of its own column of before[][]),
// so this is latency-bound and uses a few SMs: an estimate of some tens of microseconds, small
// next to the expert GEMMs, never measured. (A warp-cooperative walk with ballots would be
// faster; it would give the same result and change only this file.)
//
// row_groups: one thread per row r, a binary search for the first e in 1..E with offsets[e] > r
// (group = e - 1; E when there is none). Its offsets are checked on the device first
// (cuda/group_offsets.cuh); with bad offsets every search still stays inside offsets[1..E].
//
// Nothing here reads device memory back to the host, and nothing synchronises. This file has
// been compiled (nvcc, sm_90) but never run on a GPU: it is checked by reading only.
#include <algorithm>
#include <cstdint>

#include "cuda/caching_allocator.h"
#include "cuda/context.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_errors.cuh"
#include "cuda/device_utils.cuh"
#include "cuda/group_offsets.cuh"

namespace moelab {
namespace {

constexpr std::int64_t kMinChunk = 32;               // assignments per chunk, at least
constexpr std::int64_t kMaxChunks = 4096;            // chunks, at most (before the scratch bound)
constexpr std::int64_t kMaxScratch = std::int64_t{1} << 22;  // ints of per-chunk counts E * P, about
constexpr int kChunkThreads = 128;                   // threads per block of the per-chunk kernels
constexpr int kScanThreads = 256;                    // threads of a one-block scan (a power of two)

using cuda::first_index;
using cuda::grid_stride;

using cuda::ceil_div;
// std::min is host-only for nvcc (without --expt-relaxed-constexpr); this one serves the kernels.
template <class T>
__device__ inline T smaller(T a, T b) { return b < a ? b : a; }

// Exclusive prefix sum of data[0, count) in place, by the whole block (every thread must call
// it); returns the total to every thread. Thread t owns the consecutive segment
// [t * seg, (t + 1) * seg); a Hillis-Steele scan over the segment sums in shared memory (scratch:
// blockDim.x ints) gives each segment its start. Integers, so the grouping changes nothing.
__device__ std::int32_t block_exclusive_scan(std::int32_t* data, std::int64_t count, std::int32_t* scratch) {
  const unsigned int tid = threadIdx.x;
  const std::int64_t seg = (count + blockDim.x - 1) / blockDim.x;
  const std::int64_t begin = smaller(count, std::int64_t{tid} * seg), end = smaller(count, begin + seg);
  std::int32_t local = 0;
  for (std::int64_t i = begin; i < end; ++i) local += data[i];
  scratch[tid] = local;
  __syncthreads();
  for (unsigned int step = 1; step < blockDim.x; step *= 2) {  // inclusive scan of the segment sums
    const std::int32_t add = tid >= step ? scratch[tid - step] : 0;
    __syncthreads();
    scratch[tid] += add;
    __syncthreads();
  }
  const std::int32_t total = scratch[blockDim.x - 1];
  std::int32_t running = scratch[tid] - local;  // the sum of the segments before this one
  for (std::int64_t i = begin; i < end; ++i) {
    const std::int32_t v = data[i];
    data[i] = running;
    running += v;
  }
  __syncthreads();  // scratch may be reused, data is complete for the whole block
  return total;
}

// Step 1. ids: [n]; counts: [experts, chunks], zeroed. One thread per chunk.
__global__ void count_kernel(const std::int32_t* ids, std::int64_t n, std::int64_t chunk, std::int64_t chunks,
                             std::int64_t experts, cuda::DeviceError* error, std::int32_t* counts) {
  for (std::int64_t c = first_index(); c < chunks; c += grid_stride()) {
    const std::int64_t begin = c * chunk, end = smaller(n, begin + chunk);
    for (std::int64_t a = begin; a < end; ++a) {
      const std::int32_t e = ids[a];
      if (e >= 0 && e < experts)
        ++counts[e * chunks + c];
      else if (e != -1)  // -1 is the router's own "dropped"; anything else is a bad id
        cuda::report_index_error(error, cuda::kGroupByExpert, a, e, experts);
    }
  }
}

// Step 2. One block per expert e: counts[e][.] := its exclusive prefix sum, wanted[e] = its total.
__global__ void scan_chunk_counts_kernel(std::int32_t* counts, std::int64_t chunks, std::int32_t* wanted) {
  __shared__ std::int32_t scratch[kScanThreads];
  const std::int64_t e = blockIdx.x;
  const std::int32_t total = block_exclusive_scan(counts + e * chunks, chunks, scratch);
  if (threadIdx.x == 0) wanted[e] = total;
}

// Step 3. One block: offsets[e] = sum over e' < e of min(wanted[e'], cap); offsets[E] = the kept total.
__global__ void offsets_kernel(const std::int32_t* wanted, std::int64_t experts, std::int32_t cap,
                               std::int32_t* offsets) {
  __shared__ std::int32_t scratch[kScanThreads];
  for (std::int64_t e = threadIdx.x; e < experts; e += blockDim.x) offsets[e] = smaller(wanted[e], cap);
  __syncthreads();  // the scan's segments are not the loop's strides
  const std::int32_t total = block_exclusive_scan(offsets, experts, scratch);
  if (threadIdx.x == 0) offsets[experts] = total;
}

// Step 4. One thread per chunk, its assignments in increasing a; before: [experts, chunks] from
// step 2, column c used (and advanced) as chunk c's running rank of each expert.
__global__ void place_kernel(const std::int32_t* ids, std::int64_t n, std::int64_t k, std::int64_t chunk,
                             std::int64_t chunks, std::int64_t experts, std::int32_t cap,
                             const std::int32_t* offsets, std::int32_t* before, std::int32_t* kept,
                             std::int32_t* order, std::int32_t* rows) {
  for (std::int64_t c = first_index(); c < chunks; c += grid_stride()) {
    const std::int64_t begin = c * chunk, end = smaller(n, begin + chunk);
    std::int64_t kept_before = 0;  // assignments before this chunk that their expert kept
    for (std::int64_t e = 0; e < experts; ++e) kept_before += smaller(before[e * chunks + c], cap);
    std::int64_t dropped_slot = offsets[experts] + (begin - kept_before);
    for (std::int64_t a = begin; a < end; ++a) {
      const std::int32_t e = ids[a];
      std::int64_t slot;
      std::int32_t* rank = e >= 0 && e < experts ? before + e * chunks + c : nullptr;
      if (rank != nullptr && *rank < cap) {  // among its expert's first `cap`: kept
        slot = offsets[e] + *rank;
        ++*rank;
        kept[a] = e;
      } else {  // -1, a bad id (already reported), or over capacity (later ones of e are too)
        slot = dropped_slot++;
        kept[a] = -1;
      }
      order[slot] = static_cast<std::int32_t>(a);
      rows[slot] = static_cast<std::int32_t>(a / k);
    }
  }
}

// out[r] = the e with offsets[e] <= r < offsets[e+1], or E past offsets[E]: the number of
// e in 1..E with offsets[e] <= r, by binary search (offsets non-decreasing, as checked).
__global__ void row_groups_kernel(const std::int32_t* offsets, std::int64_t groups, std::int64_t rows,
                                  std::int32_t* out) {
  for (std::int64_t r = first_index(); r < rows; r += grid_stride()) {
    std::int64_t lo = 1, hi = groups + 1;  // the first e in [1, groups] with offsets[e] > r, else groups + 1
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (offsets[mid] <= r) lo = mid + 1;
      else hi = mid;
    }
    out[r] = static_cast<std::int32_t>(lo - 1);
  }
}

}  // namespace

void CudaBackend::group_by_expert(const Tensor& ids, std::int64_t capacity, Tensor& kept, Tensor& order,
                                  Tensor& rows, Tensor& offsets, Tensor& wanted) {
  // ids, kept: [T, k]; order, rows: [n = T*k]; offsets: [E + 1]; wanted: [E]; all int32 on the GPU.
  // The front end guarantees E >= 1 and n, E < 2^31.
  const std::int64_t n = ids.numel(), k = ids.size(1), experts = wanted.numel();
  std::int32_t* off = offsets.data<std::int32_t>();
  std::int32_t* want = wanted.data<std::int32_t>();
  if (n == 0) {  // no assignments: nothing wanted, nothing kept (all-zero bits = 0)
    MOELAB_CUDA_CHECK(cudaMemsetAsync(off, 0, offsets.nbytes(), cuda::stream()));
    MOELAB_CUDA_CHECK(cudaMemsetAsync(want, 0, wanted.nbytes(), cuda::stream()));
    return;
  }
  // capacity < 0 means no limit; a capacity above n limits nothing either (and then fits int32).
  const auto cap = static_cast<std::int32_t>(capacity < 0 || capacity > n ? n : capacity);
  const std::int64_t chunk = std::max({kMinChunk, ceil_div(n, kMaxChunks), ceil_div(experts * n, kMaxScratch)});
  const std::int64_t chunks = ceil_div(n, chunk);
  const std::int32_t* id = ids.data<std::int32_t>();

  cuda::DeviceBuffer<std::int32_t> counts(static_cast<std::size_t>(experts * chunks));  // [E, P]
  MOELAB_CUDA_CHECK(cudaMemsetAsync(counts.get(), 0, static_cast<std::size_t>(experts * chunks) * sizeof(std::int32_t),
                                    cuda::stream()));
  const unsigned int chunk_blocks = cuda::blocks_for(chunks, kChunkThreads);
  count_kernel<<<chunk_blocks, kChunkThreads, 0, cuda::stream()>>>(id, n, chunk, chunks, experts, cuda::device_error(),
                                                                    counts.get());
  MOELAB_CUDA_CHECK_LAUNCH();
  scan_chunk_counts_kernel<<<static_cast<unsigned int>(experts), kScanThreads, 0, cuda::stream()>>>(counts.get(),
                                                                                                   chunks, want);
  MOELAB_CUDA_CHECK_LAUNCH();
  offsets_kernel<<<1, kScanThreads, 0, cuda::stream()>>>(want, experts, cap, off);
  MOELAB_CUDA_CHECK_LAUNCH();
  place_kernel<<<chunk_blocks, kChunkThreads, 0, cuda::stream()>>>(
      id, n, k, chunk, chunks, experts, cap, off, counts.get(), kept.data<std::int32_t>(), order.data<std::int32_t>(),
      rows.data<std::int32_t>());
  MOELAB_CUDA_CHECK_LAUNCH();
  // counts goes back to the cache now, while the kernels may still be queued: the caching
  // allocator hands it out again only to work enqueued later on the same stream.
}

void CudaBackend::row_groups(const Tensor& offsets, Tensor& out) {
  // offsets: int32 [E + 1] on the GPU -> out: int32 [rows].
  const std::int64_t groups = offsets.numel() - 1, rows = out.numel();
  const std::int32_t* off = offsets.data<std::int32_t>();
  cuda::check_group_offsets(off, groups, rows, cuda::kRowGroups);  // also when rows == 0
  if (rows == 0) return;
  row_groups_kernel<<<cuda::blocks_for(rows), cuda::kThreads, 0, cuda::stream()>>>(off, groups, rows,
                                                                                   out.data<std::int32_t>());
  MOELAB_CUDA_CHECK_LAUNCH();
}

}  // namespace moelab
