// tests/test_cuda_reference.cpp — the PyTorch reference fixtures (tests/test_reference.cpp,
// tests/test_reference_moe.cpp, tests/test_vit_reference.cpp, tests/test_expert_activation.cpp)
// with the model on the GPU.
//
// The same dense and MoE decoders load the same PyTorch weights on the host, move to
// Device::cuda(), and must meet the CPU tests' tolerances (tests/reference_fixture.h): logits and
// loss within 1e-5, every gradient within 1e-4 relative, the losses after three AdamW steps
// within 1e-5. The batch (tokens, targets) moves to the GPU too; results are read back to compare.
//
// Moving a model needs Module::to(Device) (every parameter's storage, seen by every handle to it,
// moved to the device). Until nn/module.h has it, these cases fail on a GPU machine and say so;
// without a GPU the executable is skipped (exit 77, tests/cuda_test_main.cpp).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/backend.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/decoder.h"
#include "nn/io/checkpoint.h"
#include "nn/io/safetensors.h"
#include "nn/moe/expert_bank.h"
#include "nn/moe/moe_decoder.h"
#include "reference_fixture.h"
#include "vit_reference.h"

using namespace moelab;

namespace {

using testing::kReferenceDir;

// Moves the model to the GPU; true when this build's nn/ can. (A template, so that the call is
// only compiled when Module::to exists.)
template <class M>
bool move_to_cuda(M& model) {
  if constexpr (requires { model.to(Device::cuda()); }) {
    model.to(Device::cuda());
    for (const auto& [name, p] : model.named_parameters()) {
      INFO("parameter ", name);
      REQUIRE(p.device().is_cuda());
    }
    return true;
  } else {
    FAIL_CHECK("models cannot be moved to CUDA: nn/module.h has no Module::to(Device) yet");
    return false;
  }
}

// The fixture's expected values with the batch (tokens, targets) on the GPU.
SafetensorsFile batch_on_cuda(SafetensorsFile file) {
  for (auto& [name, tensor] : file.tensors)
    if (name == "tokens" || name == "targets") tensor = tensor.to(Device::cuda());
  return file;
}

MoEConfig reference_moe(const SafetensorsFile& weights) {
  MoEConfig m;
  m.experts = static_cast<std::int64_t>(testing::meta_number(weights, "experts"));
  m.k = static_cast<std::int64_t>(testing::meta_number(weights, "k"));
  m.ffn = static_cast<std::int64_t>(testing::meta_number(weights, "ffn"));
  m.router = "topk";
  m.router_options = {{"gates", testing::meta_string(weights, "gates")}};
  return m;
}

}  // namespace

TEST_CASE("cuda: the decoder's logits, loss, gradients and AdamW losses agree with PyTorch's") {
  const SafetensorsFile weights = read_safetensors(kReferenceDir + "decoder_weights.safetensors");
  const SafetensorsFile expected = batch_on_cuda(read_safetensors(kReferenceDir + "decoder_expected.safetensors"));
  const DecoderConfig config = testing::reference_decoder_config(weights);
  {
    Generator gen(0);
    Decoder model(config, gen);
    load_parameters(weights, model);
    if (move_to_cuda(model)) CHECK(testing::check_forward_and_gradients(model, expected) == 19);
  }
  {
    Generator gen(0);
    Decoder model(config, gen);
    load_parameters(weights, model);
    if (move_to_cuda(model)) testing::check_adamw_losses(model, weights, expected);
  }
}

TEST_CASE("cuda: the MoE decoder's logits, loss, gradients and AdamW losses agree with PyTorch's") {
  const SafetensorsFile weights = read_safetensors(kReferenceDir + "moe_decoder_weights.safetensors");
  const SafetensorsFile expected =
      batch_on_cuda(read_safetensors(kReferenceDir + "moe_decoder_expected.safetensors"));
  const DecoderConfig config = testing::reference_decoder_config(weights);
  {
    Generator gen(0);
    Decoder model(config, gen, moe_feed_forward(reference_moe(weights)));
    load_parameters(weights, model);
    if (move_to_cuda(model)) CHECK(testing::check_forward_and_gradients(model, expected) == 21);
  }
  {
    Generator gen(0);
    Decoder model(config, gen, moe_feed_forward(reference_moe(weights)));
    load_parameters(weights, model);
    if (move_to_cuda(model)) testing::check_adamw_losses(model, weights, expected);
  }
}

