// core/storage.cpp — allocation and release of Storage, through the device's backend.
#include "core/storage.h"

#include "core/backend.h"

namespace moelab {

Storage::Storage(std::size_t bytes, Device device) : bytes_(bytes), device_(device) {
  data_ = backend(device).allocate(bytes);
}

Storage::~Storage() {
  if (data_) backend(device_).deallocate(data_, bytes_);
}

}  // namespace moelab
