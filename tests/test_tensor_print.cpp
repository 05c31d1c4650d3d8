// tests/test_tensor_print.cpp — format_tensor (core/tensor_print.h): the values of a tensor laid out
// as PyTorch prints them, exactly: 0-d, 1-d, 2-d and 3-d, integers, the dtype and device suffix,
// fixed and scientific notation, nan and inf, elision past the threshold, wrapping, empty tensors.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "autograd/ops.h"
#include "core/factories.h"
#include "core/tensor_print.h"

using namespace moelab;

TEST_CASE("format_tensor: 0-d, 1-d, 2-d and 3-d, every element at one width") {
  CHECK(format_tensor(from_vector(std::vector<float>{1.5f}, {})) == "tensor(1.5000)");
  CHECK(format_tensor(from_vector(std::vector<float>{0.1f, -2, 3}, {3})) == "tensor([ 0.1000, -2.0000,  3.0000])");
  CHECK(format_tensor(from_vector(std::vector<std::int32_t>{1, 2, 3, 4, 5, 60}, {2, 3})) ==
        "tensor([[ 1,  2,  3],\n"
        "        [ 4,  5, 60]], dtype=int32)");
  CHECK(format_tensor(from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}), {.precision = 1}) ==
        "tensor([[[1.0, 2.0],\n"
        "         [3.0, 4.0]],\n"
        "\n"
        "        [[5.0, 6.0],\n"
        "         [7.0, 8.0]]], dtype=float64)");
  std::ostringstream s;
  s << from_vector(std::vector<float>{2, 4}, {2});
  CHECK(s.str() == "tensor([2.0000, 4.0000])");
  CHECK(format_tensor(Tensor()) == "tensor(undefined)");
  CHECK(format_tensor(zeros({0, 3})) == "tensor([], size=[0, 3])");
}

TEST_CASE("format_tensor: scientific notation for tiny or huge values, nan and inf as words") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(format_tensor(from_vector(std::vector<float>{1e-5f, 1}, {2}), {.precision = 2}) ==
        "tensor([1.00e-05, 1.00e+00])");
  CHECK(format_tensor(from_vector(std::vector<float>{1e9f, -1}, {2}), {.precision = 1}) ==
        "tensor([ 1.0e+09, -1.0e+00])");
  CHECK(format_tensor(from_vector(std::vector<float>{0, 1}, {2}), {.precision = 1}) == "tensor([0.0, 1.0])");
  CHECK(format_tensor(from_vector(std::vector<float>{nan, -inf, inf, 1}, {4}), {.precision = 1}) ==
        "tensor([ nan, -inf,  inf,  1.0])");
}

TEST_CASE("format_tensor: past the threshold every dimension shows its ends around '...'") {
  std::vector<std::int32_t> v(2000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i);
  CHECK(format_tensor(from_vector(v, {2000})) == "tensor([   0,    1,    2, ..., 1997, 1998, 1999], dtype=int32)");
  CHECK(format_tensor(from_vector(v, {100, 20}), {.edge_items = 1}) ==
        "tensor([[   0, ...,   19],\n"
        "        ...,\n"
        "        [1980, ..., 1999]], dtype=int32)");
  // At the threshold nothing is elided.
  CHECK(format_tensor(from_vector(std::vector<std::int32_t>{1, 2, 3, 4}, {4}), {.threshold = 4}) ==
        "tensor([1, 2, 3, 4], dtype=int32)");
}

TEST_CASE("format_tensor: a long row wraps at line_width, aligned under its first element") {
  std::vector<std::int32_t> v(12, 7);
  CHECK(format_tensor(from_vector(v, {12}), {.line_width = 30}) ==
        "tensor([7, 7, 7, 7, 7, 7, 7,\n"
        "        7, 7, 7, 7, 7], dtype=int32)");
  CHECK_THROWS_AS(format_tensor(from_vector(v, {12}), {.precision = -1}), Error);
}

TEST_CASE("a Variable prints as PyTorch's: values, then requires_grad or grad_fn") {
  const Variable w(from_vector(std::vector<float>{0.1f, -0.2f}, {1, 2}), true);
  const Variable c(from_vector(std::vector<float>{1.5f}, {1}));
  std::ostringstream leaf, constant, op, none;
  leaf << w;
  constant << c;
  op << sum(w * 2.0);
  none << Variable();
  CHECK(leaf.str() == "tensor([[ 0.1000, -0.2000]], requires_grad=True)");
  CHECK(constant.str() == "tensor([1.5000])");
  CHECK(op.str().rfind("tensor(-0.2000, grad_fn=<", 0) == 0);
  CHECK(op.str().back() == ')');
  CHECK(none.str() == "variable(undefined)");
}
