// autograd/ops_index.h — differentiable gathering, scattering and top-k selection.
//
// Index arguments are plain int32 Tensors: they select, they are not differentiated. Each op's
// gradient is its partner op applied to the output gradient (gather <-> scatter-add).
#pragma once

#include <cstdint>

#include "autograd/variable.h"

namespace moelab {

// src: [N, ...], index: [M] int32 in [0, N) -> [M, ...], row m = src[index[m]].
Variable index_select(const Variable& src, const Tensor& index);
// src: [M, ...], index: [M] -> [num_rows, ...], out[index[m]] += src[m] (fixed order).
Variable scatter_add_rows(const Variable& src, const Tensor& index, std::int64_t num_rows);
// src: [M, ...], scale: [M], index: [M] -> [num_rows, ...], out[index[m]] += scale[m] * src[m]
// (fixed order): bitwise scatter_add_rows(src * reshape(scale, {M, 1}), index, num_rows), with one
// fused kernel each way instead of four passes over [M, ...] (the MoE layer's combine step).
Variable scatter_add_rows_scaled(const Variable& src, const Variable& scale, const Tensor& index,
                                 std::int64_t num_rows);
// src: [..., K], index: [..., J] int32 in [0, K) -> [..., J], out[r, j] = src[r, index[r, j]].
Variable gather_last(const Variable& src, const Tensor& index);
// src: [..., J], index: [..., J] -> [..., k], out[r, index[r, j]] += src[r, j].
Variable scatter_add_last(const Variable& src, const Tensor& index, std::int64_t k);
// weight: [V, d], ids: [...] int32 in [0, V) -> [..., d].
Variable embedding(const Variable& weight, const Tensor& ids);

// The k largest entries over the last axis: values (differentiable) and their positions.
struct TopK {
  Variable values;  // [..., k] largest first
  Tensor indices;   // [..., k] int32; ties go to the lower index
};
// x: [..., n], 1 <= k <= n -> TopK. The gradient of values goes back to the selected positions.
TopK topk(const Variable& x, int k);

}  // namespace moelab
