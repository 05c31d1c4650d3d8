// core/random.h — a seeded, counter-based random number generator (Philox4x32-10).
//
// Philox (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011) turns a
// (key, counter) pair into four random 32-bit words with ten rounds of multiply-and-xor. The
// whole state is two integers: the seed (key) and how many 32-bit words have been drawn
// (counter; word w comes from block w / 4). That makes the generator trivial to save in a checkpoint, to restore, and to split
// (two generators with different seeds are independent streams). cuRAND offers the same
// algorithm, which keeps the CPU and GPU stories alike.
//
// Same seed => the same numbers, bitwise, on every run and machine.
#pragma once

#include <array>
#include <cstdint>

namespace moelab {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : seed_(seed) {}

  std::uint32_t next_u32();
  // Uniform in [0, 1) with 24 random bits (exact in float32 and float64).
  double next_uniform();
  // Standard normal by the Box-Muller transform.
  double next_normal();
  // Uniform integer in [0, n), n >= 1 (rejection sampling: no modulo bias).
  std::uint32_t next_below(std::uint32_t n);

  std::uint64_t seed() const { return seed_; }
  std::uint64_t counter() const { return counter_; }
  // The full state: restoring (seed, counter) reproduces the stream from that point.
  void set_state(std::uint64_t seed, std::uint64_t counter);

 private:
  std::uint64_t seed_ = 0;
  std::uint64_t counter_ = 0;                 // words drawn so far
  std::uint64_t cached_block_ = ~0ull;        // which block buffer_ holds
  std::array<std::uint32_t, 4> buffer_{};
};

// Philox4x32-10 itself: the block for a (counter, key) pair.
std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> counter, std::array<std::uint32_t, 2> key);

}  // namespace moelab
