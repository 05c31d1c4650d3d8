// core/kernels/index.cpp — checks and dispatch for gathering and scattering by int32 indices.
//
// Eight ops, three pairs of forward/backward and an embedding pair built on the first:
//   index_select      src: [N, ...], index: [M]      -> [M, ...]   out[m] = src[index[m]]
//   scatter_add_rows  src: [M, ...], index: [M]      -> [R, ...]   out[index[m]] += src[m]
//   scatter_add_rows_scaled  + scale: [M]            -> [R, ...]   out[index[m]] += scale[m] * src[m]
//     and its backward dy: [R, ...] -> dsrc[m] = scale[m] * dy[index[m]], dscale[m] = src[m] . dy[index[m]]
//   gather_last       src: [..., K], index: [..., J] -> [..., J]   out[r, j] = src[r, index[r, j]]
//   scatter_add_last  src: [..., J], index: [..., J] -> [..., K]   out[r, index[r, j]] += src[r, j]
//   embedding         weight: [V, d], ids: [...]     -> [..., d]   index_select of weight rows
//   embedding_backward dy: [..., d], ids: [...]      -> [V, d]     scatter_add_rows of dy rows
// Each scatter-add is the backward of the gather above it. The scatter-adds run in a fixed order
// (m = 0, 1, ..., M-1 for every destination row), so gradients are bitwise repeatable.
//
// Choices made here (the backends rely on them and never re-check):
//   - Indices are int32 and must lie in [0, limit); a bad one is reported with its position and
//     value. The hot path never waits on the host (README), so the check runs where the indices
//     live, never through a copy to the host:
//       CPU   the backend scans the indices (already in host memory) before touching any memory
//             and throws IndexRangeError, which check_indices() below rewords into this op's
//             message ("index_select: index (flat position 2) = 7 is out of range [0, 5) for src
//             [5, 4]"); nothing is computed, as before.
//       CUDA  each kernel tests every index it reads, skips a bad one (writes 0 / adds nothing,
//             so no memory outside the tensors is touched) and records the first in a device
//             error flag held in mapped host memory (cuda/device_errors.h). The flag is looked at
//             after every stream synchronisation (copy_to_host, copy_from_host, synchronize), at
//             no extra transfer, and then throws moelab::Error naming the op, position, value and
//             limit. So a bad index is reported late (at the next read of the loss at the
//             latest) and without the shapes, but it is always reported and never reads outside.
//     When the backend is not called at all (an empty output), CPU indices are still scanned here.
//   - Gathers (index_select, gather_last, embedding) accept every dtype, int32 included; the
//     scatter-adds are gradients and accept float32 and float64 only.
//   - Empty tensors are fine wherever the result is well defined: M == 0 gives an empty gather or
//     an all-zero scatter. A non-empty index into an empty axis (limit 0) is out of range.
//   - src/ids must not be 0-d where the op needs an axis to index.
#include <string>

