// core/device.h — where a Tensor's memory lives: the host (CPU) or one CUDA GPU.
#pragma once

#include <ostream>

namespace moelab {

enum class DeviceType { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // which GPU, for CUDA; always 0 for the CPU

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& other) const = default;
};

inline std::ostream& operator<<(std::ostream& out, const Device& device) {
  if (device.is_cpu()) return out << "cpu";
  return out << "cuda:" << device.index;
}

}  // namespace moelab
