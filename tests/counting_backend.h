// tests/counting_backend.h — TEST-ONLY: a Backend that counts host<->device transfers, so that
// "a training step reads at most one value back from the device" (README) is checked on the CPU.
//
// How the count is made to equal a GPU's. On Device::cpu() nothing can be counted: a CPU tensor's
// to(Device::cpu()) returns the tensor itself and item()/to_vector() read its memory directly, so
// no call reaches any backend, and data made on the host (a batch) looks the same as data the
// model made. So the test does not count on the CPU device; it runs on Device::cuda() with this
// wrapper standing in for the CUDA backend (core/backend.h, ScopedBackendOverride):
//
//   CountingBackend counting(cpu_backend());
//   ScopedBackendOverride stand_in(DeviceType::CUDA, counting);
//   ... model.to(Device::cuda()); batch.to(Device::cuda()); train steps ...
//   counting.reads()  counting.uploads()
//
// "CUDA" memory is then host memory from the CPU backend and every kernel is the CPU's, but every
// line of code above the backends (Tensor, core/kernels/, autograd/, nn/) takes exactly the path
// it takes on a GPU: each time it pulls device data to the host (Tensor::to(cpu), item,
// to_vector, an argument check's host copy) it calls copy_to_host, and each upload calls
// copy_from_host, just as with CudaBackend. Those two calls are what is counted (calls and bytes):
//   reads()    device->host copies (each one a stream synchronisation on a GPU)
//   uploads()  host->device copies
// copy_on_device and kernels are delegated without counting. What this cannot see: copies a
// backend makes inside itself (a CudaBackend method calling its own copy_to_host). cuda/ makes
// none on the dense training path; keep it that way (grep copy_to_host cuda/).
// Every tensor created under the override must die before it ends (its memory is the wrapped
// backend's): scope the model and tensors inside the override.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/backend.h"

namespace moelab::testing {

class CountingBackend : public Backend {
 public:
  explicit CountingBackend(Backend& inner) : inner_(inner) {}

  std::int64_t reads() const { return reads_; }             // copy_to_host calls
  std::int64_t read_bytes() const { return read_bytes_; }
  std::int64_t uploads() const { return uploads_; }         // copy_from_host calls
  std::int64_t upload_bytes() const { return upload_bytes_; }
  void reset() { reads_ = read_bytes_ = uploads_ = upload_bytes_ = 0; }

  const char* name() const override { return "counting"; }
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
    ++uploads_;
    upload_bytes_ += static_cast<std::int64_t>(bytes);
    inner_.copy_from_host(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    ++reads_;
    read_bytes_ += static_cast<std::int64_t>(bytes);
    inner_.copy_to_host(dst, src, bytes);
  }

