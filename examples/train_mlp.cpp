// examples/train_mlp.cpp — the smallest complete use of moelab: a ReLU MLP learns three spirals.
//
// Data: three interleaved spirals in the plane, one class each (the classic toy problem where a
// linear model fails and a small MLP succeeds). Model: 2 -> h -> h -> 3 with ReLU, weights drawn
// from N(0, 1/fan_in) (He-style scaling halves that; either works here). Loss: cross-entropy.
// Optimiser: SGD with momentum, written out below in four lines as an Optimizer (nn/optim/
// optimizer.h) so a reader sees what an optimizer does to a Variable's data and gradient.
// Training: the one training loop every experiment uses (nn/train_loop.h), given the
// model, the optimizer and a function that returns a step's loss.
//
// Everything the program does goes through the engine: core/ tensors and kernels, autograd/
// variables, the backward pass. ./test.sh (or `cmake --build build`) builds it; run
// build/train_mlp (build/train_mlp --help lists its options).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "autograd/no_grad.h"
#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "autograd/variable.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/openmp_wait.h"
#include "core/parallel.h"
#include "nn/module.h"
#include "nn/optim/optimizer.h"
#include "nn/train_loop.h"

using namespace moelab;

namespace {

struct Dataset {
  Tensor points;  // [N, 2] float32
  Tensor labels;  // [N] int32 in {0, 1, 2}
};

// N points per class on three spirals, with Gaussian jitter.
Dataset make_spirals(std::int64_t per_class, Generator& gen) {
  const int classes = 3;
  std::vector<float> xy;
  std::vector<std::int32_t> labels;
  for (int c = 0; c < classes; ++c)
    for (std::int64_t i = 0; i < per_class; ++i) {
      const double r = static_cast<double>(i) / static_cast<double>(per_class);  // radius 0..1
      const double angle = 4.0 * r + c * 2.0 * M_PI / classes + 0.2 * gen.next_normal();
      xy.push_back(static_cast<float>(r * std::sin(angle)));
      xy.push_back(static_cast<float>(r * std::cos(angle)));
      labels.push_back(c);
    }
  const std::int64_t n = per_class * classes;
  return {from_vector(xy, {n, 2}), from_vector(labels, {n})};
}

// The model: 2 -> h -> h -> 3, each layer's parameters w: [in, out], b: [out], registered in a
// Module so the training loop can find them.
class SpiralMLP : public Module {
 public:
  SpiralMLP(std::int64_t hidden, Generator& gen) {
    const std::int64_t sizes[] = {2, hidden, hidden, 3};
    for (int i = 0; i < 3; ++i) {
      w_[i] = register_parameter("w" + std::to_string(i + 1),
                                 normal({sizes[i], sizes[i + 1]}, 0.0, std::sqrt(2.0 / static_cast<double>(sizes[i])), gen));
      b_[i] = register_parameter("b" + std::to_string(i + 1), zeros({sizes[i + 1]}));
    }
  }
  // x: [N, 2] -> logits [N, 3]: l3(relu(l2(relu(l1(x))))) with l(x) = x w + b
  Variable forward(const Variable& x) const {
    Variable h = x;
    for (int i = 0; i < 3; ++i) {
      h = add(matmul(h, w_[i]), b_[i]);
      if (i < 2) h = relu(h);
    }
    return h;
  }

 private:
  Variable w_[3], b_[3];
};

// SGD with momentum: v = momentum * v + g;  p = p - lr * v, written into p's own storage (every
// handle to the parameter sees the new values). nn/optim/sgd.h is the library's fused version.
class MomentumSGD : public Optimizer {
 public:
  MomentumSGD(std::vector<Variable> params, double lr, double momentum)
      : Optimizer({ParamGroup{.params = std::move(params), .lr = lr}}), momentum_(momentum) {
    for (const Variable& p : groups_[0].params) velocity_.push_back(zeros(p.shape()));
  }
  void update() override {  // Optimizer::step() calls it, then any step hooks
    const double lr = groups_[0].lr;
    for (std::size_t i = 0; i < velocity_.size(); ++i) {
      Variable p = groups_[0].params[i];
      velocity_[i] = kernels::add(kernels::mul(velocity_[i], momentum_), p.grad());
      kernels::copy(p.data(), kernels::sub(p.data(), kernels::mul(velocity_[i], lr)));
    }
    ++steps_taken_;
  }
  std::vector<std::pair<std::string, Tensor>> state_tensors() const override {
    std::vector<std::pair<std::string, Tensor>> out;
    for (std::size_t i = 0; i < velocity_.size(); ++i) out.emplace_back("velocity." + std::to_string(i), velocity_[i]);
    return out;
  }
  void load_state_tensors(const std::vector<std::pair<std::string, Tensor>>& state) override {
    MOELAB_CHECK(state.size() == velocity_.size(), "MomentumSGD::load_state_tensors", "expected ", velocity_.size(),
                 " velocities, got ", state.size());
    for (std::size_t i = 0; i < state.size(); ++i) velocity_[i] = state[i].second;
  }

