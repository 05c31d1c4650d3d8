// core/kernels/shape_ops.cpp — checks and dispatch for concat, split, narrow, transpose, permute.
//
// All of them return new contiguous tensors (only reshape and first-axis slices are views).
// concat, split and narrow move whole blocks: along axis a, a tensor of shape [s0, ..., s_{r-1}]
// is seen as [outer, n, inner] with outer = s0*...*s_{a-1}, n = s_a, inner = s_{a+1}*...; each
// op is then one or more Backend::copy_block calls that copy a run of middle rows, every outer
// slice at once:
//   concat   xs[i]: [outer, n_i, inner] -> out: [outer, sum n_i, inner]  (x_i at offset n_0+..+n_{i-1})
//   split    x: [outer, n, inner] -> outs[i]: [outer, sizes[i], inner]  (from offset sizes[0]+..)
//   narrow   x: [outer, n, inner] -> out: [outer, length, inner]  (rows [start, start+length))
// permute moves axes: out axis i is x axis order[i] (out.shape[i] = x.shape[order[i]]); transpose
// is the permute that swaps two axes. All dtypes.
//
// Choices: axes may be negative (counting from the end). concat needs at least one tensor, all
// of one dtype, device and rank, equal sizes except along `axis`. split sizes must be >= 0 and
// add up to the axis length. Zero-size pieces are fine (nothing is copied). A permutation must
// name every axis exactly once; a 0-d tensor permutes with the empty order (a copy).
#include <string>

#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {
namespace {

Shape with_axis(const Shape& shape, int axis, std::int64_t size) {
  std::vector<std::int64_t> sizes = shape.sizes();
  sizes[static_cast<std::size_t>(axis)] = size;
  return Shape(std::move(sizes));
}

std::string to_string(const std::vector<std::int64_t>& v) { return Shape(v).str(); }

std::string to_string(const std::vector<int>& v) {
  std::vector<std::int64_t> wide(v.begin(), v.end());
  return Shape(wide).str();
}

// x: [outer, n, inner] rows [start, start+len) -> out: [outer, out_n, inner] at out_start.
void copy_rows(const Tensor& x, int axis, std::int64_t start, std::int64_t len, Tensor& out, std::int64_t out_start) {
  const std::int64_t outer = x.shape().outer(axis), inner = x.shape().inner(axis);
  if (len == 0 || outer == 0 || inner == 0) return;
  backend(x.device()).copy_block(x, outer, x.size(axis), inner, start, len, out, out.size(axis), out_start);
}

// The shared body of permute and transpose; `order` is already normalised and checked.
Tensor permute_checked(const Tensor& x, const std::vector<int>& order) {
  std::vector<std::int64_t> sizes(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) sizes[i] = x.shape()[order[i]];
  Tensor out = Tensor::empty(Shape(sizes), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  backend(x.device()).permute(x, order, out);
  return out;
}

}  // namespace

Tensor concat(const std::vector<Tensor>& xs, int axis) {
  MOELAB_CHECK(!xs.empty(), "concat", "needs at least one tensor");
  for (const Tensor& x : xs) check_defined(x, "concat", "every input");
  const Tensor& first = xs[0];
  MOELAB_CHECK(first.rank() >= 1, "concat", "cannot concatenate 0-d tensors, got ", first.shape());
  const int a = first.shape().normalize_axis(axis, "concat");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    check_same_device(first, x, "concat");
    MOELAB_CHECK(x.dtype() == first.dtype(), "concat", "input ", i, " is ", x.dtype(), " but input 0 is ",
                 first.dtype());
    MOELAB_CHECK(x.rank() == first.rank() && with_axis(x.shape(), a, 0) == with_axis(first.shape(), a, 0), "concat",
                 "input ", i, " has shape ", x.shape(), " but input 0 has ", first.shape(),
                 "; sizes must match except along axis ", a);
    total += x.size(a);
  }
  Tensor out = Tensor::empty(with_axis(first.shape(), a, total), first.dtype(), first.device());
  if (out.numel() == 0) return out;
  std::int64_t offset = 0;
  for (const Tensor& x : xs) {
    copy_rows(x, a, 0, x.size(a), out, offset);
    offset += x.size(a);
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, int axis) {
  check_defined(x, "split", "x");
  MOELAB_CHECK(x.rank() >= 1, "split", "cannot split a 0-d tensor");
  const int a = x.shape().normalize_axis(axis, "split");
  std::int64_t total = 0;
  for (std::int64_t s : sizes) {
    MOELAB_CHECK(s >= 0, "split", "sizes must be >= 0, got ", to_string(sizes));
    total += s;
  }
  MOELAB_CHECK(total == x.size(a), "split", "sizes ", to_string(sizes), " add up to ", total, " but axis ", a,
               " of x ", x.shape(), " has ", x.size(a));
  std::vector<Tensor> outs;
  outs.reserve(sizes.size());
  std::int64_t start = 0;
  for (std::int64_t s : sizes) {
    Tensor piece = Tensor::empty(with_axis(x.shape(), a, s), x.dtype(), x.device());
    copy_rows(x, a, start, s, piece, 0);
    outs.push_back(piece);
    start += s;
  }
  return outs;
}

Tensor narrow(const Tensor& x, int axis, std::int64_t start, std::int64_t length) {
  check_defined(x, "narrow", "x");
  MOELAB_CHECK(x.rank() >= 1, "narrow", "cannot narrow a 0-d tensor");
  const int a = x.shape().normalize_axis(axis, "narrow");
  MOELAB_CHECK(start >= 0 && length >= 0 && start <= x.size(a) - length, "narrow", "range [", start, ", ",
               start + length, ") is outside axis ", a, " of x ", x.shape());
  Tensor out = Tensor::empty(with_axis(x.shape(), a, length), x.dtype(), x.device());
  copy_rows(x, a, start, length, out, 0);
  return out;
}

Tensor permute(const Tensor& x, const std::vector<int>& order) {
  check_defined(x, "permute", "x");
  const int rank = x.rank();
  MOELAB_CHECK(static_cast<int>(order.size()) == rank, "permute", "order ", to_string(order), " has ", order.size(),
               " entries but x ", x.shape(), " has ", rank, " axes");
  std::vector<int> normalized(order.size());
  std::vector<bool> seen(order.size(), false);
  for (std::size_t i = 0; i < order.size(); ++i) {
    MOELAB_CHECK(order[i] >= -rank && order[i] < rank, "permute", "order ", to_string(order),
                 " names an axis out of range for x ", x.shape());
    const int a = order[i] < 0 ? order[i] + rank : order[i];
    MOELAB_CHECK(!seen[static_cast<std::size_t>(a)], "permute", "order ", to_string(order),
                 " is not a permutation (axis ", a, " repeats)");
    seen[static_cast<std::size_t>(a)] = true;
    normalized[i] = a;
  }
  return permute_checked(x, normalized);
}

Tensor transpose(const Tensor& x, int axis0, int axis1) {
  check_defined(x, "transpose", "x");
  const int a0 = x.shape().normalize_axis(axis0, "transpose");
  const int a1 = x.shape().normalize_axis(axis1, "transpose");
  std::vector<int> order(static_cast<std::size_t>(x.rank()));
  for (int i = 0; i < x.rank(); ++i) order[static_cast<std::size_t>(i)] = i;
  std::swap(order[static_cast<std::size_t>(a0)], order[static_cast<std::size_t>(a1)]);
  return permute_checked(x, order);
}

}  // namespace moelab::kernels
