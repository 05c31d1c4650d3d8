// tests/test_vit.cpp — the vision transformer (nn/vit/): the patch embedding against patches cut
// by hand, gradchecks of every part and of whole dense and Soft MoE ViTs (float64), refusals, the
// encoder's attention being unmasked (token order does not matter to it), and Algorithm 1 across
// the Soft MoE blocks. tests/test_vit_reference.cpp checks the whole model against PyTorch.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/no_grad.h"
#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/vit/vit.h"
#include "tests/module_gradcheck.h"

using namespace moelab;
using moelab::testing::check_input;
using moelab::testing::check_module;
using moelab::testing::check_parameters;
using V = std::vector<Variable>;

namespace {

Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::Float64) {
  return normal(shape, 0.0, 1.0, gen, dtype);
}

// A small ViT: 2 channels of 4x6 images in 2x2 patches (6 tokens), d 8, 2 heads, 2 blocks.
VitConfig tiny_config(VitPooling pool, bool moe) {
  VitConfig c;
  c.channels = 2;
  c.height = 4;
  c.width = 6;
  c.patch = 2;
  c.dim = 8;
  c.heads = 2;
  c.depth = 2;
  c.mlp_hidden = 12;
  c.classes = 3;
  c.pool = pool;
  c.dtype = DType::Float64;
  if (moe) {
    c.moe_blocks = last_half_blocks(c.depth);
    c.experts = 3;
    c.slots_per_expert = 2;
  }
  return c;
}

}  // namespace

TEST_CASE("the patch embedding is the Linear of each patch's values, channel, row, column") {
  Generator gen(1);
  PatchEmbedding embed(2, 4, 6, 2, 5, gen, DType::Float64);
  CHECK(embed.patches() == 6);
  CHECK(embed.patch_values() == 8);
  const Tensor images = randn({3, 2, 4, 6}, gen);
  const std::vector<double> got = embed.forward(Variable(images)).data().to_vector<double>();
  const std::vector<double> x = images.to_vector<double>(), w = embed.proj().weight().data().to_vector<double>(),
                            b = embed.proj().bias().data().to_vector<double>();
  REQUIRE(got.size() == 3u * 6 * 5);
  double worst = 0;
  for (int n = 0; n < 3; ++n)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int o = 0; o < 5; ++o) {
          double want = b[o];
          int v = 0;  // the patch's values in channel, row, column order
          for (int ch = 0; ch < 2; ++ch)
            for (int r = 0; r < 2; ++r)
              for (int col = 0; col < 2; ++col, ++v)
                want += w[o * 8 + v] * x[((n * 2 + ch) * 4 + i * 2 + r) * 6 + j * 2 + col];
          worst = std::max(worst, std::abs(got[(n * 6 + i * 3 + j) * 5 + o] - want));
        }
  CHECK(worst < 1e-12);
}

TEST_CASE("patch embedding and encoder attention: input and parameter gradients") {
  Generator gen(2);
  PatchEmbedding embed(2, 4, 6, 2, 5, gen, DType::Float64);
  const Tensor images = randn({2, 2, 4, 6}, gen);
  check_input([&](const V& v) { return embed.forward(v[0]); }, images);
  check_module(embed, [&] { return embed.forward(Variable(images)); });

  EncoderAttention attn(8, 2, gen, DType::Float64);
  const Tensor x = randn({2, 5, 8}, gen);
  check_input([&](const V& v) { return attn.forward(v[0]); }, x);
  check_module(attn, [&] { return attn.forward(Variable(x)); });
}

TEST_CASE("the encoder's attention has no mask: permuting the tokens permutes its output") {
  Generator gen(3);
  EncoderAttention attn(8, 2, gen, DType::Float64);
  const Tensor x = randn({1, 4, 8}, gen);
  const std::vector<std::int64_t> order = {3, 1, 0, 2};
  std::vector<double> xv = x.to_vector<double>(), permuted(xv.size());
  for (int t = 0; t < 4; ++t)
    std::copy(xv.begin() + order[t] * 8, xv.begin() + order[t] * 8 + 8, permuted.begin() + t * 8);
  const std::vector<double> y = attn.forward(Variable(x)).data().to_vector<double>();
  const std::vector<double> yp =
      attn.forward(Variable(from_vector(permuted, {1, 4, 8}))).data().to_vector<double>();
  double worst = 0;
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 8; ++i) worst = std::max(worst, std::abs(yp[t * 8 + i] - y[order[t] * 8 + i]));
  CHECK(worst < 1e-12);
  // The first token does see the later ones (a causal layer would give it the same output).
  std::vector<double> changed = xv;
  changed[3 * 8] += 1.0;
  const std::vector<double> yc =
      attn.forward(Variable(from_vector(changed, {1, 4, 8}))).data().to_vector<double>();
  CHECK(std::abs(yc[0] - y[0]) > 1e-6);
}

