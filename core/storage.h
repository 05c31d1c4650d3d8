// core/storage.h — a block of memory on one device, shared by every Tensor that views it.
//
// Storage owns its bytes: CPU memory is 64-byte aligned (one cache line, and what AVX-512 loads
// like); CUDA memory comes from the CUDA backend's caching allocator. Tensors hold a
// std::shared_ptr<Storage>, so views (reshape, first-axis slices) keep the memory alive.
//
// move_to(device) moves the bytes to another device in place: the Storage object stays the same,
// so every Tensor holding it (copies of a parameter's handle, views of it) sees the new device at
// once. Module::to (nn/module.h) moves a model's parameters this way.
#pragma once

#include <cstddef>

#include "core/device.h"

namespace moelab {

class Storage {
 public:
  Storage(std::size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

  // Moves the bytes to `target`: allocates there, copies, frees the old block. A no-op when
  // already there. Throws moelab::Error (the target's backend is unavailable, out of memory)
  // before anything changes: on failure the Storage is as it was.
  void move_to(Device target);

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
};

}  // namespace moelab