#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {
namespace {

[[noreturn]] void fail_range(std::int64_t position, std::int64_t value, std::int64_t limit, const char* op,
                             const char* what, const std::string& context) {
  fail(op, what, " (flat position ", position, ") = ", value, " is out of range [0, ", limit, ") for ", context);
}

// Runs the backend call `run`, turning the backend's IndexRangeError into this op's message.
// `context` describes what is being indexed, for the message ("src [5, 4]").
template <class Run>
void check_indices(const char* op, const char* what, const std::string& context, Run&& run) {
  try {
    run();
  } catch (const IndexRangeError& e) {
    fail_range(e.position, e.value, e.limit, op, what, context);
  }
}

// For the paths that skip the backend (empty output): scans indices that are on the host already;
// on another device there is nothing to check, since nothing is read.
void check_host_indices(const Tensor& index, std::int64_t limit, const char* op, const char* what,
                        const std::string& context) {
  if (!index.device().is_cpu()) return;
  const std::int32_t* p = index.data<std::int32_t>();
  for (std::int64_t i = 0; i < index.numel(); ++i)
    if (p[i] < 0 || p[i] >= limit) fail_range(i, p[i], limit, op, what, context);
}

// [first, rest...] with the first axis replaced by `rows`.
Shape with_first(const Shape& shape, std::int64_t rows) {
  std::vector<std::int64_t> sizes = shape.sizes();
  sizes[0] = rows;
  return Shape(std::move(sizes));
}

// [..., last] with the last axis replaced by `last`.
Shape with_last(const Shape& shape, std::int64_t last) {
  std::vector<std::int64_t> sizes = shape.sizes();
  sizes.back() = last;
  return Shape(std::move(sizes));
}

// Shared by gather_last and scatter_add_last: a and b have the same rank >= 1 and agree on
// every axis but the last.
bool same_leading_axes(const Shape& a, const Shape& b) {
  if (a.rank() != b.rank() || a.rank() < 1) return false;
  for (int i = 0; i + 1 < a.rank(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

}  // namespace

Tensor index_select(const Tensor& src, const Tensor& index) {
  check_defined(src, "index_select", "src");
  check_dtype(index, DType::Int32, "index_select", "index");
  check_same_device(src, index, "index_select");
  MOELAB_CHECK(src.rank() >= 1, "index_select", "src must have at least one axis, got ", src.shape());
  MOELAB_CHECK(index.rank() == 1, "index_select", "index must be 1-d [M], got ", index.shape());
  const std::string context = "src " + src.shape().str();
  Tensor out = Tensor::empty(with_first(src.shape(), index.size(0)), src.dtype(), src.device());
  if (out.numel() == 0) {
    check_host_indices(index, src.size(0), "index_select", "index", context);
    return out;
  }
  check_indices("index_select", "index", context, [&] { backend(src.device()).index_select(src, index, out); });
  return out;
}

Tensor scatter_add_rows(const Tensor& src, const Tensor& index, std::int64_t num_rows) {
  check_floating(src, "scatter_add_rows", "src");
  check_dtype(index, DType::Int32, "scatter_add_rows", "index");
  check_same_device(src, index, "scatter_add_rows");
  MOELAB_CHECK(src.rank() >= 1, "scatter_add_rows", "src must have at least one axis, got ", src.shape());
  MOELAB_CHECK(index.rank() == 1 && index.size(0) == src.size(0), "scatter_add_rows",
               "index must be 1-d with one entry per src row: src ", src.shape(), ", index ", index.shape());
  MOELAB_CHECK(num_rows >= 0, "scatter_add_rows", "num_rows must be >= 0, got ", num_rows);
  const std::string context = std::to_string(num_rows) + " output rows";
  Tensor out = Tensor::empty(with_first(src.shape(), num_rows), src.dtype(), src.device());
  if (out.numel() == 0 || src.numel() == 0) check_host_indices(index, num_rows, "scatter_add_rows", "index", context);
  if (out.numel() == 0) return out;
  if (src.numel() == 0) {  // nothing to add: all zeros
    fill(out, 0.0);
    return out;
  }
  check_indices("scatter_add_rows", "index", context,
                [&] { backend(src.device()).scatter_add_rows(src, index, out); });
  return out;
}

namespace {

// The arguments of scatter_add_rows_scaled and its backward: src [M, ...], scale [M] of src's
// dtype, index [M] int32, all on one device.
void check_scaled_rows(const Tensor& src, const Tensor& scale, const Tensor& index, const char* op) {
  check_floating(src, op, "src");
  check_dtype(scale, src.dtype(), op, "scale");
  check_dtype(index, DType::Int32, op, "index");
  check_same_device(src, scale, op);
  check_same_device(src, index, op);
  MOELAB_CHECK(src.rank() >= 1, op, "src must have at least one axis, got ", src.shape());
  MOELAB_CHECK(index.rank() == 1 && index.size(0) == src.size(0) && scale.shape() == index.shape(), op,
               "scale and index must be 1-d with one entry per src row: src ", src.shape(), ", scale ", scale.shape(),
               ", index ", index.shape());
}

}  // namespace

Tensor scatter_add_rows_scaled(const Tensor& src, const Tensor& scale, const Tensor& index, std::int64_t num_rows) {
  const char* op = "scatter_add_rows_scaled";
  check_scaled_rows(src, scale, index, op);
  MOELAB_CHECK(num_rows >= 0, op, "num_rows must be >= 0, got ", num_rows);
  const std::string context = std::to_string(num_rows) + " output rows";
  Tensor out = Tensor::empty(with_first(src.shape(), num_rows), src.dtype(), src.device());
  if (out.numel() == 0 || src.numel() == 0) check_host_indices(index, num_rows, op, "index", context);
  if (out.numel() == 0) return out;
  if (src.numel() == 0) {  // nothing to add: all zeros
    fill(out, 0.0);
    return out;
  }
  check_indices(op, "index", context, [&] { backend(src.device()).scatter_add_rows_scaled(src, scale, index, out); });
  return out;
}

ScaledRowsGrad scatter_add_rows_scaled_backward(const Tensor& dy, const Tensor& src, const Tensor& scale,
                                                const Tensor& index) {
  const char* op = "scatter_add_rows_scaled_backward";
  check_scaled_rows(src, scale, index, op);
  check_dtype(dy, src.dtype(), op, "dy");
  check_same_device(src, dy, op);
  MOELAB_CHECK(dy.rank() == src.rank() && with_first(dy.shape(), src.size(0)) == src.shape(), op,
               "dy must be [num_rows, ...] with src's trailing axes, got dy ", dy.shape(), " and src ", src.shape());
  const std::string context = "dy " + dy.shape().str();
  ScaledRowsGrad grad{Tensor::empty(src.shape(), src.dtype(), src.device()),
                      Tensor::empty(scale.shape(), src.dtype(), src.device())};
  if (src.size(0) == 0) return grad;
  if (src.numel() == 0) {  // rows of no elements: index still names rows of dy, the dot products are 0
    check_host_indices(index, dy.size(0), op, "index", context);
    fill(grad.scale, 0.0);
    return grad;
  }
  check_indices(op, "index", context, [&] {
    backend(src.device()).scatter_add_rows_scaled_backward(dy, src, scale, index, grad.src, grad.scale);
  });
  return grad;
}

Tensor gather_last(const Tensor& src, const Tensor& index) {
  check_defined(src, "gather_last", "src");
  check_dtype(index, DType::Int32, "gather_last", "index");
  check_same_device(src, index, "gather_last");
  MOELAB_CHECK(same_leading_axes(src.shape(), index.shape()), "gather_last",
               "src [..., K] and index [..., J] must have the same rank >= 1 and leading axes, got src ", src.shape(),
               " and index ", index.shape());
  Tensor out = Tensor::empty(index.shape(), src.dtype(), src.device());
  if (out.numel() == 0) return out;  // no index at all
  check_indices("gather_last", "index", "src " + src.shape().str(),
                [&] { backend(src.device()).gather_last(src, index, out); });
  return out;
}

Tensor scatter_add_last(const Tensor& src, const Tensor& index, std::int64_t k) {
  check_floating(src, "scatter_add_last", "src");
  check_dtype(index, DType::Int32, "scatter_add_last", "index");
  check_same_device(src, index, "scatter_add_last");
  MOELAB_CHECK(src.rank() >= 1 && src.shape() == index.shape(), "scatter_add_last",
               "src and index must have the same shape of rank >= 1, got src ", src.shape(), " and index ",
               index.shape());
  MOELAB_CHECK(k >= 0, "scatter_add_last", "k must be >= 0, got ", k);
  const std::string context = "an output last axis of " + std::to_string(k);
  Tensor out = Tensor::empty(with_last(src.shape(), k), src.dtype(), src.device());
  if (out.numel() == 0 || src.numel() == 0) check_host_indices(index, k, "scatter_add_last", "index", context);
  if (out.numel() == 0) return out;
  if (src.numel() == 0) {
    fill(out, 0.0);
    return out;
  }
  check_indices("scatter_add_last", "index", context, [&] { backend(src.device()).scatter_add_last(src, index, out); });
  return out;
}

// weight: [V, d], ids: [...] -> [..., d]: index_select of the flattened ids, reshaped.
Tensor embedding(const Tensor& weight, const Tensor& ids) {
  check_defined(weight, "embedding", "weight");
  check_dtype(ids, DType::Int32, "embedding", "ids");
  check_same_device(weight, ids, "embedding");
  MOELAB_CHECK(weight.rank() == 2, "embedding", "weight must be 2-d [V, d], got ", weight.shape());
  const std::string context = "weight " + weight.shape().str();
  std::vector<std::int64_t> out_sizes = ids.shape().sizes();
  out_sizes.push_back(weight.size(1));
  Tensor out = Tensor::empty(Shape(out_sizes), weight.dtype(), weight.device());
  if (out.numel() == 0) {
    check_host_indices(ids, weight.size(0), "embedding", "ids", context);
    return out;
  }
  Tensor flat_ids = ids.reshape({ids.numel()});
  Tensor rows = out.reshape({ids.numel(), weight.size(1)});
  check_indices("embedding", "ids", context, [&] { backend(weight.device()).index_select(weight, flat_ids, rows); });
  return out;
}

// dy: [..., d], ids: [...] -> dweight: [V, d]: scatter_add_rows of dy seen as [N, d].
Tensor embedding_backward(const Tensor& dy, const Tensor& ids, std::int64_t vocab) {
  check_floating(dy, "embedding_backward", "dy");
  check_dtype(ids, DType::Int32, "embedding_backward", "ids");
  check_same_device(dy, ids, "embedding_backward");
  std::vector<std::int64_t> expected = ids.shape().sizes();
  const std::int64_t d = dy.rank() >= 1 ? dy.size(-1) : 0;
  expected.push_back(d);
  MOELAB_CHECK(dy.rank() >= 1 && dy.shape() == Shape(expected), "embedding_backward",
               "dy must be ids.shape + [d]: dy ", dy.shape(), ", ids ", ids.shape());
  MOELAB_CHECK(vocab >= 0, "embedding_backward", "vocab must be >= 0, got ", vocab);
  const std::string context = "a vocabulary of " + std::to_string(vocab);
  Tensor dweight = Tensor::empty({vocab, d}, dy.dtype(), dy.device());
  if (dweight.numel() == 0 || dy.numel() == 0) check_host_indices(ids, vocab, "embedding_backward", "ids", context);
  if (dweight.numel() == 0) return dweight;
  if (dy.numel() == 0) {
    fill(dweight, 0.0);
    return dweight;
  }
  check_indices("embedding_backward", "ids", context, [&] {
    backend(dy.device()).scatter_add_rows(dy.reshape({ids.numel(), d}), ids.reshape({ids.numel()}), dweight);
  });
  return dweight;
}

}  // namespace moelab::kernels
