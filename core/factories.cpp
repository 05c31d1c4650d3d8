// core/factories.cpp — zeros, ones, full, arange, from_vector, uniform, normal.
#include "core/factories.h"

#include <cmath>

#include "core/backend.h"
#include "core/kernels.h"

namespace moelab {
namespace {

// Fills a host tensor of the given dtype from a function of the element index, then moves it.
template <class Fn>
Tensor make_on_host(const Shape& shape, DType dtype, Device device, Fn value_at) {
  Tensor host = Tensor::empty(shape, dtype, Device::cpu());
  const std::int64_t n = host.numel();
  switch (dtype) {
    case DType::Float32: {
      float* p = host.data<float>();
      for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(value_at(i));
      break;
    }
    case DType::Float64: {
      double* p = host.data<double>();
      for (std::int64_t i = 0; i < n; ++i) p[i] = value_at(i);
      break;
    }
    case DType::Int32: {
      std::int32_t* p = host.data<std::int32_t>();
      for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<std::int32_t>(value_at(i));
      break;
    }
    case DType::BFloat16: {  // through float32, as a cast from float32 rounds
      BFloat16* p = host.data<BFloat16>();
      for (std::int64_t i = 0; i < n; ++i) p[i] = BFloat16::from_float(static_cast<float>(value_at(i)));
      break;
    }
  }
  return host.to(device);
}

template <class T>
Tensor from_values(const std::vector<T>& values, const Shape& shape, Device device) {
  MOELAB_CHECK(static_cast<std::int64_t>(values.size()) == shape.numel(), "from_vector", "got ", values.size(),
               " values for shape ", shape, " (", shape.numel(), " elements)");
  Tensor host = Tensor::empty(shape, dtype_of<T>(), Device::cpu());
  std::copy(values.begin(), values.end(), host.data<T>());
  return host.to(device);
}

}  // namespace

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  kernels::fill(t, value);
  return t;
}

Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  MOELAB_CHECK(step != 0.0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step), "arange",
               "needs finite start/end and a non-zero step, got ", start, ", ", end, ", ", step);
  const double count = std::ceil((end - start) / step);
  const std::int64_t n = count > 0 ? static_cast<std::int64_t>(count) : 0;
  Tensor t = Tensor::empty(Shape{n}, dtype, device);  // filled where it lives: nothing is uploaded
  if (n > 0) backend(device).arange(t, start, step);
  return t;
}

Tensor from_vector(const std::vector<float>& values, const Shape& shape, Device device) {
  return from_values(values, shape, device);
}
Tensor from_vector(const std::vector<double>& values, const Shape& shape, Device device) {
  return from_values(values, shape, device);
}
Tensor from_vector(const std::vector<std::int32_t>& values, const Shape& shape, Device device) {
  return from_values(values, shape, device);
}
Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype, Device device) {
  switch (dtype) {
    case DType::Float64: return from_values(values, shape, device);
    case DType::Float32: return from_values(std::vector<float>(values.begin(), values.end()), shape, device);
    case DType::Int32: {
      std::vector<std::int32_t> ints(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) {
        const double v = values[i];
        MOELAB_CHECK(std::isfinite(v) && v == std::floor(v) && v >= -2147483648.0 && v <= 2147483647.0, "from_vector",
                     "value ", i, " (", v, ") is not a whole number in int32's range");
        ints[i] = static_cast<std::int32_t>(v);
      }
      return from_values(ints, shape, device);
    }
    case DType::BFloat16:  // rounded from float32, as a cast rounds
      return from_values(std::vector<float>(values.begin(), values.end()), shape, device).to(DType::BFloat16);
  }
  fail("from_vector", "unknown dtype");
}

Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype, Device device) {
  MOELAB_CHECK(is_floating(dtype), "uniform", "needs float32 or float64, got ", dtype, " (make float32 and convert)");
  MOELAB_CHECK(low <= high, "uniform", "low (", low, ") must not exceed high (", high, ")");
  return make_on_host(shape, dtype, device, [&](std::int64_t) { return low + (high - low) * gen.next_uniform(); });
}

Tensor normal(const Shape& shape, double mean, double std, Generator& gen, DType dtype, Device device) {
  MOELAB_CHECK(is_floating(dtype), "normal", "needs float32 or float64, got ", dtype, " (make float32 and convert)");
  MOELAB_CHECK(std >= 0, "normal", "std must be >= 0, got ", std);
  return make_on_host(shape, dtype, device, [&](std::int64_t) { return mean + std * gen.next_normal(); });
}

}  // namespace moelab
