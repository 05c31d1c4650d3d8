// core/kernels/copy.cpp — checks and dispatch for fill, copy and cast.
#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {

void fill(Tensor& x, double value) {
  check_defined(x, "fill");
  backend(x.device()).fill(x, value);
}

void copy(Tensor& dst, const Tensor& src) {
  check_defined(dst, "copy", "dst");
  check_defined(src, "copy", "src");
  MOELAB_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype(), "copy", "dst ", dst.str(),
               " and src ", src.str(), " differ in shape or dtype");
  const std::size_t bytes = src.nbytes();
  if (dst.device() == src.device()) {
    backend(dst.device()).copy_on_device(dst.raw(), src.raw(), bytes);
  } else if (src.device().is_cpu()) {
    backend(dst.device()).copy_from_host(dst.raw(), src.raw(), bytes);
  } else if (dst.device().is_cpu()) {
    backend(src.device()).copy_to_host(dst.raw(), src.raw(), bytes);
  } else {
    Tensor staged = src.to(Device::cpu());
    backend(dst.device()).copy_from_host(dst.raw(), staged.raw(), bytes);
  }
}

Tensor cast(const Tensor& x, DType dtype) {
  check_defined(x, "cast");
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  backend(x.device()).cast(x, out);
  return out;
}

}  // namespace moelab::kernels