TEST_CASE("cuda: a router's random stream stays on the host; jitter on the GPU draws the CPU's noise") {
  // topk with jitter on both devices: the "jitter_state" host buffer is not moved by to(), and one
  // training step advances it alike (fill_uniform draws the same numbers on both: cuda parity).
  MoEConfig moe{.experts = 4, .k = 2, .router_options = {{"jitter", "0.1"}}};
  DecoderConfig config{.vocab = 16, .d = 8, .layers = 1, .heads = 2, .ffn = 16, .max_seq = 8};
  Generator g_cpu(3), g_gpu(3);
  Decoder cpu(config, g_cpu, moe_feed_forward(moe)), gpu(config, g_gpu, moe_feed_forward(moe));
  gpu.to(Device::cuda());
  std::vector<std::int32_t> ids(16);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7) % 16);
  const Tensor x = from_vector(ids, {2, 8});
  AuxLosses aux_cpu, aux_gpu;
  cpu.forward(x, aux_cpu);
  gpu.forward(x.to(Device::cuda()), aux_gpu);
  for (const Decoder* m : {&cpu, &gpu})
    for (const auto& [name, b] : m->named_buffers())
      if (name.find("jitter_state") != std::string::npos) {
        INFO(name);
        CHECK(b.device().is_cpu());
      }
  std::vector<std::vector<std::int32_t>> states;
  for (const Decoder* m : {&cpu, &gpu})
    for (const auto& [name, b] : m->named_buffers())
      if (name.find("jitter_state") != std::string::npos) states.push_back(b.to_vector<std::int32_t>());
  REQUIRE(states.size() == 2);
  CHECK(states[0] == states[1]);
  CHECK(states[0][2] != 0);  // the counter moved: noise was drawn
}

TEST_CASE("cuda: the ViT with a Soft MoE block agrees with PyTorch's, Algorithm 1 included") {
  const SafetensorsFile weights = read_safetensors(kReferenceDir + "vit_weights.safetensors");
  const SafetensorsFile expected = read_safetensors(kReferenceDir + "vit_expected.safetensors");
  Generator gen(0);
  Vit model(testing::vit_fixture_config(weights), gen);
  load_parameters(weights, model);
  if (move_to_cuda(model)) CHECK(testing::check_vit_against_fixture(model, weights, expected, Device::cuda()) == 40);
}

TEST_CASE("cuda: relu, gelu and swiglu experts agree with PyTorch's per-expert Linears (float64)") {
  // tests/test_expert_activation.cpp's fixture with the bank, the rows and the offsets on the GPU.
  const SafetensorsFile f = read_safetensors(kReferenceDir + "expert_bank_expected.safetensors");
  const Tensor offsets = f.at("offsets").to(Device::cuda());
  for (const char* act : {"relu", "gelu", "swiglu"})
    for (bool bias : {false, true}) {
      const std::string key = std::string(act) + "_bias" + (bias ? "1" : "0") + ".";
      INFO(key);
      Generator gen(0);
      ExpertBank bank(3, 5, 4, gen, bias, DType::Float64, parse_activation(act));
      for (const auto& [name, p] : bank.named_parameters()) {
        Variable param = p;  // a handle: copying into its data sets the bank's parameter
        kernels::copy(param.data(), f.at(key + name));
      }
      if (!move_to_cuda(bank)) return;
      Variable x(f.at("x").to(Device::cuda()), /*requires_grad=*/true);
      const Variable y = bank.forward(x, offsets);
      y.backward(f.at("r").to(Device::cuda()));
      CHECK(testing::max_rel_diff64(y.data().to(Device::cpu()), f.at(key + "y")) <= 1e-12);
      CHECK(testing::max_rel_diff64(x.grad().to(Device::cpu()), f.at(key + "grad.x")) <= 1e-12);
      for (const auto& [name, p] : bank.named_parameters()) {
        INFO("parameter ", name);
        CHECK(testing::max_rel_diff64(p.grad().to(Device::cpu()), f.at(key + "grad." + name)) <= 1e-12);
      }
    }
}
