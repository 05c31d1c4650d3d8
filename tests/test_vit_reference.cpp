// tests/test_vit_reference.cpp — moelab's ViT with a Soft MoE block against PyTorch.
//
// tests/reference/make_vit_fixture.py builds the same model from PyTorch's own Conv2d,
// MultiheadAttention, LayerNorm and GELU (and a Soft MoE layer written from the paper), and commits its
// weights, a batch of images, the logits, the loss, every parameter's gradient, and the logits
// and kept experts of Algorithm 1 with k = 2 in the Soft MoE block. moelab loads the weights and
// must agree (tolerances in tests/vit_reference.h); tests/test_cuda_reference.cpp does the same on
// the GPU.
#include <doctest/doctest.h>

#include "nn/io/checkpoint.h"
#include "vit_reference.h"

using namespace moelab;

TEST_CASE("the ViT's logits, loss, gradients and Algorithm 1 subset agree with PyTorch's") {
  const SafetensorsFile weights = read_safetensors(testing::kReferenceDir + "vit_weights.safetensors");
  const SafetensorsFile expected = read_safetensors(testing::kReferenceDir + "vit_expected.safetensors");
  Generator gen(0);
  Vit model(testing::vit_fixture_config(weights), gen);
  load_parameters(weights, model);  // strict: every parameter named, no extra ones
  CHECK(testing::check_vit_against_fixture(model, weights, expected, Device::cpu()) == 40);
}
