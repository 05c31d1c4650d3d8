// core/tensor.cpp — the Tensor handle: views, copies, reading values back, argument checks.
#include "core/tensor.h"

#include <cstring>

#include "core/backend.h"
#include "core/kernels.h"

namespace moelab {

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (std::int64_t s : shape.sizes()) MOELAB_CHECK(s >= 0, "empty", "negative size in shape ", shape);
  Tensor t;
  t.storage_ = std::make_shared<Storage>(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype), device);
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }

void* Tensor::raw() {
  MOELAB_CHECK(defined(), "Tensor::data", "the tensor is undefined");
  return static_cast<char*>(storage_->data()) + offset_;
}

const void* Tensor::raw() const {
  MOELAB_CHECK(defined(), "Tensor::data", "the tensor is undefined");
  return static_cast<const char*>(storage_->data()) + offset_;
}

void Tensor::check_type(DType wanted) const {
  MOELAB_CHECK(dtype_ == wanted, "Tensor::data", "asked for ", dtype_name(wanted), " data of a ", dtype_name(dtype_),
               " tensor ", shape_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  check_defined(*this, "reshape");
  Shape resolved = shape;
  int inferred = -1;
  std::int64_t known = 1;
  for (int i = 0; i < resolved.rank(); ++i) {
    if (resolved[i] == -1) {
      MOELAB_CHECK(inferred < 0, "reshape", "more than one -1 in ", shape);
      inferred = i;
    } else {
      MOELAB_CHECK(resolved[i] >= 0, "reshape", "negative size in ", shape);
      known *= resolved[i];
    }
  }
  if (inferred >= 0) {
    MOELAB_CHECK(known > 0 && numel() % known == 0, "reshape", "cannot infer -1 reshaping ", shape_, " to ", shape);
    resolved[inferred] = numel() / known;
  }
  MOELAB_CHECK(resolved.numel() == numel(), "reshape", "cannot reshape ", shape_, " (", numel(), " elements) to ",
               shape);
  Tensor view = *this;
  view.shape_ = resolved;
  return view;
}

Tensor Tensor::slice(std::int64_t start, std::int64_t length) const {
  check_defined(*this, "slice");
  MOELAB_CHECK(rank() >= 1, "slice", "cannot slice a 0-d tensor");
  MOELAB_CHECK(start >= 0 && length >= 0 && start + length <= shape_[0], "slice", "rows [", start, ", ",
               start + length, ") are out of range for shape ", shape_);
  Tensor view = *this;
  view.offset_ += static_cast<std::size_t>(start * shape_.inner(0)) * dtype_size(dtype_);
  view.shape_[0] = length;
  return view;
}

Tensor Tensor::clone() const {
  check_defined(*this, "clone");
  Tensor out = empty(shape_, dtype_, device());
  kernels::copy(out, *this);
  return out;
}

Tensor Tensor::to(Device target) const {
  check_defined(*this, "to");
  if (target == device()) return *this;
  Tensor out = empty(shape_, dtype_, target);
  kernels::copy(out, *this);
  return out;
}

void Tensor::move_storage_to(Device target) {
  check_defined(*this, "move_storage_to");
  storage_->move_to(target);
}

Tensor Tensor::to(DType target) const {
  check_defined(*this, "to");
  if (target == dtype_) return *this;
  return kernels::cast(*this, target);
}

template <class T>
T Tensor::item() const {
  check_defined(*this, "item");
  MOELAB_CHECK(numel() == 1, "item", "needs exactly one element, the tensor has shape ", shape_);
  const Tensor host = to(Device::cpu()).to(dtype_of<T>());
  return host.data<T>()[0];
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  check_defined(*this, "to_vector");
  Tensor host = to(Device::cpu()).to(dtype_of<T>());
  const T* p = host.data<T>();
  return std::vector<T>(p, p + numel());
}

template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template std::int32_t Tensor::item<std::int32_t>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int32_t> Tensor::to_vector<std::int32_t>() const;

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream s;
  s << "Tensor(" << dtype_ << ", " << device() << ", " << shape_ << ")";
  return s.str();
}

void check_defined(const Tensor& x, const char* op, const char* what) {
  MOELAB_CHECK(x.defined(), op, what, " is an undefined tensor");
}

void check_floating(const Tensor& x, const char* op, const char* what) {
  check_defined(x, op, what);
  MOELAB_CHECK(is_floating(x.dtype()), op, what, " must be float32 or float64, got ", x.dtype(), " ", x.shape());
}

void check_dtype(const Tensor& x, DType dtype, const char* op, const char* what) {
  check_defined(x, op, what);
  MOELAB_CHECK(x.dtype() == dtype, op, what, " must be ", dtype, ", got ", x.dtype(), " ", x.shape());
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  MOELAB_CHECK(a.device() == b.device(), op, "inputs are on different devices (", a.device(), " and ", b.device(),
               ")");
}

}  // namespace moelab
