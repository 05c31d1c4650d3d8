// nn/moe/expert_bank.cpp — two grouped GEMMs with the activation between (see expert_bank.h).
#include "nn/moe/expert_bank.h"

#include <cmath>

#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"

namespace moelab {

ExpertBank::ExpertBank(std::int64_t experts, std::int64_t d, std::int64_t ffn, Generator& gen, bool bias, DType dtype,
                       Activation activation)
    : experts_(experts), d_(d), ffn_(ffn), activation_(activation) {
  MOELAB_CHECK(experts >= 1 && d >= 1 && ffn >= 1, "ExpertBank", "sizes must be >= 1, got E ", experts, ", d ", d,
               ", f ", ffn);
  MOELAB_CHECK(dtype != DType::Int32, "ExpertBank", "needs a float dtype, got ", dtype);
  const double bound_in = 1.0 / std::sqrt(static_cast<double>(d));
  const double bound_out = 1.0 / std::sqrt(static_cast<double>(ffn));
  const std::int64_t up = up_width(activation, ffn);  // F
  w_in_ = register_parameter("w_in", uniform({experts, d, up}, -bound_in, bound_in, gen, dtype));
  if (bias) b_in_ = register_parameter("b_in", uniform({experts, up}, -bound_in, bound_in, gen, dtype));
  w_out_ = register_parameter("w_out", uniform({experts, ffn, d}, -bound_out, bound_out, gen, dtype));
  if (bias) b_out_ = register_parameter("b_out", uniform({experts, d}, -bound_out, bound_out, gen, dtype));
}

std::int64_t ExpertBank::parameters_per_expert() const {
  const std::int64_t up = up_width(activation_, ffn_);
  return d_ * up + ffn_ * d_ + (b_in_.defined() ? up + d_ : 0);
}

namespace {

// b: [E, n] -> [E + 1, n], a zero row appended for the rows that belong to no expert.
Variable with_zero_row(const Variable& b) {
  return concat({b, Variable(zeros({1, b.size(1)}, b.dtype(), b.device()))}, 0);
}

}  // namespace

// x_sorted: [N, d] -> u: [N, F] -> h: [N, f] -> y: [N, d]
Variable ExpertBank::forward(const Variable& x_sorted, const Tensor& offsets) const {
  check_defined(x_sorted.data(), "ExpertBank", "x_sorted");
  check_defined(offsets, "ExpertBank", "offsets");
  MOELAB_CHECK(x_sorted.rank() == 2 && x_sorted.size(1) == d_, "ExpertBank", "x_sorted must be [N, ", d_, "], got ",
               x_sorted.shape());
  MOELAB_CHECK(offsets.dtype() == DType::Int32 && offsets.shape() == Shape{experts_ + 1}, "ExpertBank",
               "offsets must be int32 [", experts_ + 1, "], got ", offsets.dtype(), " ", offsets.shape());
  MOELAB_CHECK(x_sorted.dtype() == w_in_.dtype(), "ExpertBank", "x_sorted is ", x_sorted.dtype(),
               " but the weights are ", w_in_.dtype());
  Tensor row_expert;  // int32 [N], only needed for the biases (E for rows in no group)
  if (b_in_.defined()) row_expert = kernels::row_groups(offsets, x_sorted.size(0));
  Variable u = grouped_matmul(x_sorted, w_in_, offsets);                         // [N, F]
  if (b_in_.defined()) u = u + index_select(with_zero_row(b_in_), row_expert);   // + [N, F]
  Variable y = grouped_matmul(activate(activation_, u), w_out_, offsets);        // [N, f] -> [N, d]
  if (b_out_.defined()) y = y + index_select(with_zero_row(b_out_), row_expert); // + [N, d]
  return y;
}

// x: [E, R, d] -> u: [E, R, F] -> h: [E, R, f] -> y: [E, R, d]
Variable ExpertBank::forward_each(const Variable& x) const {
  check_defined(x.data(), "ExpertBank", "x");
  MOELAB_CHECK(x.rank() == 3 && x.size(0) == experts_ && x.size(2) == d_, "ExpertBank", "x must be [", experts_,
               ", R, ", d_, "], got ", x.shape());
  MOELAB_CHECK(x.dtype() == w_in_.dtype(), "ExpertBank", "x is ", x.dtype(), " but the weights are ", w_in_.dtype());
  Variable u = matmul(x, w_in_);                                                   // [E, R, F]
  if (b_in_.defined()) u = u + reshape(b_in_, {experts_, 1, b_in_.size(1)});       // + [E, 1, F]
  Variable y = matmul(activate(activation_, u), w_out_);                           // [E, R, f] -> [E, R, d]
  if (b_out_.defined()) y = y + reshape(b_out_, {experts_, 1, d_});                // + [E, 1, d]
  return y;
}

// x: [B, m, d] -> u: [B, m, F, E] -> h: [B, F, E, p] -> [B, f, E, p] -> z: [B, m, f, E] -> y: [B, m, d]
Variable ExpertBank::forward_mixed(const Variable& x, const Variable& dispatch, const Variable& combine) const {
  check_defined(x.data(), "ExpertBank", "x");
  check_defined(dispatch.data(), "ExpertBank", "dispatch");
  check_defined(combine.data(), "ExpertBank", "combine");
  MOELAB_CHECK(x.rank() == 3 && x.size(2) == d_, "ExpertBank", "x must be [B, m, ", d_, "], got ", x.shape());
  const std::int64_t B = x.size(0), m = x.size(1), E = experts_, f = ffn_, d = d_;
  MOELAB_CHECK(dispatch.rank() == 4 && dispatch.size(0) == B && dispatch.size(1) == m && dispatch.size(2) == E &&
                   combine.shape() == dispatch.shape(),
               "ExpertBank", "dispatch and combine must be [", B, ", ", m, ", ", E, ", p], got ", dispatch.shape(),
               " and ", combine.shape());
  MOELAB_CHECK(x.dtype() == w_in_.dtype(), "ExpertBank", "x is ", x.dtype(), " but the weights are ", w_in_.dtype());
  const std::int64_t p = dispatch.size(3), F = w_in_.size(2);
  const Variable w_in = reshape(permute(w_in_, {1, 2, 0}), {d, F * E});                  // [d, F*E]
  const Variable w_out = reshape(permute(w_out_, {1, 0, 2}), {f * E, d});                 // [f*E, d]
  const Variable u = reshape(matmul(reshape(x, {B * m, d}), w_in), {B, m, F, E});         // [B, m, F, E]
  Variable h = slot_mix_reduce(dispatch, u);                                               // [B, F, E, p]
  if (b_in_.defined()) h = h + reshape(transpose(b_in_, 0, 1), {F, E, 1});                 // + [F, E, 1]
  const Variable z = slot_mix_expand(combine, activate(activation_, h, 1));                // [B, m, f, E]
  Variable y = matmul(reshape(z, {B * m, f * E}), w_out);                                  // [B*m, d]
  if (b_out_.defined()) y = y + matmul(sum(reshape(combine, {B * m, E, p}), 2), b_out_);   // + [B*m, E] @ [E, d]
  return reshape(y, {B, m, d});
}

}  // namespace moelab
