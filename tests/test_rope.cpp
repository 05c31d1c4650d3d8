// tests/test_rope.cpp — the rotary position embedding kernel: against a naive double-precision
// loop (float64 and float32, with and without a position offset), inverse undoing forward,
// offsets agreeing with slices of a longer sequence, norms preserved, and the argument checks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/factories.h"
#include "core/kernels.h"
#include "core/parallel.h"
#include "tests/test_util.h"

using namespace moelab;
using moelab::testing::max_error;
using moelab::testing::to_doubles;

namespace {

// x: [B, T, H, hd] as doubles -> the rotated values, written out pair by pair.
std::vector<double> naive_rope(const std::vector<double>& x, const Shape& s, std::int64_t offset, double theta,
                               bool inverse) {
  const std::int64_t B = s[0], T = s[1], H = s[2], hd = s[3];
  std::vector<double> y(x.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t i = 0; i < hd / 2; ++i) {
          const double angle = static_cast<double>(offset + t) * std::pow(theta, -2.0 * double(i) / double(hd));
          const double c = std::cos(angle), sn = inverse ? -std::sin(angle) : std::sin(angle);
          const auto at = static_cast<std::size_t>(((b * T + t) * H + h) * hd + 2 * i);
          y[at] = x[at] * c - x[at + 1] * sn;
          y[at + 1] = x[at] * sn + x[at + 1] * c;
        }
  return y;
}

// One call's input shape and arguments.
struct Problem {
  Shape shape;
  std::int64_t offset;
  double theta;
  bool inverse;
};

}  // namespace

TEST_CASE("rope matches a naive loop in float64 and float32") {
  Generator gen(3);
  const std::vector<Problem> problems = {
      {{2, 5, 3, 8}, 0, 10000.0, false}, {{1, 7, 2, 4}, 11, 10000.0, false}, {{3, 2, 4, 6}, 3, 500.0, true},
      {{1, 1, 1, 2}, 1000, 10000.0, false},  // a single pair at a far position (as a KV-cached step)
      {{4, 64, 4, 32}, 0, 10000.0, false},   // large enough to run in parallel
  };
  for (const Problem& p : problems) {
    INFO("shape ", p.shape, " offset ", p.offset, " theta ", p.theta, " inverse ", p.inverse);
    const Tensor x64 = normal(p.shape, 0, 1, gen, DType::Float64);
    const std::vector<double> want = naive_rope(x64.to_vector<double>(), p.shape, p.offset, p.theta, p.inverse);
    CHECK(max_error(kernels::rope(x64, p.offset, p.theta, p.inverse), want) < 1e-13);
    const Tensor x32 = x64.to(DType::Float32);
    const Tensor y32 = kernels::rope(x32, p.offset, p.theta, p.inverse);
    CHECK(y32.dtype() == DType::Float32);
    CHECK(max_error(y32, naive_rope(to_doubles(x32), p.shape, p.offset, p.theta, p.inverse)) < 1e-6);
  }
}

// The kernel keeps each thread's last angle tables per direction (core/cpu/rope.cpp): a call that
// changes any one of the sequence length, head width, offset, theta or direction, or returns to an
// earlier key, must still rotate by its own angles.
TEST_CASE("rope's kept angle tables follow every change of length, width, offset, theta and direction") {
  Generator gen(7);
  const std::vector<Problem> keys = {
      {{1, 6, 2, 8}, 0, 10000.0, false},  {{1, 9, 2, 8}, 0, 10000.0, false}, {{1, 9, 2, 16}, 0, 10000.0, false},
      {{1, 9, 2, 16}, 5, 10000.0, false}, {{1, 9, 2, 16}, 5, 500.0, false},  {{1, 9, 2, 16}, 5, 500.0, true},
      {{1, 6, 2, 8}, 0, 10000.0, false},  {{1, 6, 2, 8}, 0, 10000.0, true},  {{2, 6, 1, 6}, 0, 10000.0, false},
  };
  for (int round = 0; round < 2; ++round)
    for (const Problem& key : keys) {
      INFO("round ", round, " shape ", key.shape, " offset ", key.offset, " theta ", key.theta, " inverse ", key.inverse);
      const Tensor x64 = normal(key.shape, 0, 1, gen, DType::Float64);
      CHECK(max_error(kernels::rope(x64, key.offset, key.theta, key.inverse),
                      naive_rope(x64.to_vector<double>(), key.shape, key.offset, key.theta, key.inverse)) < 1e-13);
      const Tensor x32 = x64.to(DType::Float32);
      CHECK(max_error(kernels::rope(x32, key.offset, key.theta, key.inverse),
                      naive_rope(to_doubles(x32), key.shape, key.offset, key.theta, key.inverse)) < 1e-6);
    }
}

TEST_CASE("rope: position 0 is the identity, inverse undoes forward, norms are kept") {
  Generator gen(4);
  const Tensor x = normal({2, 1, 3, 8}, 0, 1, gen, DType::Float64);
  CHECK(max_error(kernels::rope(x, 0, 10000.0, false), x.to_vector<double>()) == 0.0);

  const Tensor y = normal({2, 6, 3, 8}, 0, 1, gen, DType::Float64);
  const Tensor back = kernels::rope(kernels::rope(y, 7, 10000.0, false), 7, 10000.0, true);
  CHECK(max_error(back, y.to_vector<double>()) < 1e-14);

  // Each pair is rotated, so every pair's length is unchanged.
  const std::vector<double> a = y.to_vector<double>(), b = kernels::rope(y, 2, 10000.0, false).to_vector<double>();
  for (std::size_t i = 0; i < a.size(); i += 2)
    CHECK(std::hypot(a[i], a[i + 1]) == doctest::Approx(std::hypot(b[i], b[i + 1])).epsilon(1e-13));
}

