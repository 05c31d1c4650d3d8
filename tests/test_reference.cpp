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
  // Every parameter of the 2-layer decoder has a reference gradient.
  CHECK(testing::check_forward_and_gradients(model, f.expected) == 19);
}

TEST_CASE("three AdamW steps give PyTorch's losses") {
  Fixture f;
  Generator gen(0);
  Decoder model(f.config(), gen);
  load_parameters(f.weights, model);
  testing::check_adamw_losses(model, f.weights, f.expected);
}
