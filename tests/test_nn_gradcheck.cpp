// tests/test_nn_gradcheck.cpp — gradcheck of every nn module in float64, with respect to its
// inputs (where they are differentiable) and to every one of its parameters.
//
// autograd's gradcheck differentiates with respect to the Tensors it is given, which it turns
// into fresh leaves; a module's parameters are its own leaves. So:
//   inputs      gradcheck(f, {x}) with f calling the module on v[0];
//   parameters  check_parameters (tests/parameter_gradcheck.h): backward seeded with
//               a fixed random r gives d sum(f() * r) / d p for every parameter p; central
//               differences perturb each element of p's storage in place (p.data() is shared with
//               the module) and evaluate f without recording a graph.
// Inputs keep ReLU pre-activations away from 0 only statistically (random normals; a kink within
// the 1e-6 step is a ~1e-5 chance per element, and the seeds are fixed).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/nn.h"
#include "tests/module_gradcheck.h"

using namespace moelab;
using moelab::testing::check_input;
using moelab::testing::check_module;
using moelab::testing::check_parameters;
using V = std::vector<Variable>;

namespace {

Tensor randn(const Shape& shape, Generator& gen) { return normal(shape, 0.0, 1.0, gen, DType::Float64); }

// Overwrites a parameter's values in place (its storage is shared with the module).
void set_values(Variable p, const Tensor& values) { kernels::copy(p.data(), values); }

}  // namespace

TEST_CASE("the parameter check fails for a missing or a wrong parameter gradient") {
  Generator gen(9);
  Linear lin(3, 2, gen, true, DType::Float64);
  const Tensor x = randn({4, 3}, gen);
  std::int64_t checked = 0;
  // The bias is detached: no gradient reaches it.
  const std::string missing = check_parameters(
      lin, [&] { return matmul(Variable(x), lin.weight(), false, true) + lin.bias().detach(); }, checked);
  CHECK(missing.find("bias: no gradient") != std::string::npos);
  // w * detach(w): the analytic gradient misses half of the true one.
  const std::string wrong = check_parameters(lin, [&] { return lin.weight() * lin.weight().detach(); }, checked);
  CHECK(wrong.find("weight[") != std::string::npos);
}

TEST_CASE("Linear with and without bias: input and parameter gradients") {
  Generator gen(1);
  for (bool bias : {true, false}) {
    INFO("bias ", bias);
    Linear lin(4, 3, gen, bias, DType::Float64);
    const Tensor x = randn({2, 3, 4}, gen);
    check_input([&](const V& v) { return lin.forward(v[0]); }, x);
    check_module(lin, [&] { return lin.forward(Variable(x)); });
  }
}

TEST_CASE("Embedding: weight gradient with repeated ids") {
  Generator gen(2);
  Embedding emb(5, 3, gen, DType::Float64);
  const Tensor ids = from_vector(std::vector<std::int32_t>{4, 0, 4, 2, 1, 4}, {2, 3});
  check_module(emb, [&] { return emb.forward(ids); });
}

TEST_CASE("RMSNorm and LayerNorm: input and parameter gradients") {
  Generator gen(3);
  RMSNorm rms(5, 1e-5, DType::Float64);
  LayerNorm ln(5, 1e-5, DType::Float64);
  // Non-trivial weights and bias, so their gradients are not checked only at ones and zeros.
  set_values(rms.parameter("weight"), randn({5}, gen));
  set_values(ln.parameter("weight"), randn({5}, gen));
  set_values(ln.parameter("bias"), randn({5}, gen));
  const Tensor x = randn({2, 3, 5}, gen);
  check_input([&](const V& v) { return rms.forward(v[0]); }, x);
  check_input([&](const V& v) { return ln.forward(v[0]); }, x);
  check_module(rms, [&] { return rms.forward(Variable(x)); });
  check_module(ln, [&] { return ln.forward(Variable(x)); });
}

TEST_CASE("MLP with and without bias, ReLU, GELU or SwiGLU: input and parameter gradients") {
  Generator gen(4);
  for (const auto& [act, bias] : std::vector<std::pair<Activation, bool>>{{Activation::Relu, false},
                                                                          {Activation::Relu, true},
                                                                          {Activation::Gelu, false},
                                                                          {Activation::Gelu, true},
                                                                          {Activation::Swiglu, false},
                                                                          {Activation::Swiglu, true}}) {
    INFO("bias ", bias, ", ", activation_name(act));
    MLP mlp(4, 6, gen, bias, DType::Float64, act);
    const Tensor x = randn({3, 4}, gen);
    check_input([&](const V& v) { return mlp.forward(v[0]); }, x);
    check_module(mlp, [&] { return mlp.forward(Variable(x)); });
  }
}

TEST_CASE("Attention: input and parameter gradients, with and without a position offset") {
  Generator gen(5);
  Attention attn(8, 2, gen, 10000.0, DType::Float64);
  const Tensor x = randn({2, 4, 8}, gen);
  check_input([&](const V& v) { return attn.forward(v[0]); }, x);
  check_input([&](const V& v) { return attn.forward(v[0], 3); }, x);
  check_module(attn, [&] { return attn.forward(Variable(x)); });
  // Through a cache: the new positions' gradient with the earlier ones fixed.
  const Tensor prefix = randn({2, 3, 8}, gen), next = randn({2, 2, 8}, gen);
  check_input(
      [&](const V& v) {
        LayerKV cache;
        attn.forward(Variable(prefix), 0, &cache);
        return attn.forward(v[0], 3, &cache);
      },
      next);
}

TEST_CASE("a 2-layer tiny Decoder: every parameter's gradient, of the logits and of the loss") {
  Generator gen(6);
  DecoderConfig c;
  c.vocab = 5;
  c.d = 8;
  c.layers = 2;
  c.heads = 2;
  c.dtype = DType::Float64;
  Decoder model(c, gen);
  // Perturb the norm weights away from ones so their gradients are exercised in general position.
  for (auto& [name, p] : model.named_parameters())
    if (name.find("norm") != std::string::npos) set_values(p, uniform({c.d}, 0.5, 1.5, gen, DType::Float64));
  const Tensor ids = from_vector(std::vector<std::int32_t>{0, 3, 4, 1, 2, 2, 0, 4}, {2, 4});
  const Tensor targets = from_vector(std::vector<std::int32_t>{3, 4, 1, -100, 2, 0, 4, 1}, {2, 4});
  check_module(model, [&] { return model.forward(ids); });
  check_module(model, [&] { return nn::cross_entropy(model.forward(ids), targets); });
}