TEST_CASE("rope with an offset equals the same tokens at the end of a longer sequence") {
  Generator gen(5);
  const Tensor x = normal({1, 6, 2, 4}, 0, 1, gen, DType::Float64);
  const Tensor full = kernels::rope(x, 0, 10000.0, false);
  const Tensor tail = kernels::rope(kernels::narrow(x, 1, 4, 2), 4, 10000.0, false);
  CHECK(max_error(tail, kernels::narrow(full, 1, 4, 2).to_vector<double>()) == 0.0);
}

TEST_CASE("rope does not depend on the thread count") {
  Generator gen(6);
  const Tensor x = normal({8, 64, 4, 32}, 0, 1, gen);
  const int saved = num_threads();
  set_num_threads(1);
  const std::vector<float> one = kernels::rope(x, 3, 10000.0, false).to_vector<float>();
  set_num_threads(2);
  const std::vector<float> two = kernels::rope(x, 3, 10000.0, false).to_vector<float>();
  set_num_threads(saved);
  CHECK(one == two);
}

TEST_CASE("rope handles empty tensors") {
  CHECK(kernels::rope(zeros({0, 3, 2, 4}), 0, 10000.0, false).shape() == Shape{0, 3, 2, 4});
  CHECK(kernels::rope(zeros({2, 0, 2, 4}), 5, 10000.0, false).numel() == 0);
}

TEST_CASE("rope rejects bad arguments, naming itself") {
  const Tensor x = zeros({1, 2, 2, 4});
  CHECK_THROWS_WITH_AS(kernels::rope(zeros({1, 2, 2, 3}), 0, 10000.0, false), doctest::Contains("rope"), Error);
  CHECK_THROWS_WITH_AS(kernels::rope(zeros({1, 2, 2, 3}), 0, 10000.0, false), doctest::Contains("even"), Error);
  CHECK_THROWS_WITH_AS(kernels::rope(zeros({2, 2, 8}), 0, 10000.0, false), doctest::Contains("[B, T, H, hd]"), Error);
  CHECK_THROWS_WITH_AS(kernels::rope(zeros({1, 2, 2, 4}, DType::Int32), 0, 10000.0, false),
                       doctest::Contains("rope"), Error);
  CHECK_THROWS_WITH_AS(kernels::rope(x, -1, 10000.0, false), doctest::Contains("position_offset"), Error);
  CHECK_THROWS_WITH_AS(kernels::rope(x, 0, 0.0, false), doctest::Contains("theta"), Error);
  CHECK_THROWS_WITH_AS(kernels::rope(x, 0, std::nan(""), false), doctest::Contains("theta"), Error);
  CHECK_THROWS_WITH_AS(kernels::rope(Tensor(), 0, 10000.0, false), doctest::Contains("rope"), Error);
}

// The CUDA twin (cuda/rope.cu) rounds each product separately, "to match the CPU"; so must the
// CPU. A fused multiply-add there (GCC's vectoriser turns this complex-multiply pattern into
// vfmaddsub even with -ffp-contract=off) rounds one product fewer times and differs in the last
// bit in about a quarter of the outputs. The reference rounds every operation through a volatile
// float, which no compiler can fuse (this file is compiled with the default contraction).
TEST_CASE("rope (float32) rounds every product separately, bit for bit") {
  const Shape shape{2, 7, 3, 16};
  Generator gen(41);
  Tensor x = normal(shape, 0, 1, gen, DType::Float32);
  const std::vector<float> xs = x.to_vector<float>();
  const auto rounded = [](float v) {
    volatile float stored = v;
    return static_cast<float>(stored);
  };
  for (bool inverse : {false, true}) {
    const std::vector<float> got = kernels::rope(x, 3, 10000.0, inverse).to_vector<float>();
    const std::int64_t T = shape[1], H = shape[2], hd = shape[3];
    std::int64_t mismatches = 0;
    for (std::size_t at = 0; at < xs.size(); at += 2) {
      const std::int64_t t = static_cast<std::int64_t>(at) / (H * hd) % T, i = static_cast<std::int64_t>(at) % hd / 2;
      const double angle = static_cast<double>(3 + t) * std::pow(10000.0, -2.0 * double(i) / double(hd));
      const float c = static_cast<float>(std::cos(angle));
      const float s = static_cast<float>(inverse ? -std::sin(angle) : std::sin(angle));
      const float y0 = rounded(rounded(xs[at] * c) - rounded(xs[at + 1] * s));
      const float y1 = rounded(rounded(xs[at] * s) + rounded(xs[at + 1] * c));
      mismatches += (got[at] != y0) + (got[at + 1] != y1);
    }
    INFO("inverse = ", inverse, ": ", mismatches, " of ", xs.size(), " outputs differ");
    CHECK(mismatches == 0);
  }
}
