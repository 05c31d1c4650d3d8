// TEMPORARY (removed before landing): placeholders for group A kernels while they are written.
#include "core/cpu/cpu_backend.h"
namespace moelab {
void CpuBackend::unary(kernels::UnaryOp, const Tensor&, Tensor&) { fail("unary", "pending"); }
void CpuBackend::binary(kernels::BinaryOp, const Tensor&, const Tensor&, Tensor&) { fail("binary", "pending"); }
void CpuBackend::binary_scalar(kernels::BinaryOp, const Tensor&, double, bool, Tensor&) { fail("binary_scalar", "pending"); }
void CpuBackend::relu_backward(const Tensor&, const Tensor&, Tensor&) { fail("relu_backward", "pending"); }
void CpuBackend::sum(const Tensor&, std::int64_t, std::int64_t, std::int64_t, Tensor&) { fail("sum", "pending"); }
void CpuBackend::max(const Tensor&, std::int64_t, std::int64_t, std::int64_t, Tensor&, Tensor*) { fail("max", "pending"); }
void CpuBackend::softmax(const Tensor&, Tensor&) { fail("softmax", "pending"); }
void CpuBackend::softmax_backward(const Tensor&, const Tensor&, Tensor&) { fail("softmax_backward", "pending"); }
void CpuBackend::log_softmax(const Tensor&, Tensor&) { fail("log_softmax", "pending"); }
void CpuBackend::log_softmax_backward(const Tensor&, const Tensor&, Tensor&) { fail("log_softmax_backward", "pending"); }
std::int64_t CpuBackend::cross_entropy(const Tensor&, const Tensor&, int, Tensor&, Tensor&) { fail("cross_entropy", "pending"); }
void CpuBackend::cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, double, int, Tensor&) { fail("cross_entropy_backward", "pending"); }
}  // namespace moelab
