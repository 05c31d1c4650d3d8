// core/tensor_print.h — a tensor's values as text, laid out as PyTorch prints them.
//
// Tensor::str() says what a tensor is ("Tensor(float32, cpu, [2, 3])"); format_tensor says what
// it holds, nested by dimension, every element of one tensor printed to the same width:
//   tensor(1.5000)                                  0-d
//   tensor([ 0.1000, -2.0000,  3.0000])             1-d
//   tensor([[1, 2, 3],                              2-d int32: integers, the dtype named
//           [4, 5, 6]], dtype=int32)
//   tensor([[[1., ...                               3-d and more: a blank line between blocks
// Floats get `precision` decimals in fixed notation, or scientific notation ("1.0000e-05") for
// the whole tensor when some non-zero value is below 1e-4 or any is 1e8 or more in magnitude;
// nan, inf and -inf print as such. float32 on the CPU is the default and is not named; another
// dtype adds ", dtype=float64" / ", dtype=int32", a GPU tensor ", device=cuda:0". A tensor of more
// than `threshold` elements shows only the first and last `edge_items` of every dimension, with
// "..." between. Long rows wrap at `line_width` columns, aligned under their first element. A
// tensor on the GPU is copied to the host to be read (one transfer: not for a hot loop).
//
//   std::cout << x << "\n";                          // operator<<: format_tensor with the defaults
//   std::string s = format_tensor(x, {.precision = 2, .threshold = 100});
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "core/tensor.h"

namespace moelab {

struct PrintOptions {
  int precision = 4;               // decimals of a float (fixed or scientific)
  std::int64_t threshold = 1000;   // more elements than this: elide
  std::int64_t edge_items = 3;     // elements kept at each end of every dimension when eliding
  std::int64_t line_width = 80;    // a row's items wrap past this many columns
};

// "tensor(undefined)" for an undefined tensor.
std::string format_tensor(const Tensor& t, const PrintOptions& options = {});

std::ostream& operator<<(std::ostream& out, const Tensor& t);

}  // namespace moelab
