// autograd/ops_shape.cpp — shape ops and their gradients.
//
//   forward                       backward (g = dL/d out)
//   concat(xs, axis)              split(g, sizes of xs along axis, axis)
//   split(x, sizes, axis)[i]      g placed at piece i's offset inside zeros of x's shape
//   narrow(x, axis, start, len)   the same (pad_axis)
//   reshape(x, shape)             g.reshape(x's shape)
//   transpose(x, a0, a1)          transpose(g, a0, a1)
//   permute(x, order)             permute(g, inverse of order)
// split gives each piece its own node, so each piece's gradient is padded to x's full shape and
// the engine sums them: fine for the few pieces layers split into (q, k, v), wasteful for many.
#include "autograd/ops_shape.h"

#include <utility>

#include "autograd/grad_utils.h"
#include "autograd/record.h"

namespace moelab {
namespace {
using Grads = std::vector<Tensor>;
using Inputs = std::vector<Variable>;
}  // namespace

// xs[i]: [..., n_i, ...] -> [..., sum n_i, ...]
Variable concat(const std::vector<Variable>& xs, int axis) {
  std::vector<Tensor> data;
  data.reserve(xs.size());
  for (const Variable& x : xs) data.push_back(x.data());
  Tensor out = kernels::concat(data, axis);
  return record("concat", std::move(out), xs, [axis](const Inputs& in, const Tensor& g) {
    std::vector<std::int64_t> sizes;
    for (const Variable& x : in) sizes.push_back(x.size(axis));
    return kernels::split(g, sizes, axis);
  });
}

// x: [..., n, ...] -> pieces [..., sizes[i], ...]
std::vector<Variable> split(const Variable& x, const std::vector<std::int64_t>& sizes, int axis) {
  std::vector<Tensor> pieces = kernels::split(x.data(), sizes, axis);
  std::vector<Variable> out;
  out.reserve(pieces.size());
  std::int64_t start = 0;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    out.push_back(record("split", std::move(pieces[i]), {x}, [axis, start](const Inputs& in, const Tensor& g) {
      return Grads{detail::pad_axis(g, in[0].shape(), axis, start)};
    }));
    start += sizes[i];
  }
  return out;
}

// x: [..., n, ...] -> [..., length, ...]
Variable narrow(const Variable& x, int axis, std::int64_t start, std::int64_t length) {
  return record("narrow", kernels::narrow(x.data(), axis, start, length), {x},
                [axis, start](const Inputs& in, const Tensor& g) {
                  return Grads{detail::pad_axis(g, in[0].shape(), axis, start)};
                });
}

// x -> [shape] (a view)
Variable reshape(const Variable& x, const Shape& shape) {
  check_defined(x.data(), "reshape");
  return record("reshape", x.data().reshape(shape), {x},
                [](const Inputs& in, const Tensor& g) { return Grads{g.reshape(in[0].shape())}; });
}

// x: [..., a, ..., b, ...] -> [..., b, ..., a, ...]
Variable transpose(const Variable& x, int axis0, int axis1) {
  return record("transpose", kernels::transpose(x.data(), axis0, axis1), {x},
                [axis0, axis1](const Inputs&, const Tensor& g) { return Grads{kernels::transpose(g, axis0, axis1)}; });
}

// x -> out axis i = x axis order[i]
Variable permute(const Variable& x, const std::vector<int>& order) {
  Tensor out = kernels::permute(x.data(), order);  // validates order
  std::vector<int> inverse(order.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    inverse[static_cast<std::size_t>(x.data().shape().normalize_axis(order[i], "permute"))] = static_cast<int>(i);
  return record("permute", std::move(out), {x},
                [inverse](const Inputs&, const Tensor& g) { return Grads{kernels::permute(g, inverse)}; });
}

}  // namespace moelab
