// tests/test_random_stream.cpp — nn/random_stream.h and host buffers (Module::register_buffer with
// BufferPlace::Host): the stream continues a Generator bitwise across generator()/store(), keeps
// keys and counters past 32 bits, lives in a buffer that checkpoints save and restore, and a
// module's to() leaves host buffers where they are. (Routers that draw through it resume bitwise:
// tests/test_router_contract.cpp; on a GPU the buffer stays on the host: test_cuda_reference.)
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/io/checkpoint.h"
#include "nn/module.h"
#include "nn/random_stream.h"
#include "temp_dir.h"

using namespace moelab;

namespace {

// A module that draws noise in training mode, as a router with jitter does.
class Noisy : public Module {
 public:
  explicit Noisy(std::uint64_t key) {
    weight_ = register_parameter("weight", zeros({3}));
    stream_ = RandomStream(register_buffer("noise_state", RandomStream::initial_state(key), BufferPlace::Host));
  }
  std::vector<float> draw(std::int64_t n) {
    Tensor noise = Tensor::empty({n}, DType::Float32, Device::cpu());
    Generator gen = stream_.generator();
    kernels::fill_uniform(noise, 0.0, 1.0, gen);
    stream_.store(gen);
    return noise.to_vector<float>();
  }
  const RandomStream& stream() const { return stream_; }

 private:
  Variable weight_;
  RandomStream stream_;
};

}  // namespace

TEST_CASE("RandomStream: generator() and store() continue one Generator's stream bitwise") {
  const std::uint64_t key = 0x123456789ABCDEF0ull;  // high bits set: both halves must round-trip
  Tensor state = RandomStream::initial_state(key);
  CHECK(state.dtype() == DType::Int32);
  CHECK(state.shape() == Shape{4});
  RandomStream stream(state);
  CHECK(stream.key() == key);
  CHECK(stream.counter() == 0);

  Generator uninterrupted(key);
  for (int round = 0; round < 5; ++round) {
    Generator g = stream.generator();
    for (int i = 0; i < 7 + round; ++i) CHECK(g.next_u32() == uninterrupted.next_u32());
    stream.store(g);
    CHECK(stream.counter() == uninterrupted.counter());
  }
  // A counter past 2^32 (a long run) is kept whole.
  Generator far;
  far.set_state(key, (1ull << 33) + 5);
  stream.store(far);
  CHECK(stream.counter() == (1ull << 33) + 5);
  CHECK(stream.generator().next_u32() == far.next_u32());

  CHECK_FALSE(RandomStream().defined());
  CHECK_THROWS_AS(RandomStream().generator(), Error);
  CHECK_THROWS_AS(RandomStream(zeros({4})), Error);                    // float32
  CHECK_THROWS_AS(RandomStream(zeros({3}, DType::Int32)), Error);      // [3]
}

TEST_CASE("a module's random stream is a host buffer: checkpoints restore it, so draws resume bitwise") {
  Noisy a(11);
  REQUIRE(a.named_buffers().size() == 1);
  CHECK(a.named_buffers()[0].first == "noise_state");
  a.draw(5);
  testing::TempDir dir;
  const std::string path = dir.file("noisy.safetensors");
  save_checkpoint(path, a, nullptr, 1, nullptr);
  const std::vector<float> next = a.draw(9);

  Noisy b(99);  // another key: only the checkpoint can make it draw a's numbers
  CHECK(b.draw(9) != next);
  load_checkpoint(path, b, nullptr, nullptr);
  CHECK(b.stream().key() == 11);
  CHECK(b.draw(9) == next);

  // to() leaves host buffers alone (here on the CPU already: the GPU case is test_cuda_reference).
  a.to(Device::cpu());
  CHECK(a.named_buffers()[0].second.device().is_cpu());
}
