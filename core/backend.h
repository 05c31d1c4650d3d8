// core/backend.h — the interface a device implements: memory, copies and every kernel.
//
// core/kernels.h is what users call; it checks arguments, allocates outputs, then calls the
// Backend of the inputs' device. A Backend therefore receives tensors that are already valid,
// contiguous, on its device, with outputs already shaped: it only computes. Two implement it:
//   core/cpu/   CpuBackend, our own GEMM and loops with Eigen for vectorised maths (always built)
//   cuda/       CudaBackend, on cuBLAS/cuRAND/CUDA kernels, or a stub when built without CUDA
// A new device implements this class; nothing above core/ changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/broadcast.h"
#include "core/kernels.h"
#include "core/tensor.h"

namespace moelab {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // Memory and copies. Copies between host and device go through the device's backend.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr, std::size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_on_device(void* dst, const void* src, std::size_t bytes) = 0;
  // Waits until every kernel and copy issued so far has finished. Devices that run work
  // asynchronously (CUDA: one stream) override it; on the CPU every call has already finished, so
  // the default does nothing. Benchmarks call it before reading the clock.
  virtual void synchronize() {}

  // Kernels: the same meaning as in core/kernels.h; outputs come last, preallocated.
  virtual void fill(Tensor& x, double value) = 0;
  virtual void cast(const Tensor& x, Tensor& out) = 0;
  // x[i] := start + step * i (computed in double, then converted to x's dtype): arange on the device.
  virtual void arange(Tensor& x, double start, double step) = 0;
  // Random fills of a float tensor (core/kernels.h); both advance gen's counter by the words used.
  virtual void fill_uniform(Tensor& x, double low, double high, Generator& gen) = 0;
  virtual void fill_normal(Tensor& x, double mean, double std, Generator& gen) = 0;
  // a: [B, M, K] or, when trans_a, [B, K, M]; b: [B, K, N] or [B, N, K]; out: [B, M, N].
  // 2-D products arrive as B == 1. a and b have one dtype; out has it too, except that two
  // bfloat16 operands give a float32 out (bf16 products, float32 sums: core/kernels/matmul.cpp).
  virtual void matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, Tensor& out) = 0;
  // Grouped products (core/kernels.h); offsets: int32 [E + 1] on this device, not yet checked:
  // the backend checks 0 = offsets[0] <= ... <= offsets[E] <= N where they live (the CPU throws
  // moelab::Error named "grouped_matmul"; CUDA reports at the next synchronisation).
  // x: [N, in], w: [E, in, out] or, when trans_w, [E, out, in]; out: [N, out], rows past
  // offsets[E] set to 0. Dtypes as matmul's: two bfloat16 operands give a float32 out (and dw).
  virtual void grouped_matmul(const Tensor& x, const Tensor& w, const Tensor& offsets, bool trans_w, Tensor& out) = 0;
  // x: [N, in], dy: [N, out]; dw: [E, in, out], dw[e] = x_e^T @ dy_e (zeros for empty groups).
  virtual void grouped_matmul_weight_grad(const Tensor& x, const Tensor& dy, const Tensor& offsets, Tensor& dw) = 0;
  // Routing (core/kernels.h, ExpertGroups): ids int32 [T, k]; outputs preallocated: kept [T, k],
  // order [T*k], rows [T*k], offsets [E + 1], wanted [E]. An id outside [-1, E): the CPU throws
  // IndexRangeError (position, value, limit E) before writing; CUDA counts it as dropped and
  // reports it at the next synchronisation.
  virtual void group_by_expert(const Tensor& ids, std::int64_t capacity, Tensor& kept, Tensor& order, Tensor& rows,
                               Tensor& offsets, Tensor& wanted) = 0;
  // offsets: int32 [E + 1] (as grouped_matmul checks them) -> out: int32 [rows].
  virtual void row_groups(const Tensor& offsets, Tensor& out) = 0;
  virtual void unary(kernels::UnaryOp op, const Tensor& x, Tensor& out) = 0;
  // out has a's shape; b has a's numel (elementwise), 1 (scalar) or divides it (b is a's
  // trailing axes and repeats).
  virtual void binary(kernels::BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // Any other broadcast: out (not empty) has the broadcast shape, walked as plan describes.
  virtual void binary_broadcast(kernels::BinaryOp op, const Tensor& a, const Tensor& b, const BroadcastPlan& plan,
                                Tensor& out) = 0;
  virtual void binary_scalar(kernels::BinaryOp op, const Tensor& a, double b, bool scalar_first, Tensor& out) = 0;
  virtual void relu_backward(const Tensor& x, const Tensor& grad, Tensor& out) = 0;
  // x seen as [outer, n, inner]; out: [outer, inner]. For sum_all use outer = inner = 1.
  virtual void sum(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& out) = 0;
  virtual void max(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& values,
                   Tensor* indices) = 0;
  // Softmax along the middle axis of x seen as [outer, n, inner] (inner = 1: the last axis).
  virtual void softmax(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& y) = 0;
  virtual void softmax_backward(const Tensor& y, const Tensor& dy, std::int64_t outer, std::int64_t n,
                                std::int64_t inner, Tensor& dx) = 0;
  virtual void log_softmax(const Tensor& x, Tensor& y) = 0;
  virtual void log_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) = 0;
  // loss: [], logsumexp: [N], kept: [] float64, the number of rows not ignored. Targets are not
  // range-checked by the front end: the backend checks them where they live (moelab::Error named
  // "cross_entropy"; CUDA reports it at the next synchronisation, see cuda/device_errors.h).
  virtual void cross_entropy(const Tensor& logits, const Tensor& targets, int ignore_index, Tensor& loss,
                             Tensor& logsumexp, Tensor& kept) = 0;
  // dloss: [] float64, kept: [] float64 from the forward; scale = double(dloss) / kept
  // (0 when kept is 0) is formed on the device, so nothing is read back.
  virtual void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& logsumexp,
                                      const Tensor& dloss, const Tensor& kept, int ignore_index, Tensor& dlogits) = 0;
  // The index ops below check their indices themselves, where the indices live (the front
  // end never copies them to the host): the CPU throws IndexRangeError before touching memory;
  // CUDA skips the bad index in the kernel and reports it at the next synchronisation.
  virtual void index_select(const Tensor& src, const Tensor& index, Tensor& out) = 0;
  virtual void scatter_add_rows(const Tensor& src, const Tensor& index, Tensor& out) = 0;  // out zeroed here
  // out[index[m]] += scale[m] * src[m]; and its backward (core/kernels.h). out zeroed here.
  virtual void scatter_add_rows_scaled(const Tensor& src, const Tensor& scale, const Tensor& index, Tensor& out) = 0;
  virtual void scatter_add_rows_scaled_backward(const Tensor& dy, const Tensor& src, const Tensor& scale,
                                                const Tensor& index, Tensor& dsrc, Tensor& dscale) = 0;
  virtual void gather_last(const Tensor& src, const Tensor& index, Tensor& out) = 0;
  virtual void scatter_add_last(const Tensor& src, const Tensor& index, Tensor& out) = 0;  // out zeroed here
  virtual void topk(const Tensor& x, int k, Tensor& values, Tensor& indices) = 0;
  virtual void argsort(const Tensor& keys, Tensor& out) = 0;
  // Copies x seen as [outer, n, inner] rows [start, start+len) of the middle axis into
  // out seen as [outer, out_n, inner] at middle offset out_start. concat/split/narrow use it.
  virtual void copy_block(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, std::int64_t start,
                          std::int64_t len, Tensor& out, std::int64_t out_n, std::int64_t out_start) = 0;
  virtual void permute(const Tensor& x, const std::vector<int>& order, Tensor& out) = 0;
  virtual void causal_mask(const Tensor& scores, double fill, Tensor& out) = 0;
  // q: [B, T, H, hd], k, v: [B, S, H, hd] (S >= T when causal) -> y: [B, T, H, hd], p: [B, H, T, S]
  // (core/kernels.h attention); causal: query t sees keys 0 .. t + S - T, else every key.
  virtual void attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal, Tensor& y,
                         Tensor& p) = 0;
  virtual void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                  const Tensor& p, const Tensor& dy, Tensor& dq, Tensor& dk, Tensor& dv) = 0;
  virtual void rmsnorm(const Tensor& x, const Tensor& w, double eps, Tensor& y, Tensor& rstd) = 0;
  virtual void rmsnorm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dy, Tensor& dx,
                                Tensor& dw) = 0;
  virtual void layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, Tensor& y, Tensor& mean,
                         Tensor& rstd) = 0;
  virtual void layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                                  const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db) = 0;
  // x, out: [B, T, H, hd]; rotates pairs by +-(position_offset + t) * theta^(-2i/hd).
  virtual void rope(const Tensor& x, std::int64_t position_offset, double theta, bool inverse, Tensor& out) = 0;
  // Soft MoE token-order mixing (core/kernels.h): w [B, m, n, p], u [B, m, f, n], v [B, f, n, p].
  virtual void slot_mix_reduce(const Tensor& w, const Tensor& u, Tensor& out) = 0;  // out [B, f, n, p]
  virtual void slot_mix_expand(const Tensor& w, const Tensor& v, Tensor& out) = 0;  // out [B, m, f, n]
  virtual void slot_mix_dot(const Tensor& u, const Tensor& v, Tensor& out) = 0;     // out [B, m, n, p]
  // Slot-order mixing, expert-major slots: w [B, m, S], x [B, m, d], y [S, B, d].
  virtual void slot_dispatch(const Tensor& w, const Tensor& x, Tensor& out) = 0;  // out [S, B, d]
  virtual void slot_combine(const Tensor& w, const Tensor& y, Tensor& out) = 0;   // out [B, m, d]
  virtual void slot_dot(const Tensor& x, const Tensor& y, Tensor& out) = 0;       // out [B, m, S]
  // In-place optimizer updates; every tensor has param's shape, dtype and device (core/kernels.h).
  virtual void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                           const kernels::AdamHyper& h) = 0;
  virtual void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const kernels::SgdHyper& h) = 0;
};

