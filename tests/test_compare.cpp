// tests/test_compare.cpp — comparisons and where() (autograd/ops_compare.h): masks with NaN and
// broadcasting, the scalar forms, where() taking values exactly (an inf or NaN in the branch not
// taken stays out), its gradient exact zeros outside its branch, and its gradcheck.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/factories.h"

using namespace moelab;

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
std::vector<double> values(const Tensor& t) { return t.to(DType::Float64).to_vector<double>(); }
Variable var(const std::vector<double>& v, bool grad = false) {
  return Variable(from_vector(v, {static_cast<std::int64_t>(v.size())}), grad);
}
}  // namespace

TEST_CASE("comparisons: 1 where the relation holds, NaN false except under ne, broadcast and scalar forms") {
  const Variable a = var({1, 2, 3, kNaN}), b = var({2, 2, 2, 2});
  CHECK(values(eq(a, b)) == std::vector<double>{0, 1, 0, 0});
  CHECK(values(ne(a, b)) == std::vector<double>{1, 0, 1, 1});
  CHECK(values(lt(a, b)) == std::vector<double>{1, 0, 0, 0});
  CHECK(values(le(a, b)) == std::vector<double>{1, 1, 0, 0});
  CHECK(values(gt(a, b)) == std::vector<double>{0, 0, 1, 0});
  CHECK(values(ge(a, b)) == std::vector<double>{0, 1, 1, 0});
  CHECK(values(gt(a, 1.5)) == std::vector<double>{0, 1, 1, 0});
  CHECK(values(le(a, 2.0)) == std::vector<double>{1, 1, 0, 0});
  CHECK(gt(a, b).dtype() == DType::Float64);
  // [2, 1] against [3]: a [2, 3] mask.
  const Variable col(from_vector(std::vector<float>{0, 5}, {2, 1})), row(from_vector(std::vector<float>{-1, 0, 9}, {3}));
  const Tensor m = lt(col, row);
  CHECK(m.shape() == Shape{2, 3});
  CHECK(m.dtype() == DType::Float32);
  CHECK(values(m) == std::vector<double>{0, 0, 1, 0, 0, 1});
}

TEST_CASE("where: exact values from the branch taken, exact zero gradients outside it") {
  const Variable a = var({1, kInf, 3, kNaN}, true), b = var({-1, -2, kNaN, -4}, true);
  const Tensor cond = from_vector(std::vector<float>{1, 0, 1, 0}, {4});
  const Variable y = where(cond, a, b);
  CHECK(values(y.data()) == std::vector<double>{1, -2, 3, -4});  // the inf and NaNs not taken stay out
  sum(y * var({10, 20, 30, 40})).backward();
  CHECK(values(a.grad()) == std::vector<double>{10, 0, 30, 0});
  CHECK(values(b.grad()) == std::vector<double>{0, 20, 0, 40});
  // An int32 condition, and a mask from a comparison: elementwise max of two tensors.
  const Variable p = var({1, 5, 2}), q = var({4, 3, 2});
  CHECK(values(where(gt(p, q), p, q).data()) == std::vector<double>{4, 5, 2});
  CHECK(values(where(from_vector(std::vector<std::int32_t>{0, 7, 0}, {3}), p, q).data()) == std::vector<double>{4, 5, 2});
  CHECK_THROWS_AS(where(cond, a, var({1, 2, 3})), Error);                                  // [4] and [3]
  CHECK_THROWS_AS(where(cond, a, Variable(from_vector(std::vector<float>{1, 2, 3, 4}, {4}))), Error);  // dtypes
}

TEST_CASE("where: gradcheck in float64, 2-d") {
  Generator gen(3);
  const Tensor a = normal({3, 4}, 0.0, 1.0, gen, DType::Float64), b = normal({3, 4}, 0.0, 1.0, gen, DType::Float64);
  const Tensor cond = gt(Variable(normal({3, 4}, 0.0, 1.0, gen, DType::Float64)), 0.0);
  const GradcheckResult r = gradcheck([&](const std::vector<Variable>& v) { return where(cond, v[0], v[1]); }, {a, b});
  CHECK_MESSAGE(r.ok, r.report);
}

TEST_CASE("where broadcasts the NumPy way, sums a broadcast branch's gradient, and takes a number as a branch") {
  // cond [2, 3], a [2, 3], b [3] (one row for both rows), out [2, 3].
  const Variable a = var({1, 2, 3, 4, 5, 6}, true), b = var({-1, -2, -3}, true);
  const Variable a2 = reshape(a, {2, 3});
  const Tensor cond = from_vector(std::vector<float>{1, 0, 0, 0, 1, 0}, {2, 3});
  const Variable y = where(cond, a2, b);
  CHECK(y.shape() == Shape({2, 3}));
  CHECK(values(y.data()) == std::vector<double>{1, -2, -3, -1, 5, -3});
  sum(y * reshape(var({10, 20, 30, 40, 50, 60}), {2, 3})).backward();
  CHECK(values(a.grad()) == std::vector<double>{10, 0, 0, 0, 50, 0});
  CHECK(values(b.grad()) == std::vector<double>{40, 20, 90});  // summed over the two rows it served
  // A condition that broadcasts too: one column mask [2, 1] picks whole rows.
  const Tensor rows = from_vector(std::vector<float>{0, 1}, {2, 1});
  CHECK(values(where(rows, a2, b).data()) == std::vector<double>{-1, -2, -3, 4, 5, 6});
  // Numbers as branches: constants, no gradient to them, the other branch's gradient exact.
  const Variable x = var({3, -1, 2}, true);
  const Tensor positive = gt(x, 0.0);
  const Variable kept = where(positive, x, 0.0);
  CHECK(values(kept.data()) == std::vector<double>{3, 0, 2});
  CHECK(values(where(positive, -1e9, x).data()) == std::vector<double>{-1e9, -1, -1e9});
  sum(kept).backward();
  CHECK(values(x.grad()) == std::vector<double>{1, 0, 1});
  CHECK_THROWS_WITH(where(from_vector(std::vector<float>{1, 0}, {2}), a2, b), doctest::Contains("do not broadcast"));
}

TEST_CASE("where with broadcasting: gradcheck in float64") {
  Generator gen(4);
  const Tensor a = normal({3, 4}, 0.0, 1.0, gen, DType::Float64), b = normal({1, 4}, 0.0, 1.0, gen, DType::Float64);
  const Tensor cond = gt(Variable(normal({3, 1}, 0.0, 1.0, gen, DType::Float64)), 0.0);
  const GradcheckResult r = gradcheck([&](const std::vector<Variable>& v) { return where(cond, v[0], v[1]); }, {a, b});
  CHECK_MESSAGE(r.ok, r.report);
}
