// tests/test_reference_moe.cpp — moelab's MoE decoder against PyTorch, the llm.c way.
//
// tests/reference/make_fixtures.py also builds the MoE decoder in PyTorch 1.13: the dense
// reference decoder (2 layers, d 32, 4 heads, vocab 16) with every FFN an 8-expert top-2 mixture
// (Mixtral gates: softmax, top-2 by logit, renormalised; f = d; no biases, aux loss or capacity),
// written as a plain per-expert loop. It commits the weights, a batch, the logits, the loss,
// every parameter's gradient and the losses after 3 AdamW steps, and asserts that in each of
// those forwards every token's 2nd and 3rd router logits are far apart (top-2 selection is
// discontinuous, so a near-tie could flip between the engines). Here moelab loads the weights and
// must agree with the same tolerances as tests/test_reference.cpp: logits and loss to 1e-5
// absolute, gradients to 1e-4 relative, AdamW losses to 1e-5.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "nn/decoder.h"
#include "nn/io/checkpoint.h"
#include "nn/io/safetensors.h"
#include "nn/loss.h"
#include "nn/moe/moe_decoder.h"
#include "nn/optim/adam.h"

using namespace moelab;

namespace {

const std::string kDir = std::string(MOELAB_SOURCE_DIR) + "/tests/reference/";

double meta_number(const SafetensorsFile& file, const std::string& key) { return std::stod(file.metadata.at(key)); }

// A JSON string from the metadata ("\"softmax-topk-renorm\"") without its quotes.
std::string meta_string(const SafetensorsFile& file, const std::string& key) {
  const std::string& s = file.metadata.at(key);
  REQUIRE(s.size() >= 2);
  REQUIRE(s.front() == '"');
  REQUIRE(s.back() == '"');
  return s.substr(1, s.size() - 2);
}

struct Fixture {
  SafetensorsFile weights = read_safetensors(kDir + "moe_decoder_weights.safetensors");
  SafetensorsFile expected = read_safetensors(kDir + "moe_decoder_expected.safetensors");
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
  MoEConfig moe() const {
    MoEConfig m;
    m.experts = static_cast<std::int64_t>(meta_number(weights, "experts"));
    m.k = static_cast<std::int64_t>(meta_number(weights, "k"));
    m.ffn = static_cast<std::int64_t>(meta_number(weights, "ffn"));
    m.router = "topk";
    m.router_options = {{"gates", meta_string(weights, "gates")}};  // no aux loss, no capacity, no jitter
    return m;
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

// max |a - b| / max |b|: the error relative to the tensor's scale (as in tests/test_reference.cpp).
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

TEST_CASE("the MoE decoder's logits, loss and gradients agree with PyTorch's") {
  Fixture f;
  REQUIRE(f.moe().experts == 8);
  REQUIRE(f.moe().k == 2);
  Generator gen(0);
  Decoder model(f.config(), gen, moe_feed_forward(f.moe()));
  load_parameters(f.weights, model);  // strict: every parameter, under the same names and shapes
  const Tensor& tokens = f.expected.at("tokens");
  const Tensor& targets = f.expected.at("targets");

  Variable logits = model.forward(tokens);
  CHECK(max_abs_diff(logits.data(), f.expected.at("logits")) <= 1e-5);
  CHECK_FALSE(moe_aux_loss(model).defined());  // the reference has no aux loss
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
  // Per layer: 2 norms, q/k/v/o, router.weight, experts.w_in, experts.w_out; plus embed, norm, head.
  CHECK(checked == 21);
}

TEST_CASE("three AdamW steps of the MoE decoder give PyTorch's losses") {
  Fixture f;
  Generator gen(0);
  Decoder model(f.config(), gen, moe_feed_forward(f.moe()));
  load_parameters(f.weights, model);
  const Tensor& tokens = f.expected.at("tokens");
  const Tensor& targets = f.expected.at("targets");
  AdamOptions options;
  options.lr = meta_number(f.weights, "lr");
  options.eps = meta_number(f.weights, "eps");
  options.weight_decay = meta_number(f.weights, "weight_decay");
  REQUIRE(f.weights.metadata.at("betas") == "[0.9, 0.999]");
  options.beta1 = 0.9;
  options.beta2 = 0.999;
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
