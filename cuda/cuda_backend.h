// cuda/cuda_backend.h — the GPU implementation of Backend (core/backend.h) on cuBLAS, cuRAND and
// CUDA kernels of our own.
//
// One class, its methods defined one concept per file in cuda/, mirroring core/cpu/ file for file:
// memory.cu, copy.cu, random_fill.cu, matmul.cu, grouped_matmul.cu, routing.cu, elementwise.cu,
// reduce.cu, softmax.cu, cross_entropy.cu, index.cu, sort.cu, shape_ops.cu, mask.cu, attention.cu, norm.cu, rope.cu,
// slot_mix.cu, optim.cu. cuda/group_offsets.cuh checks the device-side group offsets that routing.cu makes and
// grouped_matmul.cu reads; cuda/device_errors.cuh reports what kernels find wrong.
// cuda/context.h holds what they share (stream, cuBLAS handle, cuRAND generator, error checks),
// cuda/caching_allocator.h the device memory cache, cuda/device_utils.cuh dtype dispatch, device
// maths and block reductions, cuda/gemm.cuh the row-major GEMM on cuBLAS. Inputs are already checked and contiguous (core/kernels/ does that);
// methods only compute, enqueued on the one stream, so they run in program order.
#pragma once

#include "core/backend.h"

namespace moelab {

class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "cuda"; }

  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override;
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override;
  void copy_on_device(void* dst, const void* src, std::size_t bytes) override;
  void synchronize() override;  // memory.cu: waits for the stream (cuda::synchronize)

  void fill(Tensor& x, double value) override;
  void cast(const Tensor& x, Tensor& out) override;
  void arange(Tensor& x, double start, double step) override;  // copy.cu
  void fill_uniform(Tensor& x, double low, double high, Generator& gen) override;  // random_fill.cu
  void fill_normal(Tensor& x, double mean, double std, Generator& gen) override;   // random_fill.cu
  void matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, Tensor& out) override;
  void grouped_matmul(const Tensor& x, const Tensor& w, const Tensor& offsets, bool trans_w,
                      Tensor& out) override;  // grouped_matmul.cu
  void grouped_matmul_weight_grad(const Tensor& x, const Tensor& dy, const Tensor& offsets,
                                  Tensor& dw) override;  // grouped_matmul.cu
  void group_by_expert(const Tensor& ids, std::int64_t capacity, Tensor& kept, Tensor& order, Tensor& rows,
                       Tensor& offsets, Tensor& wanted) override;  // routing.cu
  void row_groups(const Tensor& offsets, Tensor& out) override;  // routing.cu
  void unary(kernels::UnaryOp op, const Tensor& x, Tensor& out) override;
  void binary(kernels::BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override;
  void binary_broadcast(kernels::BinaryOp op, const Tensor& a, const Tensor& b, const BroadcastPlan& plan,
                        Tensor& out) override;
  void binary_scalar(kernels::BinaryOp op, const Tensor& a, double b, bool scalar_first, Tensor& out) override;
  void relu_backward(const Tensor& x, const Tensor& grad, Tensor& out) override;
  void sum(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& out) override;
  void max(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& values,
           Tensor* indices) override;
  void softmax(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& y) override;
  void softmax_backward(const Tensor& y, const Tensor& dy, std::int64_t outer, std::int64_t n, std::int64_t inner,
                        Tensor& dx) override;
  void log_softmax(const Tensor& x, Tensor& y) override;
  void log_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override;
  void cross_entropy(const Tensor& logits, const Tensor& targets, int ignore_index, Tensor& loss, Tensor& logsumexp,
                     Tensor& kept) override;
  void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& logsumexp,
                              const Tensor& dloss, const Tensor& kept, int ignore_index, Tensor& dlogits) override;
  void index_select(const Tensor& src, const Tensor& index, Tensor& out) override;
  void scatter_add_rows(const Tensor& src, const Tensor& index, Tensor& out) override;
  void scatter_add_rows_scaled(const Tensor& src, const Tensor& scale, const Tensor& index, Tensor& out) override;
  void scatter_add_rows_scaled_backward(const Tensor& dy, const Tensor& src, const Tensor& scale, const Tensor& index,
                                        Tensor& dsrc, Tensor& dscale) override;
  void gather_last(const Tensor& src, const Tensor& index, Tensor& out) override;
  void scatter_add_last(const Tensor& src, const Tensor& index, Tensor& out) override;
  void topk(const Tensor& x, int k, Tensor& values, Tensor& indices) override;
  void argsort(const Tensor& keys, Tensor& out) override;
  void copy_block(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, std::int64_t start,
                  std::int64_t len, Tensor& out, std::int64_t out_n, std::int64_t out_start) override;
  void permute(const Tensor& x, const std::vector<int>& order, Tensor& out) override;
  void causal_mask(const Tensor& scores, double fill, Tensor& out) override;
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal, Tensor& y,
                 Tensor& p) override;
  void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                          const Tensor& p, const Tensor& dy, Tensor& dq, Tensor& dk, Tensor& dv) override;
  void rmsnorm(const Tensor& x, const Tensor& w, double eps, Tensor& y, Tensor& rstd) override;
  void rmsnorm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dy, Tensor& dx,
                        Tensor& dw) override;
  void layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, Tensor& y, Tensor& mean,
                 Tensor& rstd) override;
  void layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd, const Tensor& dy,
                          Tensor& dx, Tensor& dw, Tensor& db) override;
  void rope(const Tensor& x, std::int64_t position_offset, double theta, bool inverse, Tensor& out) override;  // rope.cpp
  void slot_mix_reduce(const Tensor& w, const Tensor& u, Tensor& out) override;  // slot_mix.cu
  void slot_mix_expand(const Tensor& w, const Tensor& v, Tensor& out) override;  // slot_mix.cu
  void slot_mix_dot(const Tensor& u, const Tensor& v, Tensor& out) override;     // slot_mix.cu
  void slot_dispatch(const Tensor& w, const Tensor& x, Tensor& out) override;  // slot_mix.cu
  void slot_combine(const Tensor& w, const Tensor& y, Tensor& out) override;   // slot_mix.cu
  void slot_dot(const Tensor& x, const Tensor& y, Tensor& out) override;       // slot_mix.cu
  void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                   const kernels::AdamHyper& h) override;  // optim.cpp
  void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const kernels::SgdHyper& h) override;
};

namespace cuda {
// The attention's three passes over its scores [B*H, T, S] in one kernel (softmax.cu), for rows
// the warp-per-row softmax takes (S <= 1024, MOELAB_CUDA_GENERIC unset); false: not launched,
// run the separate kernels. Bitwise the separate kernels' results:
//   p = softmax(causal_mask(scale * scores, -inf))  (the forward, attention.cu)
//   ds = scale * softmax_backward(p, dp)             (the backward)
bool fused_attention_softmax(const Tensor& scores, double scale, Tensor& p);
bool fused_attention_softmax_backward(const Tensor& p, const Tensor& dp, double scale, Tensor& ds);
}  // namespace cuda

}  // namespace moelab