TEST_CASE("dense and Soft MoE encoder blocks: input and parameter gradients") {
  Generator gen(4);
  EncoderBlock dense(8, 2, 12, 1e-6, gen, DType::Float64);
  SoftMoEConfig mc;
  mc.d = 8;
  mc.experts = 3;
  mc.slots_per_expert = 2;
  mc.hidden = 4;
  mc.dtype = DType::Float64;
  EncoderBlock moe(8, 2, mc, 1e-6, gen);
  EncoderBlock bare(8, 2, mc, 1e-6, gen, /*moe_residual=*/false);
  CHECK_FALSE(dense.is_moe());
  CHECK(moe.is_moe());
  CHECK_THROWS_WITH(dense.moe(), doctest::Contains("dense"));
  {  // Without the residual the block's output lacks h = x + attn(attn_norm(x)): built from the same
     // seed, the two blocks differ by exactly h (the norms are at their initial ones and zeros).
    Generator g1(9), g2(9);
    EncoderBlock with(8, 2, mc, 1e-6, g1, true), without(8, 2, mc, 1e-6, g2, false);
    const Tensor x0 = randn({2, 5, 8}, gen);
    LayerNorm fresh(8, 1e-6, DType::Float64);
    const std::vector<double> h =
        (Variable(x0) + with.attn().forward(fresh.forward(Variable(x0)))).data().to_vector<double>();
    const std::vector<double> a = with.forward(Variable(x0)).data().to_vector<double>(),
                              b = without.forward(Variable(x0)).data().to_vector<double>();
    double worst = 0;
    for (std::size_t i = 0; i < h.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i] - h[i]));
    CHECK(worst < 1e-12);
  }
  const Tensor x = randn({2, 5, 8}, gen);
  for (EncoderBlock* b : {&dense, &moe, &bare}) {
    check_input([&](const V& v) { return b->forward(v[0]); }, x);
    check_module(*b, [&] { return b->forward(Variable(x)); });
  }
}

TEST_CASE("whole ViTs, mean or class-token pooling, dense or Soft MoE: every parameter's gradient") {
  for (VitPooling pool : {VitPooling::Mean, VitPooling::Cls})
    for (bool moe : {false, true}) {
      INFO("pool ", pool == VitPooling::Mean ? "mean" : "cls", ", moe ", moe);
      Generator gen(5);
      Vit vit(tiny_config(pool, moe), gen);
      CHECK(vit.moe_layers().size() == (moe ? 1u : 0u));
      const Tensor images = randn({2, 2, 4, 6}, gen);
      Variable logits = vit.forward(Variable(images));
      CHECK(logits.shape() == Shape{2, 3});
      check_input([&](const V& v) { return vit.forward(v[0]); }, images);
      check_module(vit, [&] { return vit.forward(Variable(images)); });
    }
  // The ViT's own activation in the dense blocks (the PyTorch fixture uses it too).
  VitConfig c = tiny_config(VitPooling::Mean, true);
  c.mlp_activation = Activation::Gelu;
  Generator gen(6);
  Vit vit(c, gen);
  const Tensor images = randn({2, 2, 4, 6}, gen);
  check_module(vit, [&] { return vit.forward(Variable(images)); });
  CHECK_THROWS_WITH(parse_activation("swish"), doctest::Contains("relu, gelu or swiglu"));
}

