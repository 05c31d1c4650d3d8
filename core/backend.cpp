// core/backend.cpp — picks the Backend for a device.
#include "core/backend.h"

namespace moelab {

Backend& backend(Device device) { return device.is_cpu() ? cpu_backend() : cuda_backend(); }

}  // namespace moelab
