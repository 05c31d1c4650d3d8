// examples/train_mlp.cpp — the smallest complete use of moelab: a ReLU MLP learns three spirals.
//
// Data: three interleaved spirals in the plane, one class each (the classic toy problem where a
// linear model fails and a small MLP succeeds). Model: 2 -> h -> h -> 3 with ReLU, weights drawn
// from N(0, 1/fan_in) (He-style scaling halves that; either works here). Loss: cross-entropy.
// Optimiser: SGD with momentum, written out below in four lines so a reader sees what an
// optimizer does to a Variable's data and gradient.
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
#include "autograd/variable.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/parallel.h"

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

// A linear layer's parameters: w: [in, out], b: [out].
struct Linear {
  Variable w, b;
  Linear(std::int64_t in, std::int64_t out, Generator& gen)
      : w(normal({in, out}, 0.0, std::sqrt(2.0 / static_cast<double>(in)), gen), /*requires_grad=*/true),
        b(zeros({out}), /*requires_grad=*/true) {}
  Variable operator()(const Variable& x) const { return add(matmul(x, w), b); }  // x: [N, in] -> [N, out]
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
    const Linear l1(2, hidden, gen), l2(hidden, hidden, gen), l3(hidden, 3, gen);
    const std::vector<Variable> params = {l1.w, l1.b, l2.w, l2.b, l3.w, l3.b};
    std::vector<Tensor> velocity;
    for (const Variable& p : params) velocity.push_back(zeros(p.shape()));

    std::printf("three spirals, %lld points; MLP 2 -> %d -> %d -> 3; SGD lr %g momentum %g\n",
                static_cast<long long>(data.points.size(0)), hidden, hidden, lr, momentum);
    const auto start = std::chrono::steady_clock::now();
    for (int step = 1; step <= steps; ++step) {
      // Forward: logits = l3(relu(l2(relu(l1(x))))), loss = mean cross-entropy.
      Variable logits = l3(relu(l2(relu(l1(x)))));
      Variable loss = cross_entropy(logits, data.labels);
      // Backward: fills p.grad() for every parameter.
      for (Variable p : params) p.zero_grad();
      loss.backward();
      // SGD with momentum: v = momentum * v + g;  p = p - lr * v, written into p's own storage
      // (every handle to the parameter sees the new values).
      for (std::size_t i = 0; i < params.size(); ++i) {
        Variable p = params[i];
        velocity[i] = kernels::binary(kernels::BinaryOp::Add,
                                      kernels::binary_scalar(kernels::BinaryOp::Mul, velocity[i], momentum), p.grad());
        kernels::copy(p.data(), kernels::binary(kernels::BinaryOp::Sub, p.data(),
                                                kernels::binary_scalar(kernels::BinaryOp::Mul, velocity[i], lr)));
      }
      if (step == 1 || step % print_every == 0 || step == steps)
        std::printf("step %5d  loss %.4f  accuracy %.3f\n", step, loss.data().item<float>(),
                    accuracy(logits.data(), data.labels));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    NoGradGuard no_grad;
    const Variable logits = l3(relu(l2(relu(l1(x)))));
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
