// tests/reference_fixture.h — reading the PyTorch reference fixtures (tests/reference/*.safetensors,
// written by tests/reference/make_fixtures.py) and comparing tensors with them; shared by
// tests/test_reference.cpp (dense decoder) and tests/test_reference_moe.cpp (MoE decoder).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "nn/decoder.h"
#include "nn/decoder_config.h"
#include "nn/io/safetensors.h"
#include "nn/loss.h"
#include "nn/optim/adam.h"

namespace moelab::testing {

inline const std::string kReferenceDir = std::string(MOELAB_SOURCE_DIR) + "/tests/reference/";

// A number from a fixture's __metadata__ (written as JSON by the script).
inline double meta_number(const SafetensorsFile& file, const std::string& key) {
  return std::stod(file.metadata.at(key));
}

// A JSON string from the metadata ("\"softmax-topk-renorm\"") without its quotes.
inline std::string meta_string(const SafetensorsFile& file, const std::string& key) {
  const std::string& s = file.metadata.at(key);
  REQUIRE(s.size() >= 2);
  REQUIRE(s.front() == '"');
  REQUIRE(s.back() == '"');
  return s.substr(1, s.size() - 2);
}

// The decoder configuration the script wrote into the weights file's metadata.
inline DecoderConfig reference_decoder_config(const SafetensorsFile& weights) {
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

// Largest |a - b| over all elements (float32 tensors of one shape).
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, double(std::abs(x[i] - y[i])));
  return worst;
}

// max |a - b| / max |b|: the error relative to the tensor's scale. (Per element, a gradient entry
// that is a near-cancelling sum of float32 terms, 1e-9 against a tensor of 1e-2, has no relative
// accuracy in either engine, so an elementwise ratio would measure rounding, not correctness.)
inline double max_rel_diff(const Tensor& a, const Tensor& b) {
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

// max |a - b| / max |b| in float64 (for the float64 fixtures, e.g. expert_bank_expected).
inline double max_rel_diff64(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to(DType::Float64).to_vector<double>(), y = b.to(DType::Float64).to_vector<double>();
  double scale = 0, worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    scale = std::max(scale, std::abs(y[i]));
    worst = std::max(worst, std::abs(x[i] - y[i]));
  }
  REQUIRE(scale > 0);
  return worst / scale;
}

// The forward on the fixture's tokens: logits within 1e-5, the loss within 1e-5, every parameter's
// gradient within 1e-4 relative (max_rel_diff). Returns how many gradients were compared.
inline int check_forward_and_gradients(Decoder& model, const SafetensorsFile& expected) {
  const Tensor& tokens = expected.at("tokens");
  const Tensor& targets = expected.at("targets");
  Variable logits = model.forward(tokens);
  CHECK(max_abs_diff(logits.data(), expected.at("logits")) <= 1e-5);
  Variable loss = nn::cross_entropy(logits, targets);
  CHECK(std::abs(loss.data().item<float>() - expected.at("loss").item<float>()) <= 1e-5);
  model.zero_grad();
  loss.backward();
  int checked = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    INFO("parameter ", name);
    REQUIRE(p.grad().defined());
    CHECK(max_rel_diff(p.grad(), expected.at("grad." + name)) <= 1e-4);
    ++checked;
  }
  return checked;
}

// Three AdamW steps (lr, eps, weight decay and betas from the weights file's metadata) on the
// fixture's batch: the loss after each within 1e-5 of PyTorch's.
inline void check_adamw_losses(Decoder& model, const SafetensorsFile& weights, const SafetensorsFile& expected) {
  const Tensor& tokens = expected.at("tokens");
  const Tensor& targets = expected.at("targets");
  AdamOptions options;
  options.lr = meta_number(weights, "lr");
  options.eps = meta_number(weights, "eps");
  options.weight_decay = meta_number(weights, "weight_decay");
  REQUIRE(weights.metadata.at("betas") == "[0.9, 0.999]");
  options.beta1 = 0.9;
  options.beta2 = 0.999;
  AdamW opt(model.parameters(), options);
  const std::vector<float> want = expected.at("adamw_losses").to_vector<float>();
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

}  // namespace moelab::testing
