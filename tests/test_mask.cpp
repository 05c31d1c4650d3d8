// tests/test_mask.cpp — causal_mask against a naive loop for square, wide (S > T) and tall (S < T)
// scores, with -infinity and finite fills, plus its argument checks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/factories.h"
#include "core/kernels.h"

using namespace moelab;

namespace {

// Every entry of causal_mask(scores, fill) against the rule: (i, j) is filled iff j > i + (S - T).
void check_mask(const Shape& shape, DType dtype, double fill, Generator& gen) {
  Tensor scores = uniform(shape, -1.0, 1.0, gen, dtype);
  Tensor out = kernels::causal_mask(scores, fill);
  REQUIRE(out.shape() == shape);
  REQUIRE(out.dtype() == dtype);
  const auto in = scores.to(DType::Float64).to_vector<double>();
  const auto got = out.to(DType::Float64).to_vector<double>();
  const std::int64_t t = shape[shape.rank() - 2], s = shape[shape.rank() - 1];
  const double fill_as_dtype = dtype == DType::Float32 ? static_cast<double>(static_cast<float>(fill)) : fill;
  std::int64_t filled = 0;
  bool ok = true;
  for (std::int64_t e = 0; e < shape.numel(); ++e) {
    const std::int64_t i = (e / s) % t, j = e % s;
    const bool masked = j > i + (s - t);
    filled += masked;
    ok = ok && got[static_cast<std::size_t>(e)] == (masked ? fill_as_dtype : in[static_cast<std::size_t>(e)]);
  }
  CHECK(ok);
  CHECK(filled > 0);  // the case exercised the fill at all
}

}  // namespace

TEST_CASE("causal_mask fills exactly the entries above the shifted diagonal") {
  Generator gen(1);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::Float32, DType::Float64}) {
    check_mask({2, 3, 4, 4}, dtype, neg_inf, gen);  // T == S: self-attention
    check_mask({2, 3, 6}, dtype, -1.0e4, gen);      // S > T: queries see S - T extra keys
    check_mask({5, 3}, dtype, 0.0, gen);            // S < T: the first rows are fully masked
    check_mask({4, 128, 128}, dtype, neg_inf, gen); // large: the parallel path
  }
  // Hand-checked: T = 2, S = 3 -> row 0 sees columns 0..1, row 1 sees 0..2.
  Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  const auto y = kernels::causal_mask(x, -std::numeric_limits<double>::infinity()).to_vector<float>();
  CHECK(y[0] == 1.0f);
  CHECK(y[1] == 2.0f);
  CHECK((std::isinf(y[2]) && y[2] < 0));
  CHECK(y[3] == 4.0f);
  CHECK(y[5] == 6.0f);
  // Empty scores: an empty copy.
  CHECK(kernels::causal_mask(zeros({0, 4, 4}), 0.0).shape() == Shape{0, 4, 4});
}

TEST_CASE("causal_mask rejects bad arguments with the op's name") {
  CHECK_THROWS_WITH_AS(kernels::causal_mask(zeros({4}), 0.0), doctest::Contains("causal_mask"), Error);
  CHECK_THROWS_WITH_AS(kernels::causal_mask(zeros({3, 3}, DType::Int32), 0.0), doctest::Contains("causal_mask"),
                       Error);
  CHECK_THROWS_WITH_AS(kernels::causal_mask(Tensor(), 0.0), doctest::Contains("causal_mask"), Error);
  CHECK_THROWS_WITH_AS(kernels::causal_mask(zeros({3, 3}), -1.0e300), doctest::Contains("causal_mask"), Error);
  CHECK_NOTHROW(kernels::causal_mask(zeros({3, 3}, DType::Float64), -1.0e300));
}
