// tests/test_module_to.cpp — Module::to(Device) and the in-place storage move under it, on the CPU.
//
// Module::to moves every parameter's Storage (core/storage.h), not the handle, so that layers and
// optimizers holding their own copies of a parameter's handle see the move. On the CPU the cases
// here check what can be checked without a GPU: to(cpu) is a no-op that keeps every value and
// every handle; Tensor::move_storage_to is seen by copies and views of a tensor; and moving to
// CUDA where it is unavailable (a build without CUDA, or no GPU) throws a moelab::Error naming the
// device and leaves the model exactly as it was. The GPU side (values and gradients after a move
// to CUDA) is tests/test_cuda_reference.cpp's.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/backend.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/decoder.h"
#include "nn/linear.h"

using namespace moelab;

namespace {

DecoderConfig tiny_config() {
  DecoderConfig c;
  c.vocab = 11, c.d = 8, c.layers = 2, c.heads = 2, c.max_seq = 16;
  return c;
}

// Every parameter's values, in named_parameters() order.
std::vector<std::vector<float>> snapshot(const Module& m) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, p] : m.named_parameters()) out.push_back(p.data().to_vector<float>());
  return out;
}

}  // namespace

TEST_CASE("Tensor::move_storage_to to the same device keeps the storage, its copies and its views") {
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor copy = a;
  const Tensor row = a.slice(1, 1);  // a view: [[3, 4]]
  const void* before = a.raw();
  a.move_storage_to(Device::cpu());
  CHECK(a.raw() == before);
  CHECK(copy.shares_storage_with(a));
  CHECK(row.to_vector<float>() == std::vector<float>{3, 4});
}

TEST_CASE("Module::to(cpu) is a no-op: same values, same storage, seen through every handle") {
  Generator gen(3);
  Decoder model(tiny_config(), gen);
  const auto before = snapshot(model);
  const auto params = model.named_parameters();
  std::vector<const void*> pointers;
  for (const auto& [name, p] : params) pointers.push_back(p.data().raw());

  model.to(Device::cpu());
  CHECK(model.device() == Device::cpu());
  CHECK(snapshot(model) == before);
  const auto after = model.named_parameters();
  REQUIRE(after.size() == params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    INFO("parameter ", params[i].first);
    CHECK(after[i].second.data().raw() == pointers[i]);
    CHECK(after[i].second.data().shares_storage_with(params[i].second.data()));
  }
}

TEST_CASE("a parameter handle kept by a layer sees the module's move and later in-place updates") {
  Generator gen(5);
  Linear layer(3, 2, gen);
  const Variable kept = layer.weight();  // what an optimizer or another layer would hold
  layer.to(Device::cpu());
  CHECK(kept.device() == Device::cpu());
  CHECK(kept.data().shares_storage_with(layer.parameter("weight").data()));
  // Writes through the module's handle are seen through the kept one: they share the storage.
  Tensor w = layer.parameter("weight").data();
  kernels::fill(w, 0.5);
  for (float v : kept.data().to_vector<float>()) CHECK(v == 0.5f);
}

TEST_CASE("Module::to drops accumulated gradients") {
  Generator gen(7);
  Linear layer(3, 2, gen);
  const Variable x(normal({4, 3}, 0, 1, gen));
  sum(layer.forward(x)).backward();
  REQUIRE(layer.weight().grad().defined());
  layer.to(Device::cpu());
  for (const auto& [name, p] : layer.named_parameters()) {
    INFO("parameter ", name);
    CHECK_FALSE(p.grad().defined());
  }
}

TEST_CASE("a model still trains forward and backward after to(cpu)") {
  Generator gen(9);
  Decoder model(tiny_config(), gen);
  model.to(Device::cpu());
  const Tensor ids = from_vector(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Variable logits = model.forward(ids);
  CHECK(logits.shape() == Shape{2, 3, 11});
  sum(logits).backward();
  for (const auto& [name, p] : model.named_parameters()) {
    INFO("parameter ", name);
    CHECK(p.grad().defined());
  }
}

TEST_CASE("moving to an unavailable CUDA device throws a clear moelab::Error and changes nothing") {
  if (cuda_available()) {
    MESSAGE("a GPU is present: the failure path cannot be exercised here (tests/test_cuda_reference.cpp moves models)");
    return;
  }
  Generator gen(11);
  Decoder model(tiny_config(), gen);
  const auto before = snapshot(model);
  std::vector<const void*> pointers;
  for (const auto& [name, p] : model.named_parameters()) pointers.push_back(p.data().raw());

  std::string message;
  try {
    model.to(Device::cuda());
  } catch (const Error& e) {
    message = e.what();
  }
  INFO("message: ", message);
  CHECK(message.find("Module::to") != std::string::npos);
  CHECK(message.find("cuda") != std::string::npos);
  CHECK(model.device() == Device::cpu());
  CHECK(snapshot(model) == before);
  std::size_t i = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    INFO("parameter ", name);
    CHECK(p.device() == Device::cpu());
    CHECK(p.data().raw() == pointers[i++]);
  }
  // A plain tensor's storage: the same error type, nothing moved.
  Tensor t = from_vector(std::vector<float>{1, 2}, {2});
  CHECK_THROWS_AS(t.move_storage_to(Device::cuda()), Error);
  CHECK(t.device() == Device::cpu());
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2});
}
