// tests/test_bf16_convert.cpp — the many-value float32 -> bfloat16 conversion (core/cpu/bf16_convert.h)
// gives BFloat16::from_float's bits (itself checked against the definition in test_bfloat16.cpp):
//   - for the float32 patterns test_bfloat16 samples (every 97th of the 2^32, both signs), converted
//     in arrays of a million, so the vector loop sees every exponent, NaNs and subnormals;
//   - with one NaN or subnormal (the two inputs VCVTNE2PS2BF16 treats otherwise) at every position
//     of a 32-value block, from starts that are not a block apart and with every tail length 0 .. 33;
//   - through the tensor cast (Tensor::to), which is what the bf16 policy calls.
// On a CPU without AVX512_BF16 the function is the portable loop and this checks that loop; the
// first case's message says which ran.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/cpu/bf16_convert.h"
#include "core/cpu/gemm_bf16.h"
#include "core/factories.h"
#include "core/random.h"
#include "core/tensor.h"

using namespace moelab;

namespace {

float float_of_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// The indices where the conversion of `in` differs from from_float, the first few.
std::vector<std::size_t> mismatches(const std::vector<float>& in) {
  std::vector<BFloat16> out(in.size());
  cpu::float_to_bfloat16_bits(in.data(), out.data(), static_cast<std::int64_t>(in.size()));
  std::vector<std::size_t> bad;
  for (std::size_t i = 0; i < in.size() && bad.size() < 5; ++i)
    if (out[i].bits != BFloat16::from_float(in[i]).bits) bad.push_back(i);
  return bad;
}

}  // namespace

TEST_CASE("float_to_bfloat16_bits: from_float's bits across the float32 range") {
  MESSAGE("conversion: ", cpu::cpu_has_avx512_bf16() ? "VCVTNE2PS2BF16 (AVX512_BF16)" : "the portable loop");
  std::vector<float> block;
  block.reserve(1 << 20);
  std::uint64_t checked = 0;
  const auto flush = [&] {
    for (const std::size_t i : mismatches(block))
      FAIL_CHECK("float bits 0x" << std::hex << [&] { std::uint32_t b; std::memcpy(&b, &block[i], 4); return b; }());
    checked += block.size();
    block.clear();
  };
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 97) {
    block.push_back(float_of_bits(static_cast<std::uint32_t>(b)));
    if (block.size() == block.capacity()) flush();
  }
  flush();
  CHECK(checked > 44000000);
}

TEST_CASE("float_to_bfloat16_bits: a NaN or subnormal anywhere in a block, any start and tail") {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                            float_of_bits(0x7F800001u), float_of_bits(0x007FFFFFu), float_of_bits(0x807F8000u),
                            std::numeric_limits<float>::denorm_min()};
  for (const float special : specials)
    for (int position = 0; position < 40; ++position)
      for (int length = 0; length <= 33 + 40; length += 7) {
        std::vector<float> in(static_cast<std::size_t>(length));
        for (int i = 0; i < length; ++i) in[static_cast<std::size_t>(i)] = 0.37f * static_cast<float>(i - 20);
        if (position < length) in[static_cast<std::size_t>(position)] = special;
        CHECK(mismatches(in).empty());
      }
  // The tails alone: every length up to two blocks and one.
  for (int length = 0; length <= 65; ++length) {
    std::vector<float> in(static_cast<std::size_t>(length), 1.0f + 0x1p-8f);  // a tie: to even
    CHECK(mismatches(in).empty());
  }
}

TEST_CASE("float_to_bfloat16_bits: the tensor cast gives from_float's bits") {
  Generator gen(3);
  const Tensor x = normal({37, 91}, 0.0, 10.0, gen);  // 3,367 values: several chunks' worth of blocks and a tail
  const Tensor y = x.to(DType::BFloat16);
  const float* in = x.data<float>();
  const BFloat16* out = y.data<BFloat16>();
  for (std::int64_t i = 0; i < x.numel(); ++i) REQUIRE(out[i].bits == BFloat16::from_float(in[i]).bits);
}
