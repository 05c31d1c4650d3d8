// tests/test_reference.cpp — moelab's dense decoder against PyTorch, the llm.c way.
//
// tests/reference/make_fixtures.py builds the same decoder in PyTorch 1.13 (2 layers, d 32,
// 4 heads, vocab 16), and commits its weights, a batch, the logits, the loss, every parameter's
// gradient and the losses after 3 AdamW steps. Here moelab loads the weights and must agree:
// logits and loss to 1e-5 absolute, gradients to 1e-4 relative, AdamW losses to 1e-5.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/kernels.h"
#include "nn/decoder.h"
#include "nn/io/checkpoint.h"
#include "nn/io/safetensors.h"
#include "nn/loss.h"
#include "nn/optim/adam.h"
#include "reference_fixture.h"

using namespace moelab;

namespace {

using testing::kReferenceDir;
using testing::max_abs_diff;
using testing::max_rel_diff;

struct Fixture {
  SafetensorsFile weights = read_safetensors(kReferenceDir + "decoder_weights.safetensors");
  SafetensorsFile expected = read_safetensors(kReferenceDir + "decoder_expected.safetensors");
  DecoderConfig config() const { return testing::reference_decoder_config(weights); }
};

}  // namespace

TEST_CASE("the decoder's logits, loss and gradients agree with PyTorch's") {
  Fixture f;
  Generator gen(0);
  Decoder model(f.config(), gen);
  load_parameters(f.weights, model);
  const Tensor& tokens = f.expected.at("tokens");
  const Tensor& targets = f.expected.at("targets");

  Variable logits = model.forward(tokens);
  CHECK(max_abs_diff(logits.data(), f.expected.at("logits")) <= 1e-5);
  Variable loss = nn::cross_entropy(logits, targets);
  CHECK(std::abs(loss.data().item<float>() - f.expected.at("loss").item<float>()) <= 1e-5);

  model.zero_grad();
  loss.backward();
  int checked = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    INFO("parameter ", name);
    REQUIRE(p.grad().defined());
    CHECK(max_rel_diff(p.grad(), f.expected.at("grad." + name)) <= 1e-4);
    ++checked;
  }
  CHECK(checked == 19);  // every parameter of the 2-layer decoder has a reference gradient
}

TEST_CASE("three AdamW steps give PyTorch's losses") {
  Fixture f;
  Generator gen(0);
  Decoder model(f.config(), gen);
  load_parameters(f.weights, model);
  const Tensor& tokens = f.expected.at("tokens");
  const Tensor& targets = f.expected.at("targets");
  AdamOptions options;
  options.lr = testing::meta_number(f.weights, "lr");
  options.eps = testing::meta_number(f.weights, "eps");
  options.weight_decay = testing::meta_number(f.weights, "weight_decay");
  AdamW opt(model.parameters(), options);
  const std::vector<float> want = f.expected.at("adamw_losses").to_vector<float>();
  REQUIRE(want.size() == 3);

  model.zero_grad();
  nn::cross_entropy(model.forward(tokens), targets).backward();
  for (std::size_t step = 0; step < want.size(); ++step) {
    opt.step();
    model.zero_grad();
    Variable loss = nn::cross_entropy(model.forward(tokens), targets);
    loss.backward();
    INFO("after AdamW step ", step + 1);
    CHECK(std::abs(loss.data().item<float>() - want[step]) <= 1e-5);
  }
}