 private:
  double momentum_;
  std::vector<Tensor> velocity_;
};

double accuracy(const Tensor& logits, const Tensor& labels) {
  const Tensor predicted = kernels::max(logits, -1).indices;  // argmax per row
  const std::vector<std::int32_t> p = predicted.to_vector<std::int32_t>(), y = labels.to_vector<std::int32_t>();
  std::int64_t right = 0;
  for (std::size_t i = 0; i < p.size(); ++i) right += p[i] == y[i];
  return static_cast<double>(right) / static_cast<double>(p.size());
}

}  // namespace

int main(int argc, char** argv) {
  moelab::wait_passively_unless_set(argv);  // OpenMP threads sleep between regions (core/openmp_wait.h)
  CLI::App app{"train_mlp: a ReLU MLP learns three spirals with moelab's autograd (loss printed as it falls)"};
  int steps = 1500, hidden = 64, threads = 1, print_every = 100;
  double lr = 0.1, momentum = 0.9, require_accuracy = 0.0;
  std::uint64_t seed = 0;
  std::int64_t per_class = 200;
  app.add_option("--steps", steps, "full-batch SGD steps")->check(CLI::Range(1, 100000000))->capture_default_str();
  app.add_option("--hidden", hidden, "width of the two hidden layers")->check(CLI::Range(1, 1000000))->capture_default_str();
  app.add_option("--lr", lr, "learning rate")->check(CLI::Range(1e-9, 1e3))->capture_default_str();
  app.add_option("--momentum", momentum, "SGD momentum")->check(CLI::Range(0.0, 0.999))->capture_default_str();
  app.add_option("--points", per_class, "points per class")->check(CLI::Range(std::int64_t{1}, std::int64_t{10000000}))->capture_default_str();
  app.add_option("--seed", seed, "seed for data and weights")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--print-every", print_every, "print the loss every N steps")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  app.add_option("--require-accuracy", require_accuracy,
                 "exit with status 3 if the final training accuracy is below this (ctest uses it)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help exits 0; a bad option or value exits 2
  }
  set_num_threads(threads);

  try {
    Generator gen(seed);
    const Dataset data = make_spirals(per_class, gen);
    const Variable x(data.points);
    SpiralMLP model(hidden, gen);
    MomentumSGD opt(model.parameters(), lr, momentum);

    std::printf("three spirals, %lld points; MLP 2 -> %d -> %d -> 3; SGD lr %g momentum %g\n",
                static_cast<long long>(data.points.size(0)), hidden, hidden, lr, momentum);
    const auto start = std::chrono::steady_clock::now();
    Variable logits;  // the last step's, for the accuracy printed with its loss
    LoopHooks hooks;
    // Forward: logits = l3(relu(l2(relu(l1(x))))), loss = mean cross-entropy. The loop then runs
    // the backward (filling p.grad() for every parameter) and the optimizer's step.
    hooks.batch_loss = [&](std::int64_t) {
      logits = model.forward(x);
      StepLoss s;
      s.loss = cross_entropy(logits, data.labels);
      return s;
    };
    hooks.on_step = [&](const LoopState& state, double loss) {
      if (state.step == 1 || state.step % print_every == 0 || state.step == steps)
        std::printf("step %5lld  loss %.4f  accuracy %.3f\n", static_cast<long long>(state.step), loss,
                    accuracy(logits.data(), data.labels));
    };
    train_loop(model, opt, LoopOptions{.steps = steps, .loss_name = "cross-entropy"}, hooks);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    NoGradGuard no_grad;
    logits = model.forward(x);
    const double final_accuracy = accuracy(logits.data(), data.labels);
    std::printf("done in %.2f s: final loss %.4f, training accuracy %.3f\n", seconds,
                cross_entropy(logits, data.labels).data().item<float>(), final_accuracy);
    if (final_accuracy < require_accuracy) {
      std::fprintf(stderr, "train_mlp: accuracy %.3f is below the required %.3f\n", final_accuracy, require_accuracy);
      return 3;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "train_mlp: %s\n", e.what());
    return 1;
  }
  return 0;
}