TEST_CASE("ViT parameters: names, the class token only with cls pooling, constant expert parameters") {
  Generator gen(6);
  Vit cls(tiny_config(VitPooling::Cls, true), gen);
  std::vector<std::string> names;
  for (auto& [name, p] : cls.named_parameters()) names.push_back(name);
  // A module's own parameters come before its children's (nn/module.h).
  REQUIRE(names.size() > 3);
  CHECK(names[0] == "cls");
  CHECK(names[1] == "pos");
  CHECK(names[2] == "patch.proj.weight");
  CHECK(std::find(names.begin(), names.end(), "layers.0.mlp.up.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "layers.1.moe.phi") != names.end());
  CHECK(names.back() == "head.bias");
  Vit mean(tiny_config(VitPooling::Mean, false), gen);
  for (auto& [name, p] : mean.named_parameters()) CHECK(name != "cls");
  // n experts of floor(f / n) each hold the dense MLP's weights (without its biases) when n divides f.
  for (std::int64_t n : {1, 2, 3, 4, 6, 12}) {
    VitConfig c = tiny_config(VitPooling::Mean, true);
    c.experts = n;
    c.slots_per_expert = 1;
    Vit v(c, gen);
    CHECK(v.moe_layers()[0]->experts().num_parameters() == 2 * c.dim * c.mlp_hidden);
  }
}

TEST_CASE("ViT configurations are refused with the field named") {
  Generator gen(7);
  auto refused = [&](const std::function<void(VitConfig&)>& edit, const char* words) {
    VitConfig c = tiny_config(VitPooling::Mean, true);
    edit(c);
    CHECK_THROWS_WITH(Vit(c, gen), doctest::Contains(words));
  };
  refused([](VitConfig& c) { c.patch = 4; }, "divide");
  refused([](VitConfig& c) { c.heads = 3; }, "multiple of heads");
  refused([](VitConfig& c) { c.moe_blocks = {2}; }, "is not a block");
  refused([](VitConfig& c) { c.moe_blocks = {1, 0}; }, "ascending");
  refused([](VitConfig& c) { c.experts = 13; }, "hidden width");
  refused([](VitConfig& c) { c.classes = 0; }, "classes");
  CHECK_THROWS_WITH(parse_vit_pooling("max"), doctest::Contains("mean or cls"));
  Vit vit(tiny_config(VitPooling::Mean, false), gen);
  CHECK_THROWS_WITH(vit.forward(Variable(randn({2, 2, 6, 4}, gen))), doctest::Contains("images must be"));
}

TEST_CASE("Algorithm 1 across Soft MoE blocks: every block keeps k experts per image, all n is the full model") {
  VitConfig c = tiny_config(VitPooling::Mean, true);
  c.depth = 3;
  c.moe_blocks = {1, 2};
  c.experts = 4;
  c.dtype = DType::Float32;
  Generator gen(8);
  Vit vit(c, gen);
  REQUIRE(vit.moe_layers().size() == 2u);
  const Tensor images = randn({5, 2, 4, 6}, gen, DType::Float32);
  NoGradGuard no_grad;
  const std::vector<float> full = vit.forward(Variable(images)).data().to_vector<float>();
  CHECK(vit.forward(Variable(images), ExpertSubset::top_k(4)).data().to_vector<float>() == full);
  const std::vector<float> top2 = vit.forward(Variable(images), ExpertSubset::top_k(2)).data().to_vector<float>();
  CHECK(top2 != full);
  std::vector<std::vector<std::int32_t>> masks;
  for (SoftMoE* layer : vit.moe_layers()) {
    const std::vector<std::int32_t> m = layer->last_mask().to_vector<std::int32_t>();
    REQUIRE(m.size() == 5u * 4);
    for (int b = 0; b < 5; ++b) CHECK(std::count(m.begin() + b * 4, m.begin() + b * 4 + 4, 1) == 2);
    masks.push_back(m);
  }
  // Random subsets: the same seed draws the same experts in every block; another seed other ones.
  Generator a(11), b(11), other(12);
  const std::vector<float> ra = vit.forward(Variable(images), ExpertSubset::random(2, a)).data().to_vector<float>();
  const std::vector<float> rb = vit.forward(Variable(images), ExpertSubset::random(2, b)).data().to_vector<float>();
  const std::vector<float> ro =
      vit.forward(Variable(images), ExpertSubset::random(2, other)).data().to_vector<float>();
  CHECK(ra == rb);
  CHECK(ra != ro);
}
