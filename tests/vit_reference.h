// tests/vit_reference.h — the ViT fixture of tests/reference/make_vit_fixture.py (PyTorch) and the
// check against it, shared by tests/test_vit_reference.cpp (CPU) and tests/test_cuda_reference.cpp
// (the model and the images on the GPU): logits and loss within 1e-5, every gradient within 1e-4
// relative to its tensor's scale, Algorithm 1's logits within 1e-5 and its kept experts exactly.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "autograd/no_grad.h"
#include "core/factories.h"
#include "nn/io/safetensors.h"
#include "nn/loss.h"
#include "nn/vit/vit.h"
#include "reference_fixture.h"

namespace moelab::testing {

inline std::int64_t meta_int(const SafetensorsFile& f, const std::string& key) {
  return static_cast<std::int64_t>(meta_number(f, key));
}

// The model configuration the script wrote into the weights file's metadata.
inline VitConfig vit_fixture_config(const SafetensorsFile& w) {
  VitConfig c;
  c.channels = meta_int(w, "channels");
  c.height = meta_int(w, "height");
  c.width = meta_int(w, "width");
  c.patch = meta_int(w, "patch");
  c.dim = meta_int(w, "dim");
  c.heads = meta_int(w, "heads");
  c.depth = meta_int(w, "depth");
  c.mlp_hidden = meta_int(w, "mlp_hidden");
  c.mlp_activation = parse_activation(meta_string(w, "mlp_activation"));
  c.classes = meta_int(w, "classes");
  c.pool = parse_vit_pooling(meta_string(w, "pool"));
  REQUIRE(w.metadata.at("moe_blocks") == "[1]");
  c.moe_blocks = {1};
  c.experts = meta_int(w, "experts");
  c.slots_per_expert = meta_int(w, "slots_per_expert");
  c.expert_hidden = meta_int(w, "expert_hidden");
  c.norm_eps = meta_number(w, "norm_eps");
  return c;
}

// The loaded model (on `device`) against the fixture; returns how many gradients were compared.
inline int check_vit_against_fixture(Vit& model, const SafetensorsFile& weights, const SafetensorsFile& expected,
                                     Device device) {
  const Tensor images = expected.at("images").to(device);
  Variable logits = model.forward(Variable(images));
  CHECK(max_abs_diff(logits.data().to(Device::cpu()), expected.at("logits")) <= 1e-5);
  Variable loss = nn::cross_entropy(logits, expected.at("labels").to(device));
  CHECK(std::abs(loss.data().to(Device::cpu()).item<float>() - expected.at("loss").item<float>()) <= 1e-5);
  model.zero_grad();
  loss.backward();
  int checked = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    INFO("parameter ", name);
    REQUIRE(p.grad().defined());
    const Tensor got = p.grad().to(Device::cpu());
    const Tensor& want = expected.at("grad." + name);
    if (name.size() > 11 && name.compare(name.size() - 11, 11, "attn.k.bias") == 0) {
      // The key bias adds q . b_k to every score of a query alike, which the softmax cancels: its
      // true gradient is 0, so both engines hold rounding noise and only its size can be compared.
      CHECK(max_abs_diff(got, zeros(want.shape())) <= 1e-6);
      CHECK(max_abs_diff(want, zeros(want.shape())) <= 1e-6);
    } else {
      CHECK(max_rel_diff(got, want) <= 1e-4);
    }
    ++checked;
  }
  const std::int64_t k = meta_int(weights, "top_k");
  NoGradGuard no_grad;
  Variable top = model.forward(Variable(images), ExpertSubset::top_k(k));
  CHECK(max_abs_diff(top.data().to(Device::cpu()), expected.at("logits_top" + std::to_string(k))) <= 1e-5);
  CHECK(model.moe_layers()[0]->last_mask().to(Device::cpu()).to_vector<std::int32_t>() ==
        expected.at("kept_top" + std::to_string(k)).to_vector<std::int32_t>());
  return checked;
}

}  // namespace moelab::testing
