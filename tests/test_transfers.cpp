// tests/test_transfers.cpp — the hot path never waits on the host (README): a decoder's training
// step (forward, cross-entropy, aux losses, backward, clip_grad_norm, AdamW) reads back exactly one
// value from the device, the loss, and uploads only its batch — for the dense decoder and for
// every MoE feed-forward: top-k with 8 and 64 experts (and with aux losses, a capacity that drops,
// jitter and biases), expert choice, top-p, aux-free balancing (its bias update included), shared
// experts, and Soft MoE; the balanced router reads back once per layer, as documented.
//
// The steps run on Device::cuda() with tests/counting_backend.h standing in for the CUDA backend,
// so every device->host read and host->device upload that a GPU run would make is counted, on a
// machine without a GPU (the header explains why counting on Device::cpu() cannot work).
// The rule asserted, per step (every step, the first included):
//   reads   == 1, of one float32 (4 bytes): the loss, read by the training loop to log it and to
//              check that the total loss, aux losses included, is finite (train_loop.h);
//   uploads == 2, of exactly the batch's bytes: the inputs and the targets, each uploaded once.
// What makes it hold for MoE: routing's counting sort (kernels::group_by_expert), the grouped
// products reading their offsets where they live, router metrics computed only when asked, aux
// losses returned by the forward (AuxLosses), constants made on the device (full, arange).
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/backend.h"
#include "core/factories.h"
#include "nn/moe/moe_decoder.h"
#include "nn/moe/router.h"
#include "nn/moe/soft_moe.h"
#include "nn/nn.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip.h"
#include "nn/train_loop.h"
#include "tests/counting_backend.h"

using namespace moelab;
using moelab::testing::CountingBackend;

namespace {

constexpr std::int64_t kBatch = 2, kSeq = 8;

DecoderConfig small_config() {
  DecoderConfig c;
  c.vocab = 32;
  c.d = 32;
  c.layers = 2;
  c.heads = 4;
  c.max_seq = 16;
  return c;
}

Tensor random_ids(std::int32_t vocab, Generator& gen) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(kBatch * kSeq));
  for (auto& id : v) id = static_cast<std::int32_t>(gen.next_below(static_cast<std::uint32_t>(vocab)));
  return from_vector(v, {kBatch, kSeq});
}

// Soft MoE as a decoder FFN (x: [B, T, d] -> [B, T, d], the T tokens of a sequence mixed into
// slots), only to measure its transfers.
class SoftMoEFeedForward : public FeedForward {
 public:
  SoftMoEFeedForward(const SoftMoEConfig& config, Generator& gen) {
    moe_ = register_module("moe", std::make_shared<SoftMoE>(config, gen));
  }
  Variable forward(const Variable& x) override { return moe_->forward(x); }

 private:
  std::shared_ptr<SoftMoE> moe_;
};

struct StepCounts {
  std::int64_t reads = 0, read_bytes = 0, uploads = 0, upload_bytes = 0;
};

// Builds the decoder on the counting "GPU" and trains it `steps` steps with the one training loop
// (nn/train_loop.h, with clipping, as the experiments train); returns the counts of each
// step, taken between consecutive on_step calls (the host-side batch making is not counted: it
// makes no transfer, only the two uploads are).
std::vector<StepCounts> train_steps(CountingBackend& counting, const FeedForwardFactory& make_ffn, int steps) {
  const Device device = Device::cuda();
  Generator gen(11), data_gen(12);
  const DecoderConfig c = small_config();
  Decoder model(c, gen, make_ffn);
  model.to(device);
  AdamW opt(model.parameters(), AdamOptions{});
  std::vector<StepCounts> counts;
  LoopHooks hooks;
  hooks.batch_loss = [&](std::int64_t) {
    const Tensor inputs = random_ids(static_cast<std::int32_t>(c.vocab), data_gen);
    const Tensor targets = random_ids(static_cast<std::int32_t>(c.vocab), data_gen);
    StepLoss s;
    s.loss = nn::cross_entropy(model.forward(inputs.to(device), s.aux), targets.to(device));
    return s;
  };
  hooks.on_step = [&](const LoopState&, double value) {
    CHECK(value > 0.0);
    counts.push_back({counting.reads(), counting.read_bytes(), counting.uploads(), counting.upload_bytes()});
    counting.reset();
  };
  counting.reset();
  train_loop(model, opt, LoopOptions{.steps = steps, .clip = 1.0}, hooks);
  return counts;
}

std::string describe(const StepCounts& s) {
  return std::to_string(s.reads) + " reads (" + std::to_string(s.read_bytes) + " B), " + std::to_string(s.uploads) +
         " uploads (" + std::to_string(s.upload_bytes) + " B)";
}


// The per-step rule: one read of the 4-byte loss, the batch's two uploads, nothing else; plus
// `extra_reads` and `extra_uploads` per MoE layer for a router documented to make them.
void check_one_read_per_step(const std::string& label, const FeedForwardFactory& make_ffn, int extra_reads = 0,
                             int extra_uploads = 0) {
  CountingBackend counting(cpu_backend());
  ScopedBackendOverride stand_in(DeviceType::CUDA, counting);
  const std::vector<StepCounts> counts = train_steps(counting, make_ffn, 3);
  const std::int64_t batch_bytes = 2 * kBatch * kSeq * static_cast<std::int64_t>(sizeof(std::int32_t));
  for (std::size_t i = 0; i < counts.size(); ++i) {
    INFO(label, ", step ", i, ": ", describe(counts[i]));
    const std::int64_t layers = small_config().layers;
    CHECK(counts[i].reads == 1 + extra_reads * layers);
    if (extra_reads == 0) CHECK(counts[i].read_bytes == static_cast<std::int64_t>(sizeof(float)));
    CHECK(counts[i].uploads == 2 + extra_uploads * layers);
    if (extra_uploads == 0) CHECK(counts[i].upload_bytes == batch_bytes);
  }
  MESSAGE(label, ", per step: ", describe(counts.back()), " (", small_config().layers, " layers)");
}

