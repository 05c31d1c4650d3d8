// tasks/teacher_student/teacher_student.h — the granularity paper's teacher-student regression
// (Boix-Adsera and Rigollet, "The power of fine-grained experts: Granularity boosts expressivity
// in Mixture of Experts", 2025; docs/REFERENCES.md. Section 4, Figures 2 and 3, Appendix D): a
// student MoE trained by MSE to imitate a random teacher MoE on standard Gaussian inputs.
//
// The architecture of both models is one routed MoE layer (nn/moe/moe_layer.h, the same MoELayer
// the other experiments train), written "<m>e<k>a" (m experts, k active per token), with expert
// width w and dimension d:
//
//   x ~ N(0, I_d)                                   [B, d]   fresh samples every epoch
//   logits = x R^T (+ b_student)                    [B, m]   R: router.weight [m, d]
//   S = the k largest logits, g = softmax(logits_S) [B, k]   ("topk-softmax", the paper's code;
//                                                             "equal" = 1/k, the paper's theory)
//   f(x) = sum_j g_j (relu(x W1[S_j] + b1[S_j]) W2[S_j] + b2[S_j])        [B, d]
//          experts are ReLU MLPs d -> w -> d with biases (MoEConfig::bias = true)
//
// Granularity is k, the number of active experts; kw is the number of active neurons. The paper
// keeps kw fixed (teacher 256, student 320 = 25% more to ease optimisation) and varies k, so
// w = kw / k (rounded here when k does not divide kw).
//
// Settings that come from the paper's released code (Appendix D and the issue): ReLU experts with
// biases; top-k on the raw logits with a softmax over the k selected logits; no router bias in the
// teacher, an optional trainable one in the student (Figure 3); d = 256; fresh 2^18 training
// samples per epoch and one test set of 2^12 drawn before training (the paper's code keeps one);
// batch 2048; AdamW (weight decay 0.01) with lr 1e-3 or 1e-2 (the better one is reported) and cosine decay stepped once per epoch; 100 epochs. The figure of merit
// is the normalised test loss: the test MSE divided by the MSE of the zero predictor
// (mean ||f_teacher(x)||^2 / d on the same test samples), minimised over epochs.
//
// The teacher is a freshly initialised MoELayer (PyTorch nn.Linear initialisation, see
// nn/moe/expert_bank.h and nn/moe/top_k_router.h) drawn from a Generator seeded by the run seed
// and the teacher's name, so every student of one teacher sees the same function. (The paper does
// not say how its teachers are initialised; the default initialisation is our assumption.)
//
// The student's router can be any registered scheme (MoESpec::router, the `router` setting; the
// teacher is always topk): its extra options (`router_options`) go to the factory as they are,
// and topk also gets gates and bias from the spec, exactly as before the setting existed. With
// another scheme `gates` must stay topk-softmax (that scheme's own gates are set through its
// options) and router_bias asks it for its "bias" option.
//
// Note (docs/EXPERIMENTS.md): with k = 1 and topk-softmax gates the single gate is always 1, so a
// k = 1 student's router would get no gradient: the topk router refuses it (exit 2) unless
// router_options asks for allow_constant_gates:true; a k = 1 teacher, which never trains, is
// built with it. With "equal" gates no router gets a gradient. The paper's grids start at k = 2.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "nn/moe/moe_layer.h"

namespace moelab::teacher_student {

// One MoE architecture: m experts of width w, k active, in dimension d.
struct MoESpec {
  std::int64_t experts = 0, k = 0, width = 0, d = 0;
  std::string gates = "topk-softmax";  // or "equal"
  bool router_bias = false;            // trainable router bias (the student of Figure 3)
  std::string router = "topk";         // registered router name (nn/moe/router.h)
  std::map<std::string, std::string> router_options;  // more options for its factory (see above)

  std::string name() const;  // "16e8a"
  std::int64_t active_neurons() const { return k * width; }
  // Every parameter: router weight (+ bias) and the experts' w_in, b_in, w_out, b_out (every
  // built-in router has an [m, d] weight and an optional bias).
  std::int64_t total_parameters() const;
  MoEConfig config() const;
};

// The spec with `active` active neurons and m = ratio * k experts: width = round(active / k).
// moelab::Error when active < k: k experts cannot share fewer than k neurons (the
// command's validation rejects such settings first).
MoESpec spec_for(std::int64_t k, std::int64_t ratio, std::int64_t active, std::int64_t d);

// A deterministic hash of a string, to derive seeds from names (FNV-1a, 64 bits).
std::uint64_t name_hash(const std::string& text);

// The teacher: a fresh MoELayer drawn from Generator(seed); same seed, same teacher, bitwise.
std::unique_ptr<MoELayer> make_teacher(const MoESpec& spec, std::uint64_t seed);
// A student: a fresh MoELayer from `gen` (the same class users train elsewhere).
std::unique_ptr<MoELayer> make_student(const MoESpec& spec, Generator& gen);
// Copies every parameter of `from` into `to` (same names and shapes, else moelab::Error).
void copy_parameters(const MoELayer& from, MoELayer& to);

// A batch of the regression: x ~ N(0, I_d) [n, d] and the teacher's y = teacher(x) [n, d]
// (computed without a graph), both on the teacher's device (Module::device()).
struct Batch {
  Tensor x, y;
};
Batch draw_batch(MoELayer& teacher, std::int64_t n, Generator& gen);

// MSE of `student` on the batch divided by the zero predictor's MSE (mean y^2), without a graph.
double normalised_loss(MoELayer& student, const Batch& batch);

struct TrainOptions {
  std::int64_t epochs = 100;
  std::int64_t samples_per_epoch = 1 << 18;  // fresh training samples per epoch
  std::int64_t test_samples = 1 << 12;       // one test set, drawn before training, used every epoch
  std::int64_t batch = 2048;
  double lr = 1e-3;
  double weight_decay = 0.01;                // AdamW, on every parameter (PyTorch's default)
  std::string label;                         // for the progress line (empty: no progress line)
};

struct EpochRecord {
  std::int64_t epoch = 0;   // 1-based
  double lr = 0;            // the learning rate used during the epoch
  double train = 0;         // mean over the epoch's batches of the normalised training loss
  double test = 0;          // normalised loss on the run's test set, after the epoch
};

struct TrainResult {
  std::vector<EpochRecord> epochs;
  double best_test = 0;     // min over epochs of EpochRecord::test
  std::int64_t best_epoch = 0;
  double seconds = 0;
};

// Trains `student` on `teacher` with AdamW and a per-epoch cosine schedule; data from `data_gen`.
TrainResult train_student(MoELayer& student, MoELayer& teacher, const TrainOptions& options,
                          Generator& data_gen);

}  // namespace moelab::teacher_student
