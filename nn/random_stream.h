// nn/random_stream.h — random numbers a module draws while it trains, kept where checkpoints see
// them, so that a resumed run draws exactly what the uninterrupted one would have.
//
// A Generator (core/random.h) is counter-based: its whole state is a key (the seed) and how many
// 32-bit words it has handed out (the counter). A RandomStream keeps those two numbers in a buffer
// of the module that owns it, int32 [4] = {key low 32 bits, key high, counter low, counter high}
// (each half stored with its bits unchanged), registered as a host buffer
// (Module::register_buffer with BufferPlace::Host): save_checkpoint writes it with the parameters,
// load_checkpoint restores it in place, and Module::to leaves it on the CPU, so reading it every
// step costs no device transfer (the CUDA kernels take the key and counter as launch arguments).
//
// A module draws through a Generator made at the buffer's state, then stores the counter back:
//
//   // in the constructor:
//   stream_ = RandomStream(register_buffer("jitter_state", RandomStream::initial_state(key), BufferPlace::Host));
//   // in forward / route, training mode only:
//   Generator gen = stream_.generator();                         // (key, counter) from the buffer
//   kernels::fill_uniform(noise, 0.9, 1.1, gen);                 // draws, advancing the counter
//   stream_.store(gen);                                          // the buffer now holds the new counter
//
// Why not a Generator member: it is invisible to checkpoints. A resumed run would start the
// stream again from its key (or from another module's seed) and draw different noise: the bitwise
// resume nn/io/checkpoint.h promises would fail for every router that draws (TopKRouter's jitter
// did, before it used this). tests/router_contract.h checks resume on every router.
#pragma once

#include <cstdint>

#include "core/random.h"
#include "core/tensor.h"

namespace moelab {

class RandomStream {
 public:
  RandomStream() = default;  // none: defined() is false and generator() throws
  // Wraps a registered int32 [4] host buffer (moelab::Error for any other tensor).
  explicit RandomStream(Tensor state);

  // The buffer's initial value for a stream keyed by `key` at counter 0: int32 [4] on the CPU.
  static Tensor initial_state(std::uint64_t key);

  bool defined() const { return state_.defined(); }
  // A Generator at the buffer's (key, counter).
  Generator generator() const;
  // Writes gen's counter (and key) into the buffer.
  void store(const Generator& gen);

  std::uint64_t key() const;
  std::uint64_t counter() const;

 private:
  Tensor state_;  // the owner's buffer: shares its storage, so checkpoints read and write it
};

}  // namespace moelab
