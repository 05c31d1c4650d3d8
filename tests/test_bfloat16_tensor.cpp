// tests/test_bfloat16_tensor.cpp — bfloat16 as a Tensor dtype (core/dtype.h): storage, casts on
// the host and against PyTorch's rounding, factories, printing, safetensors BF16, the products
// that take it (bf16 operands, float32 sums) and the ops that refuse it by name.
//
// PyTorch's bits come from tests/reference/bf16_autocast.safetensors (make_bf16_fixture.py):
// cast.x holds ties, overflow, NaN, infinities, subnormals and values from 1e-30 to 1e30, cast.y
// their torch.bfloat16, read as the BF16 PyTorch wrote.
//
// Products of two bfloat16 operands are compared with the float32 product of their exact
// widening: bitwise where the CPU widens (no AVX512_BF16, MOELAB_CPU_ISA below avx512, or
// MOELAB_CPU_BF16=widen), and where it runs VDPBF16PS (a pairwise chain over k: core/cpu/gemm_bf16.h,
// checked bitwise against its definition in tests/test_gemm_bf16.cpp) within that chain's float32
// rounding: 2 (k 2^-24 sum_k |a b| + k FLT_MIN) an element.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu/gemm_bf16.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/random.h"
#include "core/tensor_print.h"
#include "nn/io/safetensors.h"
#include "tests/temp_dir.h"

using namespace moelab;

