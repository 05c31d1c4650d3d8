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
#include "reference_fixture.h"

using namespace moelab;

namespace {

using testing::kReferenceDir;
using testing::max_abs_diff;
using testing::max_rel_diff;

struct Fixture {
  SafetensorsFile weights = read_safetensors(kReferenceDir + "moe_decoder_weights.safetensors");
  SafetensorsFile expected = read_safetensors(kReferenceDir + "moe_decoder_expected.safetensors");
  DecoderConfig config() const { return testing::reference_decoder_config(weights); }
  MoEConfig moe() const {
    MoEConfig m;
    m.experts = static_cast<std::int64_t>(testing::meta_number(weights, "experts"));
    m.k = static_cast<std::int64_t>(testing::meta_number(weights, "k"));
    m.ffn = static_cast<std::int64_t>(testing::meta_number(weights, "ffn"));
    m.router = "topk";
    m.router_options = {{"gates", testing::meta_string(weights, "gates")}};  // no aux loss, no capacity, no jitter
    return m;
  }
};

}  // namespace

TEST_CASE("the MoE decoder's logits, loss and gradients agree with PyTorch's") {
  Fixture f;
  REQUIRE(f.moe().experts == 8);
  REQUIRE(f.moe().k == 2);
  Generator gen(0);
  Decoder model(f.config(), gen, moe_feed_forward(f.moe()));
  load_parameters(f.weights, model);  // strict: every parameter, under the same names and shapes
  // Per layer: 2 norms, q/k/v/o, router.weight, experts.w_in, experts.w_out; plus embed, norm, head.
  CHECK(testing::check_forward_and_gradients(model, f.expected) == 21);
  AuxLosses aux;
  model.forward(f.expected.at("tokens"), aux);
  CHECK(aux.terms.empty());  // the reference has no aux loss
}

TEST_CASE("three AdamW steps of the MoE decoder give PyTorch's losses") {
  Fixture f;
  Generator gen(0);
  Decoder model(f.config(), gen, moe_feed_forward(f.moe()));
  load_parameters(f.weights, model);
  testing::check_adamw_losses(model, f.weights, f.expected);
}
