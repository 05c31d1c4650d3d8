// core/tensor.h — the n-dimensional array every layer of moelab passes around.
//
// A Tensor is a cheap handle: shared Storage + byte offset + Shape + DType. Copying a Tensor
// copies the handle, not the data. Data is always contiguous and row-major, so kernels can map it
// straight into Eigen. Only two operations are views that share storage:
//   reshape(shape)        same elements, new shape (one size may be -1, inferred)
//   slice(start, length)  rows [start, start+length) along the first axis
// Everything else (transpose, permute, gather, ...) makes a new contiguous tensor.
//
// A default-constructed Tensor is "undefined" (no storage); defined() tells.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace moelab {

class Tensor {
 public:
  Tensor() = default;

  // A new tensor with uninitialised memory.
  static Tensor empty(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  std::int64_t size(int axis) const { return shape_.size(axis, "Tensor::size"); }
  std::int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  Device device() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }

  // Typed pointer to the first element. Checks that T matches the dtype; works on any device
  // (a CUDA pointer must only be used by CUDA code).
  template <class T>
  T* data() {
    check_type(dtype_of<T>());
    return static_cast<T*>(raw());
  }
  template <class T>
  const T* data() const {
    check_type(dtype_of<T>());
    return static_cast<const T*>(raw());
  }
  void* raw();
  const void* raw() const;

  // Views (share storage).
  Tensor reshape(const Shape& shape) const;
  Tensor slice(std::int64_t start, std::int64_t length) const;

  // Copies.
  Tensor clone() const;                 // same device and dtype, new storage
  Tensor to(Device device) const;       // host <-> device copy (returns *this if already there)
  Tensor to(DType dtype) const;         // converts element type (returns *this if already it)

  // Moves the storage itself to `device`, in place (Storage::move_to): every tensor sharing it
  // (copies of this handle, views) then lives there too. to(device) instead returns a copy and
  // leaves other handles where they were. Module::to moves parameters with it. Throws
  // moelab::Error, changing nothing, when the device is unavailable.
  void move_storage_to(Device device);

  // Reading values back (copies to the host when needed), as T whatever the dtype: a value of
  // another dtype is converted as to(dtype_of<T>()) converts it (float64 -> float32 rounds to
  // nearest; float -> int32 as kernels::cast says), so x.item<double>() reads any loss.
  template <class T>
  T item() const;
  template <class T>
  std::vector<T> to_vector() const;

  bool shares_storage_with(const Tensor& other) const { return storage_ && storage_ == other.storage_; }
  // True when this handle is the only one on its storage and spans all of it: no copy of the
  // handle and no view exists anywhere, so writing to it can change no other tensor.
  bool sole_handle() const {
    return storage_ && storage_.use_count() == 1 && offset_ == 0 && storage_->bytes() == nbytes();
  }
  std::string str() const;  // "Tensor(float32, cpu, [2, 3])"

 private:
  void check_type(DType wanted) const;

  std::shared_ptr<Storage> storage_;
  std::size_t offset_ = 0;  // in bytes from the start of storage_
  Shape shape_;
  DType dtype_ = DType::Float32;
};

// Throws moelab::Error naming `op` unless the tensor is defined.
void check_defined(const Tensor& x, const char* op, const char* what = "input");
// Throws unless the tensor holds floating-point data.
void check_floating(const Tensor& x, const char* op, const char* what = "input");
// Throws unless the tensor has the given dtype.
void check_dtype(const Tensor& x, DType dtype, const char* op, const char* what = "input");
// Throws unless both tensors live on the same device.
void check_same_device(const Tensor& a, const Tensor& b, const char* op);

}  // namespace moelab
