// core/random.cpp — Philox4x32-10 and the Generator built on it.
#include "core/random.h"

#include <cmath>

#include "core/error.h"

namespace moelab {

std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> c, std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;  // round multipliers
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // key schedule increments
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c[2];
    const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c = {hi1 ^ c[1] ^ key[0], lo1, hi0 ^ c[3] ^ key[1], lo0};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return c;
}

std::uint32_t Generator::next_u32() {
  const std::uint64_t block = counter_ / 4;
  if (block != cached_block_) {
    const std::array<std::uint32_t, 4> ctr = {static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                                              0u, 0u};
    const std::array<std::uint32_t, 2> key = {static_cast<std::uint32_t>(seed_),
                                              static_cast<std::uint32_t>(seed_ >> 32)};
    buffer_ = philox4x32(ctr, key);
    cached_block_ = block;
  }
  return buffer_[static_cast<std::size_t>(counter_++ % 4)];
}

double Generator::next_uniform() { return static_cast<double>(next_u32() >> 8) * (1.0 / 16777216.0); }

double Generator::next_normal() {
  // u1 in (0, 1] so that log(u1) is finite.
  const double u1 = 1.0 - next_uniform();
  const double u2 = next_uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

std::uint32_t Generator::next_below(std::uint32_t n) {
  MOELAB_CHECK(n >= 1, "Generator::next_below", "n must be >= 1, got ", n);
  const std::uint32_t limit = static_cast<std::uint32_t>((0x100000000ull / n) * n - 1);  // largest fair value
  for (;;) {
    const std::uint32_t r = next_u32();
    if (r <= limit || limit == 0xFFFFFFFFu) return r % n;
  }
}

void Generator::set_state(std::uint64_t seed, std::uint64_t counter) {
  seed_ = seed;
  counter_ = counter;
  cached_block_ = ~0ull;
}

}  // namespace moelab