  // Everything else: delegated unchanged.
  void* allocate(std::size_t bytes) override { return inner_.allocate(bytes); }
  void deallocate(void* ptr, std::size_t bytes) override { inner_.deallocate(ptr, bytes); }
  void copy_on_device(void* dst, const void* src, std::size_t bytes) override {
    inner_.copy_on_device(dst, src, bytes);
  }
  void synchronize() override { inner_.synchronize(); }
  void fill(Tensor& x, double value) override { inner_.fill(x, value); }
  void cast(const Tensor& x, Tensor& out) override { inner_.cast(x, out); }
  void arange(Tensor& x, double start, double step) override { inner_.arange(x, start, step); }
  void fill_uniform(Tensor& x, double low, double high, Generator& gen) override {
    inner_.fill_uniform(x, low, high, gen);
  }
  void fill_normal(Tensor& x, double mean, double std, Generator& gen) override {
    inner_.fill_normal(x, mean, std, gen);
  }
  void matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, Tensor& out) override {
    inner_.matmul(a, b, trans_a, trans_b, out);
  }
  void grouped_matmul(const Tensor& x, const Tensor& w, const Tensor& offsets, bool trans_w, Tensor& out) override {
    inner_.grouped_matmul(x, w, offsets, trans_w, out);
  }
  void grouped_matmul_weight_grad(const Tensor& x, const Tensor& dy, const Tensor& offsets, Tensor& dw) override {
    inner_.grouped_matmul_weight_grad(x, dy, offsets, dw);
  }
  void group_by_expert(const Tensor& ids, std::int64_t capacity, Tensor& kept, Tensor& order, Tensor& rows,
                       Tensor& offsets, Tensor& wanted) override {
    inner_.group_by_expert(ids, capacity, kept, order, rows, offsets, wanted);
  }
  void row_groups(const Tensor& offsets, Tensor& out) override { inner_.row_groups(offsets, out); }
  void unary(kernels::UnaryOp op, const Tensor& x, Tensor& out) override { inner_.unary(op, x, out); }
  void binary(kernels::BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override {
    inner_.binary(op, a, b, out);
  }
  void binary_broadcast(kernels::BinaryOp op, const Tensor& a, const Tensor& b, const BroadcastPlan& plan,
                        Tensor& out) override {
    inner_.binary_broadcast(op, a, b, plan, out);
  }
  void binary_scalar(kernels::BinaryOp op, const Tensor& a, double b, bool scalar_first, Tensor& out) override {
    inner_.binary_scalar(op, a, b, scalar_first, out);
  }
  void relu_backward(const Tensor& x, const Tensor& grad, Tensor& out) override { inner_.relu_backward(x, grad, out); }
  void sum(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& out) override {
    inner_.sum(x, outer, n, inner, out);
  }
  void max(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& values,
           Tensor* indices) override {
    inner_.max(x, outer, n, inner, values, indices);
  }
  void softmax(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, Tensor& y) override {
    inner_.softmax(x, outer, n, inner, y);
  }
  void softmax_backward(const Tensor& y, const Tensor& dy, std::int64_t outer, std::int64_t n, std::int64_t inner,
                        Tensor& dx) override {
    inner_.softmax_backward(y, dy, outer, n, inner, dx);
  }
  void log_softmax(const Tensor& x, Tensor& y) override { inner_.log_softmax(x, y); }
  void log_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override {
    inner_.log_softmax_backward(y, dy, dx);
  }
  void cross_entropy(const Tensor& logits, const Tensor& targets, int ignore_index, Tensor& loss, Tensor& logsumexp,
                     Tensor& kept) override {
    inner_.cross_entropy(logits, targets, ignore_index, loss, logsumexp, kept);
  }
  void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& logsumexp, const Tensor& dloss,
                              const Tensor& kept, int ignore_index, Tensor& dlogits) override {
    inner_.cross_entropy_backward(logits, targets, logsumexp, dloss, kept, ignore_index, dlogits);
  }
  void index_select(const Tensor& src, const Tensor& index, Tensor& out) override {
    inner_.index_select(src, index, out);
  }
  void scatter_add_rows(const Tensor& src, const Tensor& index, Tensor& out) override {
    inner_.scatter_add_rows(src, index, out);
  }
  void scatter_add_rows_scaled(const Tensor& src, const Tensor& scale, const Tensor& index, Tensor& out) override {
    inner_.scatter_add_rows_scaled(src, scale, index, out);
  }
  void scatter_add_rows_scaled_backward(const Tensor& dy, const Tensor& src, const Tensor& scale, const Tensor& index,
                                        Tensor& dsrc, Tensor& dscale) override {
    inner_.scatter_add_rows_scaled_backward(dy, src, scale, index, dsrc, dscale);
  }
  void gather_last(const Tensor& src, const Tensor& index, Tensor& out) override {
    inner_.gather_last(src, index, out);
  }
  void scatter_add_last(const Tensor& src, const Tensor& index, Tensor& out) override {
    inner_.scatter_add_last(src, index, out);
  }
  void topk(const Tensor& x, int k, Tensor& values, Tensor& indices) override { inner_.topk(x, k, values, indices); }
  void argsort(const Tensor& keys, Tensor& out) override { inner_.argsort(keys, out); }
  void copy_block(const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner, std::int64_t start,
                  std::int64_t len, Tensor& out, std::int64_t out_n, std::int64_t out_start) override {
    inner_.copy_block(x, outer, n, inner, start, len, out, out_n, out_start);
  }
  void permute(const Tensor& x, const std::vector<int>& order, Tensor& out) override { inner_.permute(x, order, out); }
  void causal_mask(const Tensor& scores, double fill, Tensor& out) override { inner_.causal_mask(scores, fill, out); }
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal, Tensor& y,
                 Tensor& p) override {
    inner_.attention(q, k, v, scale, causal, y, p);
  }
  void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                          const Tensor& p, const Tensor& dy, Tensor& dq, Tensor& dk, Tensor& dv) override {
    inner_.attention_backward(q, k, v, scale, causal, p, dy, dq, dk, dv);
  }
  void rmsnorm(const Tensor& x, const Tensor& w, double eps, Tensor& y, Tensor& rstd) override {
    inner_.rmsnorm(x, w, eps, y, rstd);
  }
  void rmsnorm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dy, Tensor& dx,
                        Tensor& dw) override {
    inner_.rmsnorm_backward(x, w, rstd, dy, dx, dw);
  }
  void layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, Tensor& y, Tensor& mean,
                 Tensor& rstd) override {
    inner_.layernorm(x, w, b, eps, y, mean, rstd);
  }
  void layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd, const Tensor& dy,
                          Tensor& dx, Tensor& dw, Tensor& db) override {
    inner_.layernorm_backward(x, w, mean, rstd, dy, dx, dw, db);
  }
  void rope(const Tensor& x, std::int64_t position_offset, double theta, bool inverse, Tensor& out) override {
    inner_.rope(x, position_offset, theta, inverse, out);
  }
  void slot_mix_reduce(const Tensor& w, const Tensor& u, Tensor& out) override { inner_.slot_mix_reduce(w, u, out); }
  void slot_mix_expand(const Tensor& w, const Tensor& v, Tensor& out) override { inner_.slot_mix_expand(w, v, out); }
  void slot_mix_dot(const Tensor& u, const Tensor& v, Tensor& out) override { inner_.slot_mix_dot(u, v, out); }
  void slot_dispatch(const Tensor& w, const Tensor& x, Tensor& out) override { inner_.slot_dispatch(w, x, out); }
  void slot_combine(const Tensor& w, const Tensor& y, Tensor& out) override { inner_.slot_combine(w, y, out); }
  void slot_dot(const Tensor& x, const Tensor& y, Tensor& out) override { inner_.slot_dot(x, y, out); }
  void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                   const kernels::AdamHyper& h) override {
    inner_.adam_update(param, grad, exp_avg, exp_avg_sq, h);
  }
  void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const kernels::SgdHyper& h) override {
    inner_.sgd_update(param, grad, momentum_buffer, h);
  }

 private:
  Backend& inner_;
  std::int64_t reads_ = 0, read_bytes_ = 0, uploads_ = 0, upload_bytes_ = 0;
};

}  // namespace moelab::testing