// Thrown by a backend's index op for the first index outside [0, limit) (flat position `position`).
// core/kernels/index.cpp catches it and rethrows the op's own message (op name, argument, shapes).
class IndexRangeError : public Error {
 public:
  IndexRangeError(std::int64_t position, std::int64_t value, std::int64_t limit);
  std::int64_t position, value, limit;
};

// The backend for a device. CPU always exists; CUDA throws moelab::Error when this build has no
// CUDA or the machine has no GPU.
Backend& backend(Device device);
Backend& cpu_backend();
// Defined in cuda/ (the real one, or the stub when built without CUDA).
Backend& cuda_backend();
// Whether a usable CUDA device is present (false in builds without CUDA). Never throws.
bool cuda_available();
// Why cuda_available() answers as it does. `no_gpu` is true when the reason is only that there is
// nothing to use (a build without CUDA, no NVIDIA driver installed, a driver that sees no device);
// it is false when a GPU should be usable but is not (a driver older than the CUDA runtime, a
// device that failed to initialise...): a GPU test must then fail, not skip. `description` says
// what was found in words: the GPU, its driver and runtime versions, or the error string.
struct CudaProbe {
  bool available = false;
  bool no_gpu = true;
  std::string description;
};
const CudaProbe& cuda_probe();  // probed once, on the first call
// How float32 matrix products run on the GPU (no effect on the CPU or in builds without CUDA):
//   Float32  (the default) full float32 on the CUDA cores: the CPU/GPU parity tolerances hold.
//   TF32     the tensor cores with operands rounded to TF32 (10 mantissa bits, about 1e-3
//            relative error): cuBLAS's TF32 math mode for the dense products and the grouped
//            expert products' tensor-core tile (cuda/mma_tile_gemm.cuh).
//   TF32x3   the expert products on the tensor cores at float32 accuracy (each operand split
//            into two TF32 parts, three products: cuda/mma_tile_gemm.cuh); cuBLAS, which has no
//            such mode, keeps full float32 for the dense products.
// bfloat16 operands (--precision bf16) always use the tensor cores, whatever this says.
enum class CudaFloat32Products { Float32, TF32, TF32x3 };
void set_cuda_float32_products(CudaFloat32Products mode);
CudaFloat32Products cuda_float32_products();

// The most GPU memory the tensors held at once since the process started: the caching
// allocator's high-water mark of blocks handed out (sizes rounded as cuda/caching_allocator.h
// rounds them, as torch.cuda.max_memory_allocated counts PyTorch's blocks); 0 without CUDA.
std::size_t cuda_peak_memory_bytes();

// TEST-ONLY. While one is alive, backend(device) returns `stand_in` for every device of `type`.
// tests/counting_backend.h uses it to run "CUDA" tensors through a transfer-counting wrapper of
// the CPU backend, so that a CPU-only machine sees every host<->device copy a GPU run would make.
// Every tensor created under the override must be destroyed before it ends (its memory belongs to
// the stand-in). Not thread-safe; overrides nest (each restores the one before it).
class ScopedBackendOverride {
 public:
  ScopedBackendOverride(DeviceType type, Backend& stand_in);
  ~ScopedBackendOverride();
  ScopedBackendOverride(const ScopedBackendOverride&) = delete;
  ScopedBackendOverride& operator=(const ScopedBackendOverride&) = delete;

 private:
  DeviceType type_;
  Backend* previous_;
};

}  // namespace moelab
