// nn/random_stream.cpp — see random_stream.h.
#include "nn/random_stream.h"

#include <vector>

#include "core/error.h"
#include "core/factories.h"

namespace moelab {

namespace {

// The bits of a uint32 as an int32 and back (two's complement; well defined since C++20).
std::int32_t as_int(std::uint64_t half) { return static_cast<std::int32_t>(static_cast<std::uint32_t>(half)); }
std::uint64_t as_uint(std::int32_t v) { return static_cast<std::uint32_t>(v); }

}  // namespace

RandomStream::RandomStream(Tensor state) : state_(std::move(state)) {
  MOELAB_CHECK(state_.defined() && state_.dtype() == DType::Int32 && state_.shape() == Shape{4} &&
                   state_.device().is_cpu(),
               "RandomStream", "the state must be an int32 [4] host buffer (RandomStream::initial_state, "
               "registered with BufferPlace::Host)");
}

Tensor RandomStream::initial_state(std::uint64_t key) {
  return from_vector(std::vector<std::int32_t>{as_int(key), as_int(key >> 32), 0, 0}, {4});
}

std::uint64_t RandomStream::key() const {
  MOELAB_CHECK(defined(), "RandomStream", "no stream: this module was built without one");
  const std::int32_t* s = state_.data<std::int32_t>();
  return as_uint(s[0]) | (as_uint(s[1]) << 32);
}

std::uint64_t RandomStream::counter() const {
  MOELAB_CHECK(defined(), "RandomStream", "no stream: this module was built without one");
  const std::int32_t* s = state_.data<std::int32_t>();
  return as_uint(s[2]) | (as_uint(s[3]) << 32);
}

Generator RandomStream::generator() const {
  Generator gen;
  gen.set_state(key(), counter());
  return gen;
}

void RandomStream::store(const Generator& gen) {
  MOELAB_CHECK(defined(), "RandomStream", "no stream: this module was built without one");
  std::int32_t* s = state_.data<std::int32_t>();
  s[0] = as_int(gen.seed()), s[1] = as_int(gen.seed() >> 32);
  s[2] = as_int(gen.counter()), s[3] = as_int(gen.counter() >> 32);
}

}  // namespace moelab
