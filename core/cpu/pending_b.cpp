// TEMPORARY (removed before landing): placeholders for group B kernels while they are written.
#include "core/cpu/cpu_backend.h"
namespace moelab {
void CpuBackend::index_select(const Tensor&, const Tensor&, Tensor&) { fail("index_select", "pending"); }
void CpuBackend::scatter_add_rows(const Tensor&, const Tensor&, Tensor&) { fail("scatter_add_rows", "pending"); }
void CpuBackend::gather_last(const Tensor&, const Tensor&, Tensor&) { fail("gather_last", "pending"); }
void CpuBackend::scatter_add_last(const Tensor&, const Tensor&, Tensor&) { fail("scatter_add_last", "pending"); }
void CpuBackend::topk(const Tensor&, int, Tensor&, Tensor&) { fail("topk", "pending"); }
void CpuBackend::argsort(const Tensor&, Tensor&) { fail("argsort", "pending"); }
void CpuBackend::copy_block(const Tensor&, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, Tensor&, std::int64_t, std::int64_t) { fail("copy_block", "pending"); }
void CpuBackend::permute(const Tensor&, const std::vector<int>&, Tensor&) { fail("permute", "pending"); }
void CpuBackend::causal_mask(const Tensor&, double, Tensor&) { fail("causal_mask", "pending"); }
void CpuBackend::rmsnorm(const Tensor&, const Tensor&, double, Tensor&, Tensor&) { fail("rmsnorm", "pending"); }
void CpuBackend::rmsnorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&) { fail("rmsnorm_backward", "pending"); }
void CpuBackend::layernorm(const Tensor&, const Tensor&, const Tensor&, double, Tensor&, Tensor&, Tensor&) { fail("layernorm", "pending"); }
void CpuBackend::layernorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&) { fail("layernorm_backward", "pending"); }
}  // namespace moelab
