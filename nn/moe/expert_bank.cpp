// nn/moe/expert_bank.cpp — two grouped GEMMs with a ReLU between (see expert_bank.h).
#include "nn/moe/expert_bank.h"

#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "core/factories.h"

namespace moelab {

ExpertBank::ExpertBank(std::int64_t experts, std::int64_t d, std::int64_t ffn, Generator& gen, bool bias, DType dtype)
    : experts_(experts), d_(d), ffn_(ffn) {
  MOELAB_CHECK(experts >= 1 && d >= 1 && ffn >= 1, "ExpertBank", "sizes must be >= 1, got E ", experts, ", d ", d,
               ", f ", ffn);
  MOELAB_CHECK(dtype != DType::Int32, "ExpertBank", "needs a float dtype, got ", dtype);
  const double bound_in = 1.0 / std::sqrt(static_cast<double>(d));
  const double bound_out = 1.0 / std::sqrt(static_cast<double>(ffn));
  w_in_ = register_parameter("w_in", uniform({experts, d, ffn}, -bound_in, bound_in, gen, dtype));
  if (bias) b_in_ = register_parameter("b_in", uniform({experts, ffn}, -bound_in, bound_in, gen, dtype));
  w_out_ = register_parameter("w_out", uniform({experts, ffn, d}, -bound_out, bound_out, gen, dtype));
  if (bias) b_out_ = register_parameter("b_out", uniform({experts, d}, -bound_out, bound_out, gen, dtype));
}

std::int64_t ExpertBank::parameters_per_expert() const {
  return 2 * d_ * ffn_ + (b_in_.defined() ? ffn_ + d_ : 0);
}

namespace {

// offsets int32 [E + 1] -> int32 [N]: the expert of each row, on x's device.
Tensor expert_of_rows(const Tensor& offsets, std::int64_t rows, Device device) {
  const std::vector<std::int32_t> off = offsets.to(Device::cpu()).to_vector<std::int32_t>();
  std::vector<std::int32_t> ids(static_cast<std::size_t>(rows));
  for (std::size_t e = 0; e + 1 < off.size(); ++e)
    for (std::int32_t r = off[e]; r < off[e + 1]; ++r) ids[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(e);
  return from_vector(ids, {rows}).to(device);
}

}  // namespace

// x_sorted: [N, d] -> h: [N, f] -> y: [N, d]
Variable ExpertBank::forward(const Variable& x_sorted, const Tensor& offsets) const {
  check_defined(x_sorted.data(), "ExpertBank", "x_sorted");
  check_defined(offsets, "ExpertBank", "offsets");
  MOELAB_CHECK(x_sorted.rank() == 2 && x_sorted.size(1) == d_, "ExpertBank", "x_sorted must be [N, ", d_, "], got ",
               x_sorted.shape());
  MOELAB_CHECK(offsets.dtype() == DType::Int32 && offsets.shape() == Shape{experts_ + 1}, "ExpertBank",
               "offsets must be int32 [", experts_ + 1, "], got ", offsets.dtype(), " ", offsets.shape());
  MOELAB_CHECK(x_sorted.dtype() == w_in_.dtype(), "ExpertBank", "x_sorted is ", x_sorted.dtype(),
               " but the weights are ", w_in_.dtype());
  Tensor row_expert;  // only needed for the biases
  if (b_in_.defined()) row_expert = expert_of_rows(offsets, x_sorted.size(0), x_sorted.device());
  Variable h = grouped_matmul(x_sorted, w_in_, offsets);                         // [N, f]
  if (b_in_.defined()) h = h + index_select(b_in_, row_expert);                  // + [N, f]
  Variable y = grouped_matmul(relu(h), w_out_, offsets);                         // [N, d]
  if (b_out_.defined()) y = y + index_select(b_out_, row_expert);                // + [N, d]
  return y;
}

}  // namespace moelab
