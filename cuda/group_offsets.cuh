// cuda/group_offsets.cuh — group offsets that live on the device: their check and their safe reading.
//
// A MoE layer's groups are described by offsets: int32 [E + 1] on the GPU, made by routing
// (cuda/routing.cu) and read by the grouped products (cuda/grouped_matmul.cu) and row_groups.
// Nobody reads them back to the host, so nobody on the host can check them. Instead:
//   check_group_offsets(...)   one small kernel that tests 0 = offsets[0] <= ... <= offsets[E] <= rows
//                              and records the first bad entry e in the device error flag
//                              (cuda/device_errors.cuh), raised at the next synchronisation;
//   clamped_offset(...)        what the consuming kernels read instead of offsets[e]: the value
//                              clamped to [0, rows]. Together with "a group whose end is before
//                              its start is empty", bad offsets can make the result wrong (and
//                              then the error is raised) but never make a kernel read or write
//                              outside its tensors.
#pragma once

#include <cstdint>

namespace moelab::cuda {

// offsets[e] clamped to [0, rows].
__device__ inline std::int64_t clamped_offset(const std::int32_t* offsets, std::int64_t e, std::int64_t rows) {
  const std::int64_t v = offsets[e];
  return v < 0 ? 0 : (v > rows ? rows : v);
}

// Enqueues the check of offsets: int32 [groups + 1] on the device against `rows`; a violation is
// reported as `op` (a DeviceErrorOp) with position = the first bad e, value = offsets[e],
// limit = rows. Defined in cuda/grouped_matmul.cu. No host synchronisation.
void check_group_offsets(const std::int32_t* offsets, std::int64_t groups, std::int64_t rows, int op);

}  // namespace moelab::cuda
