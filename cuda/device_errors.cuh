// cuda/device_errors.cuh — errors found inside kernels (an index, target, expert id or group
// offset out of range), reported at the next stream synchronisation instead of by a host check
// that would wait for the data.
//
// The hot path never waits on the host (README), so the CUDA index ops, cross-entropy, routing
// (cuda/routing.cu) and the grouped products (cuda/grouped_matmul.cu) test every index or offset
// they read on the device: a bad one is skipped or clamped (no memory outside the tensors is
// touched; the op's own comment says what the output holds then) and the first is recorded in
// one DeviceError that lives
// in mapped, page-locked host memory (cudaHostAlloc with cudaHostAllocMapped): kernels write it
// through its device alias, the host reads it directly, with no copy. The host looks at it right
// after each stream synchronisation (CudaBackend::copy_to_host, copy_from_host, synchronize), when
// every kernel enqueued so far has finished, so the write is visible; raise_device_error() then
// clears it and throws moelab::Error naming the op, e.g.
//   "moelab::index_select: index (flat position 3) = 9 is out of range [0, 8) (found on the GPU)"
// The report is late (at the next read of the loss at the latest) and carries no shapes, but it
// always comes, and a step with a bad index never reads outside a tensor.
#pragma once

#include <cstdint>

namespace moelab::cuda {

// Which op found the error; 0 means none.
enum DeviceErrorOp : int {
  kNoDeviceError = 0,
  kIndexSelect,
  kScatterAddRows,
  kScatterAddRowsScaled,
  kScatterAddRowsScaledBackward,
  kGatherLast,
  kScatterAddLast,
  kCrossEntropy,
  kCrossEntropyBackward,
  kGroupByExpert,            // an expert id outside [-1, E): position = flat assignment, limit = E
  kGroupedMatmul,            // offsets not 0 = o[0] <= ... <= o[E] <= N: position = e, limit = N
  kGroupedMatmulWeightGrad,  // the same, in the weight gradient
  kRowGroups,                // the same, with limit = the number of rows
};

struct DeviceError {
  int op;              // DeviceErrorOp of the first error since the last check
  long long position;  // flat position of the bad index (the row, for cross-entropy; e, for offsets)
  long long value;     // the bad index (or offset)
  long long limit;     // the valid range is [0, limit) ([-1, limit) for expert ids; offsets <= limit)
};

// The device alias of the one DeviceError (allocated on first use).
DeviceError* device_error();
// Throws moelab::Error for a recorded error, clearing it first. Call only after a synchronisation.
void raise_device_error();

// Records the first error; later ones (from any thread) are dropped.
__device__ inline void report_index_error(DeviceError* error, int op, long long position, long long value,
                                          long long limit) {
  if (atomicCAS(&error->op, 0, -1) == 0) {
    error->position = position;
    error->value = value;
    error->limit = limit;
    __threadfence_system();
    atomicExch(&error->op, op);
  }
}

// True when 0 <= value < limit; otherwise records the error and returns false.
__device__ inline bool index_ok(DeviceError* error, int op, long long position, long long value, long long limit) {
  if (value >= 0 && value < limit) return true;
  report_index_error(error, op, position, value, limit);
  return false;
}

}  // namespace moelab::cuda
