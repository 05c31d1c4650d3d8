// cuda/device_errors.cu — the mapped host memory behind cuda/device_errors.cuh, and its check.
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
    case kGatherLast: return "gather_last";
    case kScatterAddLast: return "scatter_add_last";
    case kCrossEntropy: return "cross_entropy";
    case kCrossEntropyBackward: return "cross_entropy_backward";
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
  const bool target = op == kCrossEntropy || op == kCrossEntropyBackward;
  fail(op_name(op), target ? "targets[" : "index (flat position ", found.position, target ? "] = " : ") = ",
       found.value, target ? " is outside [0, " : " is out of range [0, ", found.limit,
       target ? ") and is not ignore_index (found on the GPU)" : ") (found on the GPU)");
}

}  // namespace moelab::cuda