namespace {

const std::string kFixture = std::string(MOELAB_SOURCE_DIR) + "/tests/reference/bf16_autocast.safetensors";

std::vector<std::uint16_t> bits_of(const Tensor& t) {
  REQUIRE(t.dtype() == DType::BFloat16);
  const Tensor host = t.to(Device::cpu());
  std::vector<std::uint16_t> out;
  for (std::int64_t i = 0; i < host.numel(); ++i) out.push_back(host.data<BFloat16>()[i].bits);
  return out;
}

// Every value rounded to bfloat16 and widened back, as float32.
Tensor rounded(const Tensor& x) { return x.to(DType::BFloat16).to(DType::Float32); }

// `got` (a product of bfloat16 operands) against `widened` (the float32 product of the widened
// operands) over k terms; `magnitude` holds sum_k |a b| per element (the same product of |a|, |b|).
void check_widened_product(const Tensor& got, const Tensor& widened, const Tensor& magnitude, std::int64_t k) {
  const std::vector<float> g = got.to_vector<float>(), w = widened.to_vector<float>(), s = magnitude.to_vector<float>();
  REQUIRE(g.size() == w.size());
  if (!cpu::use_native_bf16_gemm()) {
    CHECK(g == w);
    return;
  }
  int bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double bound = 2.0 * (static_cast<double>(k) * std::ldexp(s[i], -24) + static_cast<double>(k) * std::numeric_limits<float>::min());
    bad += !(std::fabs(static_cast<double>(g[i]) - w[i]) <= bound);
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("bfloat16 is a two-byte storage dtype") {
  CHECK(dtype_size(DType::BFloat16) == 2);
  CHECK(std::string(dtype_name(DType::BFloat16)) == "bfloat16");
  CHECK_FALSE(is_floating(DType::BFloat16));  // ops compute in float32 / float64 only
  const Tensor t = Tensor::empty({3, 5}, DType::BFloat16);
  CHECK(t.nbytes() == 30);
  CHECK(t.str() == "Tensor(bfloat16, cpu, [3, 5])");
  CHECK_THROWS_WITH_AS(t.data<float>(), doctest::Contains("bfloat16"), Error);
}

TEST_CASE("casting to bfloat16 gives PyTorch's bits, and back to float32 is exact") {
  const SafetensorsFile f = read_safetensors(kFixture);
  const Tensor& x = f.at("cast.x");  // float32
  const Tensor& expected = f.at("cast.y");
  REQUIRE(expected.dtype() == DType::BFloat16);  // BF16 as PyTorch wrote it
  REQUIRE(x.numel() == 1000);
  const std::vector<std::uint16_t> mine = bits_of(x.to(DType::BFloat16)), theirs = bits_of(expected);
  int differ = 0;
  const auto is_nan = [](std::uint16_t b) { return (b & 0x7FFF) > 0x7F80; };
  for (std::size_t i = 0; i < mine.size(); ++i) {
    // A NaN is a NaN: moelab always gives 0x7FC0 (c10::BFloat16's scalar rounding does too);
    // PyTorch's vectorised CPU conversion, which .to() used here, gives 0xFFFF.
    if (is_nan(theirs[i])) {
      CHECK(mine[i] == 0x7FC0);
      continue;
    }
    if (mine[i] != theirs[i]) {
      ++differ;
      MESSAGE("value ", i, " = ", x.data<float>()[i], ": moelab ", mine[i], ", PyTorch ", theirs[i]);
    }
  }
  CHECK(differ == 0);
  // Widening is exact: each bf16 value as float32 has the same high half and a zero low half.
  const Tensor back = expected.to(DType::Float32);
  for (std::int64_t i = 0; i < back.numel(); ++i) {
    std::uint32_t b;
    std::memcpy(&b, back.data<float>() + i, 4);
    CHECK(b == static_cast<std::uint32_t>(theirs[static_cast<std::size_t>(i)]) << 16);
  }
}

TEST_CASE("casts between bfloat16 and float64, int32 and itself") {
  // float64 -> bfloat16 rounds through float32, as PyTorch's .to(torch.bfloat16) does.
  const Tensor d = from_vector(std::vector<double>{1.0, 0.1, -2.5, 1e300, 3.0}, {5});
  const Tensor h = d.to(DType::BFloat16);
  CHECK(h.to(DType::Float64).to_vector<double>() == std::vector<double>{1.0, 0.10009765625, -2.5, INFINITY, 3.0});
  // to int32 truncates as float32 -> int32 does; int32 -> bfloat16 rounds (257 is a tie: down to 256).
  const Tensor i = from_vector(std::vector<std::int32_t>{7, -3, 257, 259}, {4});
  CHECK(i.to(DType::BFloat16).to(DType::Float32).to_vector<float>() == std::vector<float>{7, -3, 256, 260});
  CHECK(from_vector(std::vector<float>{2.75f, -1.5f}, {2}).to(DType::BFloat16).to(DType::Int32).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{2, -1});
  const Tensor same = kernels::cast(h, DType::BFloat16);
  CHECK_FALSE(same.shares_storage_with(h));
  CHECK(bits_of(same) == bits_of(h));
}

TEST_CASE("factories and fill make bfloat16 tensors by rounding") {
  CHECK(full({2, 2}, 0.1, DType::BFloat16).to(DType::Float32).to_vector<float>() ==
        std::vector<float>(4, 0.10009765625f));
  CHECK(bits_of(zeros({3}, DType::BFloat16)) == std::vector<std::uint16_t>(3, 0));
  CHECK(bits_of(ones({2}, DType::BFloat16)) == std::vector<std::uint16_t>(2, 0x3F80));
  CHECK(from_vector(std::vector<double>{1.00390625, 1.01171875}, {2}, DType::BFloat16).to(DType::Float32).to_vector<float>() ==
        std::vector<float>{1.0f, 1.015625f});  // two ties: to even
  Generator gen(1);
  CHECK_THROWS_WITH_AS(normal({4}, 0.0, 1.0, gen, DType::BFloat16), doctest::Contains("float32 or float64"), Error);
}

TEST_CASE("a bfloat16 tensor prints its values and its dtype") {
  const Tensor t = from_vector(std::vector<float>{0.1f, -2.0f, 300.7f}, {3}).to(DType::BFloat16);
  const std::string text = format_tensor(t);
  CHECK(text.find("dtype=bfloat16") != std::string::npos);
  CHECK(text.find("0.1001") != std::string::npos);  // 0.10009765625, not 0.1
  CHECK(text.find("300.") != std::string::npos);    // 300.7 -> 300 (bfloat16 steps by 2 there)
}

TEST_CASE("safetensors writes and reads BF16, bit for bit") {
  testing::TempDir dir;
  const SafetensorsFile f = read_safetensors(kFixture);
  const Tensor& y = f.at("cast.y");
  const std::string path = dir.file("h.safetensors");
  write_safetensors(path, {{"h", y}, {"f", f.at("cast.x")}}, {});
  const SafetensorsFile back = read_safetensors(path);
  CHECK(back.at("h").dtype() == DType::BFloat16);
  CHECK(bits_of(back.at("h")) == bits_of(y));
  // The header names the dtype as safetensors (and PyTorch) do.
  CHECK(std::string(safetensors_dtype_name(DType::BFloat16)) == "BF16");
}

TEST_CASE("matmul of two bfloat16 operands is their exact widening's float32 product") {
  Generator gen(3);
  const Tensor a = normal({2, 9, 13}, 0.0, 1.0, gen), b = normal({2, 11, 13}, 0.0, 1.0, gen);
  const Tensor a16 = a.to(DType::BFloat16), b16 = b.to(DType::BFloat16);
  const Tensor y = kernels::matmul(a16, b16, false, /*trans_b=*/true);
  CHECK(y.dtype() == DType::Float32);
  CHECK((y.shape() == Shape{2, 9, 11}));
  check_widened_product(y, kernels::matmul(rounded(a), rounded(b), false, true),
                        kernels::matmul(kernels::abs(rounded(a)), kernels::abs(rounded(b)), false, true), 13);
  // ... which differs from the float32 product of the unrounded values (the rounding is real).
  CHECK(y.to_vector<float>() != kernels::matmul(a, b, false, true).to_vector<float>());
  CHECK_THROWS_WITH_AS(kernels::matmul(a16, b, false, true), doctest::Contains("two bfloat16 operands"), Error);
  CHECK_THROWS_WITH_AS(kernels::matmul(a, b16, false, true), doctest::Contains("two bfloat16 operands"), Error);
}

TEST_CASE("grouped_matmul and its weight gradient take bfloat16 operands") {
  Generator gen(4);
  const Tensor x = normal({10, 6}, 0.0, 1.0, gen), w = normal({3, 6, 5}, 0.0, 1.0, gen), dy = normal({10, 5}, 0.0, 1.0, gen);
  const Tensor offsets = from_vector(std::vector<std::int32_t>{0, 4, 4, 9}, {4});
  const Tensor y = kernels::grouped_matmul(x.to(DType::BFloat16), w.to(DType::BFloat16), offsets);
  CHECK(y.dtype() == DType::Float32);
  const auto abs_r = [&](const Tensor& t) { return kernels::abs(rounded(t)); };
  check_widened_product(y, kernels::grouped_matmul(rounded(x), rounded(w), offsets),
                        kernels::grouped_matmul(abs_r(x), abs_r(w), offsets), 6);
  const Tensor dw = kernels::grouped_matmul_weight_grad(x.to(DType::BFloat16), dy.to(DType::BFloat16), offsets, 3);
  // k is a group's row count here: at most 5.
  check_widened_product(dw, kernels::grouped_matmul_weight_grad(rounded(x), rounded(dy), offsets, 3),
                        kernels::grouped_matmul_weight_grad(abs_r(x), abs_r(dy), offsets, 3), 5);
}

TEST_CASE("ops that compute in float32 refuse bfloat16, naming it") {
  const Tensor h = ones({4}, DType::BFloat16);
  CHECK_THROWS_WITH_AS(kernels::add(h, h), doctest::Contains("bfloat16"), Error);
  CHECK_THROWS_WITH_AS(kernels::softmax(h.reshape({2, 2})), doctest::Contains("bfloat16"), Error);
  CHECK_THROWS_WITH_AS(kernels::sum(h), doctest::Contains("bfloat16"), Error);
}
