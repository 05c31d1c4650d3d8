// cuda/device_errors.cu — the mapped host memory behind cuda/device_errors.cuh, and its check:
// the message for each op says what was wrong in the op's own words (the CPU's, where the CPU
// checks the same thing), and that it was found on the GPU.
#include <string>

#include "core/error.h"
#include "cuda/context.h"
#include "cuda/device_errors.cuh"

namespace moelab::cuda {
namespace {

struct Slot {
  DeviceError* host = nullptr;
  DeviceError* device = nullptr;
};

Slot& slot() {
  static Slot s = [] {
    Slot made;
    MOELAB_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&made.host), sizeof(DeviceError), cudaHostAllocMapped));
    *made.host = DeviceError{kNoDeviceError, 0, 0, 0};
    MOELAB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&made.device), made.host, 0));
    return made;
  }();
  return s;
}

const char* op_name(int op) {
  switch (op) {
    case kIndexSelect: return "index_select";
    case kScatterAddRows: return "scatter_add_rows";
    case kScatterAddRowsScaled: return "scatter_add_rows_scaled";
    case kScatterAddRowsScaledBackward: return "scatter_add_rows_scaled_backward";
    case kGatherLast: return "gather_last";
    case kScatterAddLast: return "scatter_add_last";
    case kCrossEntropy: return "cross_entropy";
    case kCrossEntropyBackward: return "cross_entropy_backward";
    case kGroupByExpert: return "group_by_expert";
    case kGroupedMatmul: return "grouped_matmul";
    case kGroupedMatmulWeightGrad: return "grouped_matmul_weight_grad";
    case kRowGroups: return "row_groups";
    default: return "cuda";
  }
}

}  // namespace

DeviceError* device_error() { return slot().device; }

void raise_device_error() {
  volatile DeviceError* e = slot().host;
  const int op = e->op;
  if (op == kNoDeviceError) return;
  const DeviceError found{op, e->position, e->value, e->limit};
  e->op = kNoDeviceError;
  if (op == kGroupByExpert)  // worded as the CPU's check in core/kernels/routing.cpp
    fail(op_name(op), "ids (flat position ", found.position, ") = ", found.value, " is outside [-1, ", found.limit,
         ") for ", found.limit, " experts (found on the GPU; that assignment was counted as dropped)");
  if (op == kGroupedMatmul || op == kGroupedMatmulWeightGrad || op == kRowGroups)
    fail(op_name(op), "offsets[", found.position, "] = ", found.value,
         " breaks 0 = offsets[0] <= offsets[1] <= ... <= offsets[E] <= ", op == kRowGroups ? "rows = " : "N = ",
         found.limit, " (the first bad entry; found on the GPU, where the op kept to the rows that exist)");
  const bool target = op == kCrossEntropy || op == kCrossEntropyBackward;
  fail(op_name(op), target ? "targets[" : "index (flat position ", found.position, target ? "] = " : ") = ",
       found.value, target ? " is outside [0, " : " is out of range [0, ", found.limit,
       target ? ") and is not ignore_index (found on the GPU)" : ") (found on the GPU)");
}

}  // namespace moelab::cuda
