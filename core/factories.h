// core/factories.h — ways to make a Tensor with known contents.
//
// Random factories draw from a Generator on the host (in row-major element order), so the same
// seed fills the same tensor with the same values whatever the target device; the values are
// then copied there.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"

namespace moelab {

Tensor zeros(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor full(const Shape& shape, double value, DType dtype = DType::Float32, Device device = Device::cpu());
// [start, start + step, ...) below `end` (above it for a negative step), as a 1-d tensor.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::Int32, Device device = Device::cpu());
// Copies `values` (row-major) into a new tensor of `shape`; values.size() must equal numel. The
// dtype is the vector's element type: a std::vector<double> makes a float64 tensor, which then
// does not mix with float32 weights (binary ops refuse two dtypes). To get another dtype, say so:
Tensor from_vector(const std::vector<float>& values, const Shape& shape, Device device = Device::cpu());
Tensor from_vector(const std::vector<double>& values, const Shape& shape, Device device = Device::cpu());
Tensor from_vector(const std::vector<std::int32_t>& values, const Shape& shape, Device device = Device::cpu());
// The values converted to `dtype` (rounded to nearest for float32; for int32 each value must be a
// whole number in range, else moelab::Error naming the first that is not):
//   Tensor targets = from_vector(std::vector<double>{0.5, 1.5}, {2}, DType::Float32);
Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype,
                   Device device = Device::cpu());
// Uniform in [low, high) and normal(mean, std), drawn from `gen`.
Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype = DType::Float32,
               Device device = Device::cpu());
Tensor normal(const Shape& shape, double mean, double std, Generator& gen, DType dtype = DType::Float32,
              Device device = Device::cpu());

}  // namespace moelab
