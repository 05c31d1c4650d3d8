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

using namespace moelab;

namespace {

const std::string kDir = std::string(MOELAB_SOURCE_DIR) + "/tests/reference/";

double meta_number(const SafetensorsFile& file, const std::string& key) { return std::stod(file.metadata.at(key)); }

struct Fixture {
  SafetensorsFile weights = read_safetensors(kDir + "decoder_weights.safetensors");
  SafetensorsFile expected = read_safetensors(kDir + "decoder_expected.safetensors");
  DecoderConfig config() const {
    DecoderConfig c;
    c.vocab = static_cast<std::int64_t>(meta_number(weights, "vocab"));
    c.d = static_cast<std::int64_t>(meta_number(weights, "d"));
    c.layers = static_cast<std::int64_t>(meta_number(weights, "layers"));
    c.heads = static_cast<std::int64_t>(meta_number(weights, "heads"));
    c.ffn = static_cast<std::int64_t>(meta_number(weights, "ffn"));
    c.rope_theta = meta_number(weights, "rope_theta");
    c.norm_eps = meta_number(weights, "norm_eps");
    return c;
  }
};

// Largest |a - b| over all elements.
double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, double(std::abs(x[i] - y[i])));
  return worst;
}

// max |a - b| / max |b|: the error relative to the tensor's scale. (Per element, a gradient entry
// that is a near-cancelling sum of float32 terms, 1e-9 against a tensor of 1e-2, has no relative
// accuracy in either engine, so an elementwise ratio would measure rounding, not correctness.)
double max_rel_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double scale = 0, worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    scale = std::max(scale, double(std::abs(y[i])));
    worst = std::max(worst, std::abs(double(x[i]) - y[i]));
  }
  REQUIRE(scale > 0);
  return worst / scale;
}

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
  options.lr = meta_number(f.weights, "lr");
  options.eps = meta_number(f.weights, "eps");
  options.weight_decay = meta_number(f.weights, "weight_decay");
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