MoEConfig moe_config(std::int64_t experts, std::int64_t k, const std::string& router = "topk") {
  MoEConfig m;
  m.experts = experts;
  m.k = k;
  m.router = router;
  return m;
}

}  // namespace

TEST_CASE("a dense decoder training step reads back only the loss and uploads only its batch") {
  check_one_read_per_step("dense decoder", dense_feed_forward());
}

TEST_CASE("MoE decoder training steps read back only the loss: routing, sorting and offsets stay on the device") {
  for (std::int64_t experts : {8, 64})
    check_one_read_per_step("top-k MoE, " + std::to_string(experts) + " experts, k 2", moe_feed_forward(moe_config(experts, 2)));
  // Everything a top-k router can add: both aux losses, a capacity that drops, jitter noise, biases.
  MoEConfig full = moe_config(8, 2);
  full.router_options = {{"load_balance", "0.01"}, {"z_loss", "0.001"}, {"capacity_factor", "0.5"},
                         {"jitter", "0.1"}, {"bias", "true"}};
  full.bias = true;
  check_one_read_per_step("top-k MoE, 8 experts, k 2, aux losses, capacity 0.5, jitter, biases",
                          moe_feed_forward(full));
  check_one_read_per_step("expert-choice MoE, 8 experts, k 2", moe_feed_forward(moe_config(8, 2, "expert-choice")));
  MoEConfig top_p = moe_config(8, 4, "top-p");
  top_p.router_options = {{"entropy_loss", "1e-4"}, {"load_balance", "0.01"}};
  check_one_read_per_step("top-p MoE, 8 experts, at most 4", moe_feed_forward(top_p));
  check_one_read_per_step("aux-free MoE, 8 experts, k 2 (bias updated each step)",
                          moe_feed_forward(moe_config(8, 2, "aux-free")));
  MoEConfig shared = moe_config(16, 4);
  shared.shared_experts = 1;
  check_one_read_per_step("DeepSeekMoE: 16 fine-grained experts, k 4, 1 shared", moe_feed_forward(shared));
  // The balanced router's greedy assignment runs on the host (its header says so): one read of
  // the affinities and one upload of the assignment per MoE layer, nothing more.
  check_one_read_per_step("balanced MoE, 8 experts, k 1", moe_feed_forward(moe_config(8, 1, "balanced")), 1, 1);
  check_one_read_per_step("Soft MoE, 8 experts, 1 slot each", [](const DecoderConfig& c, std::int64_t, Generator& gen) {
    SoftMoEConfig s;
    s.d = c.d;
    s.experts = 8;
    s.dtype = c.dtype;
    return std::make_shared<SoftMoEFeedForward>(s, gen);
  });
}

TEST_CASE("clip_grad_norm_tensor keeps the norm on the device; clip_grad_norm reads it back once") {
  CountingBackend counting(cpu_backend());
  ScopedBackendOverride stand_in(DeviceType::CUDA, counting);
  Variable a(from_vector(std::vector<float>{3, 4}, {2}).to(Device::cuda()), /*requires_grad=*/true);
  a.set_grad(from_vector(std::vector<float>{3, 4}, {2}).to(Device::cuda()));
  counting.reset();
  const Tensor norm = clip_grad_norm_tensor({a}, 1.0);
  CHECK(counting.reads() == 0);
  CHECK(counting.uploads() == 0);
  CHECK(norm.device() == Device::cuda());
  CHECK(clip_grad_norm({a}, 10.0) == doctest::Approx(1.0).epsilon(1e-6));
  CHECK(counting.reads() == 1);
}

TEST_CASE("indices and targets out of range on the device are still reported, without a read back") {
  CountingBackend counting(cpu_backend());
  ScopedBackendOverride stand_in(DeviceType::CUDA, counting);
  const Device device = Device::cuda();
  const Tensor src = zeros({5, 4}, DType::Float32, device);
  const Tensor index = from_vector(std::vector<std::int32_t>{0, 7}, {2}).to(device);
  const Tensor targets = from_vector(std::vector<std::int32_t>{1, 9}, {2}).to(device);
  counting.reset();
  const char* want = "index_select: index (flat position 1) = 7 is out of range [0, 5) for src [5, 4]";
  CHECK_THROWS_WITH_AS(kernels::index_select(src, index), doctest::Contains(want), Error);
  CHECK_THROWS_WITH_AS(kernels::embedding(src, index.reshape({1, 2})),
                       doctest::Contains("embedding: ids (flat position 1) = 7 is out of range [0, 5)"), Error);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy(zeros({2, 4}, DType::Float32, device), targets),
                       doctest::Contains("cross_entropy: targets[1] = 9 is outside [0, 4)"), Error);
  CHECK(counting.reads() == 0);
}
