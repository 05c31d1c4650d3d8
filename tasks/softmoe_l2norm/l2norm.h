// tasks/softmoe_l2norm/l2norm.h — the implicit-bias paper's Appendix C: can a Soft MoE layer
// followed by a fixed summation learn t(X) = ||X||_2? (Chung et al., "Beyond Parameter Count:
// Implicit Bias in Soft Mixture of Experts", 2024: Theorem 1 in Section 3 and Appendix C.)
//
// Theorem 1: with ONE expert (n = 1, one slot) no Lipschitz expert f and Lipschitz head g make
// g(sMoE_f(X)) approximate ||X||_2 everywhere. Appendix C checks it in practice and adds that more
// experts, with the same total expert parameters, do better and better.
//
// Data (Appendix C): x ~ N(0, 5 I_10) — covariance 5 I, so each coordinate has VARIANCE 5 (std
// sqrt 5) — and the label y = ||x||_2, a fresh batch every step (the training loss is also a test
// loss). The 10 coordinates are cut into m tokens of d values "in order of their dimension index":
//   x: [B, 10] -> X: [B, m, d] with X[b, i, j] = x[b, i*d + j]   (a row-major reshape, a view)
// for (m, d) = (5, 2) or (2, 5).
//
// Model (Appendix C, Definition 1 with equation (1)):
//   Y    = SoftMoE(X)            [B, m, d]   n experts, one slot each; logits X @ phi (no
//                                            normalisation: the paper's equation (1)); experts ReLU
//                                            MLPs d -> h -> d WITHOUT biases, h = 10 d / n, so the
//                                            experts hold n * 2 d h = 20 d^2 parameters for every n
//                                            (the paper: "always constant at 20d^2")
//   pred = sum_{i, j} Y[b, i, j] [B]         the "non-trainable summation prediction head": every
//                                            output of every token, summed; no parameters
//   loss = mean_b (pred_b - y_b)^2           MSE, Adam (PyTorch defaults) with lr 1e-3
// No residual connection: the head sees only the Soft MoE's output.
//
// The reference the claim is measured against: the best CONSTANT predictor, c = E||x||, whose MSE
// is Var ||x||. With ||x|| = sigma * chi_k (k = 10, sigma^2 = 5):
//   E||x|| = sigma sqrt(2) Gamma((k+1)/2) / Gamma(k/2) = 6.8967...,
//   Var||x|| = sigma^2 k - (E||x||)^2 = 2.4355...   (the zero predictor's MSE is sigma^2 k = 50)
// "n = 1 cannot lower the loss" reads: its loss stays at (or above) 2.44; n >= 2 goes below.
// Note: with bias-free experts the model has no constant term — pred(0) = 0 — so even the constant
// is not free for it to represent.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "nn/module.h"
#include "nn/moe/soft_moe.h"

namespace moelab::l2norm {

// One architecture of the sweep.
struct ModelSpec {
  std::int64_t input_dim = 10;  // k, the length of x
  std::int64_t d = 2;           // token width (m = input_dim / d tokens)
  std::int64_t experts = 1;     // n, one slot each
  std::int64_t width_factor = 10;  // n * h = width_factor * d (the paper: 10)
  bool normalize = false;       // SoftMoE's l2-normalised routing (the paper's eq. (1): no)
  std::string slot_inputs = "normalized";  // with normalize: slots mix X_hat ("normalized") or X ("raw")
  std::string phi_init = "uniform";
  bool bias = false;            // expert biases (the paper: none, 20 d^2 expert parameters)

  std::int64_t tokens() const { return input_dim / d; }  // m
  // h = width_factor * d / n; throws moelab::Error when n does not divide width_factor * d.
  std::int64_t hidden() const;
  std::string tokenisation() const;  // "5x2": m tokens x d values
  // n * (2 d h) (+ n (h + d) with biases)
  std::int64_t expert_parameters() const;
  // phi: d * n (+ 1 scale with normalize)
  std::int64_t router_parameters() const;
  SoftMoEConfig config() const;
};

// A Soft MoE layer and the fixed summation head: x: [B, m, d] -> pred [B].
class L2NormModel : public Module {
 public:
  L2NormModel(const ModelSpec& spec, Generator& gen);
  // x: [B, m, d] -> the Soft MoE's output [B, m, d]
  Variable layer_output(const Variable& x);
  // x: [B, m, d] -> [B], the sum of layer_output over tokens and features
  Variable forward(const Variable& x);
  SoftMoE& moe() const { return *moe_; }
  const ModelSpec& spec() const { return spec_; }

 private:
  ModelSpec spec_;
  std::shared_ptr<SoftMoE> moe_;
};

// y: [B, m, d] -> [B], sum over tokens and features (the head; no parameters, differentiable).
Variable summation_head(const Variable& y);

struct Batch {
  Tensor x;  // [B, m, d], a view of the [B, input_dim] draw
  Tensor y;  // [B], ||x||_2 per example (computed in double, stored as float32)
};
// B fresh samples x ~ N(0, variance * I_input_dim), tokenised into m tokens of width d.
Batch draw_batch(std::int64_t batch, std::int64_t input_dim, std::int64_t d, double variance, Generator& gen);

// Var ||x|| for x ~ N(0, variance * I_k): the MSE of the best constant predictor E||x||.
double constant_predictor_loss(std::int64_t k, double variance);
// E ||x|| for the same x.
double expected_norm(std::int64_t k, double variance);

struct TrainOptions {
  std::int64_t steps = 500;
  std::int64_t batch = 10000;
  double lr = 1e-3;
  double variance = 5.0;
  double final_fraction = 0.05;  // the progress line's closing "final loss": the mean of this last fraction
  std::string label;             // the progress line's label (empty: none)
};

// Trains the model with Adam on fresh batches from data_gen; calls on_step(step (1-based), loss)
// after every step and returns the training losses. Throws moelab::Error on a non-finite loss.
std::vector<double> train(L2NormModel& model, const TrainOptions& options, Generator& data_gen,
                          const std::function<void(std::int64_t, double)>& on_step = {});

// The mean of the last ceil(fraction * size) values (at least one).
double tail_mean(const std::vector<double>& values, double fraction);

// A deterministic hash of a string, to derive seeds from names (FNV-1a, 64 bits).
std::uint64_t name_hash(const std::string& text);

}  // namespace moelab::l2norm
