// autograd/ops_index.cpp — gathers and scatters, whose gradients are each other.
//
//   forward                          backward (g = dL/d out)
//   index_select(src, idx)           scatter_add_rows(g, idx, N)    rows picked twice get both
//   scatter_add_rows(src, idx, N)    index_select(g, idx)
//   scatter_add_rows_scaled(src, s, idx, N)   scatter_add_rows_scaled_backward(g, src, s, idx):
//                                    dsrc[m] = s[m] g[idx[m]], ds[m] = src[m] . g[idx[m]]
//   gather_last(src, idx)            scatter_add_last(g, idx, K)
//   scatter_add_last(src, idx, K)    gather_last(g, idx)
//   embedding(weight, ids)           embedding_backward(g, ids, V)  (index_select on flattened ids)
//   topk(x, k) values                scatter_add_last(g, indices, n)
// The scatters run in a fixed order, so gradients are bitwise reproducible.
#include "autograd/ops_index.h"

#include <utility>

#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {
namespace {
using Grads = std::vector<Tensor>;
using Inputs = std::vector<Variable>;
}  // namespace

// src: [N, ...], index: [M] -> [M, ...]
Variable index_select(const Variable& src, const Tensor& index) {
  return record("index_select", kernels::index_select(src.data(), index), {src},
                [index](const Inputs& in, const Tensor& g) {
                  return Grads{kernels::scatter_add_rows(g, index, in[0].size(0))};
                });
}

// src: [M, ...], index: [M] -> [num_rows, ...]
Variable scatter_add_rows(const Variable& src, const Tensor& index, std::int64_t num_rows) {
  return record("scatter_add_rows", kernels::scatter_add_rows(src.data(), index, num_rows), {src},
                [index](const Inputs&, const Tensor& g) { return Grads{kernels::index_select(g, index)}; });
}

// src: [M, ...], scale: [M], index: [M] -> [num_rows, ...]
Variable scatter_add_rows_scaled(const Variable& src, const Variable& scale, const Tensor& index,
                                 std::int64_t num_rows) {
  return record("scatter_add_rows_scaled", kernels::scatter_add_rows_scaled(src.data(), scale.data(), index, num_rows),
                {src, scale}, [index](const Inputs& in, const Tensor& g) {
                  kernels::ScaledRowsGrad grad =
                      kernels::scatter_add_rows_scaled_backward(g, in[0].data(), in[1].data(), index);
                  return Grads{std::move(grad.src), std::move(grad.scale)};
                });
}

// src: [..., K], index: [..., J] -> [..., J]
Variable gather_last(const Variable& src, const Tensor& index) {
  return record("gather_last", kernels::gather_last(src.data(), index), {src},
                [index](const Inputs& in, const Tensor& g) {
                  return Grads{kernels::scatter_add_last(g, index, in[0].size(-1))};
                });
}

// src: [..., J], index: [..., J] -> [..., k]
Variable scatter_add_last(const Variable& src, const Tensor& index, std::int64_t k) {
  return record("scatter_add_last", kernels::scatter_add_last(src.data(), index, k), {src},
                [index](const Inputs&, const Tensor& g) { return Grads{kernels::gather_last(g, index)}; });
}

// weight: [V, d], ids: [...] -> [..., d]
Variable embedding(const Variable& weight, const Tensor& ids) {
  return record("embedding", kernels::embedding(weight.data(), ids), {weight},
                [ids](const Inputs& in, const Tensor& g) {
                  return Grads{kernels::embedding_backward(g, ids, in[0].size(0))};
                });
}

// x: [..., n] -> values [..., k], indices [..., k]
TopK topk(const Variable& x, int k) {
  kernels::TopKResult result = kernels::topk(x.data(), k);
  Tensor indices = result.indices;
  Variable values = record("topk", std::move(result.values), {x}, [indices](const Inputs& in, const Tensor& g) {
    return Grads{kernels::scatter_add_last(g, indices, in[0].size(-1))};
  });
  return TopK{std::move(values), std::move(result.indices)};
}

}  // namespace moelab
