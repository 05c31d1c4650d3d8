// core/backend.cpp — picks the Backend for a device (and the test-only override of that choice).
#include "core/backend.h"

#include <string>

namespace moelab {
namespace {

// One slot per DeviceType; null unless a ScopedBackendOverride (tests only) is alive.
Backend* g_override[2] = {nullptr, nullptr};

Backend*& override_slot(DeviceType type) { return g_override[type == DeviceType::CPU ? 0 : 1]; }

}  // namespace

IndexRangeError::IndexRangeError(std::int64_t position_, std::int64_t value_, std::int64_t limit_)
    : Error("moelab::index: index (flat position " + std::to_string(position_) + ") = " + std::to_string(value_) +
            " is out of range [0, " + std::to_string(limit_) + ")"),
      position(position_),
      value(value_),
      limit(limit_) {}

Backend& backend(Device device) {
  if (Backend* stand_in = override_slot(device.type)) return *stand_in;
  return device.is_cpu() ? cpu_backend() : cuda_backend();
}

ScopedBackendOverride::ScopedBackendOverride(DeviceType type, Backend& stand_in)
    : type_(type), previous_(override_slot(type)) {
  override_slot(type) = &stand_in;
}

ScopedBackendOverride::~ScopedBackendOverride() { override_slot(type_) = previous_; }

}  // namespace moelab
