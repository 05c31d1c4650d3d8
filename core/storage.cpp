// core/storage.cpp — allocation and release of Storage, through the device's backend.
#include "core/storage.h"

#include <vector>

#include "core/backend.h"

namespace moelab {

Storage::Storage(std::size_t bytes, Device device) : bytes_(bytes), device_(device) {
  data_ = backend(device).allocate(bytes);
}

Storage::~Storage() {
  if (data_) backend(device_).deallocate(data_, bytes_);
}

void Storage::move_to(Device target) {
  if (target == device_) return;
  Backend& from = backend(device_);
  Backend& to = backend(target);  // throws here, before any change, when the device is unavailable
  void* fresh = to.allocate(bytes_);
  try {
    if (device_.is_cpu()) {
      to.copy_from_host(fresh, data_, bytes_);
    } else if (target.is_cpu()) {
      from.copy_to_host(fresh, data_, bytes_);
    } else {  // one GPU to another: through the host
      std::vector<unsigned char> staged(bytes_);
      from.copy_to_host(staged.data(), data_, bytes_);
      to.copy_from_host(fresh, staged.data(), bytes_);
    }
  } catch (...) {
    to.deallocate(fresh, bytes_);
    throw;
  }
  from.deallocate(data_, bytes_);
  data_ = fresh;
  device_ = target;
}

}  // namespace moelab
